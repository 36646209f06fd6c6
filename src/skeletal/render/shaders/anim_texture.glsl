// Palette rows from a baked animation texture (anim_texture.py), for skinning.glsl's palette_row(i):
// per instance a clip and a clock, per frame one uniform (u_time); two texel fetches and a lerp per row.
//
// Texture: RGBA32F, one row per baked frame (clip after clip); texel 3 * slot + i of a row is row i of
// palette slot `slot`'s row-major 3x4 matrix. Clip c: u_anim_clips[c] = (first row, frames, duration);
// its frames sit at k * duration / (frames - 1). Clips loop.
// Per instance (divisor 1): a_anim = (clip index, clock at u_time = 0, speed).

uniform sampler2D u_anim_tex;
uniform float u_time;                   // seconds; the only per-frame input
uniform vec3 u_anim_clips[ANIM_CLIPS];  // first row, frame count, duration (seconds)
in vec3 a_anim;

vec4 palette_row(int i) {
    // i = (instance * u_joint_stride + slot) * 3 + r (skinning.glsl); the texture row has slot * 3 + r
    int local = i - (u_instance_base + gl_InstanceID) * u_joint_stride * 3;
    vec3 clip = u_anim_clips[int(a_anim.x)];
    float t = a_anim.y + u_time * a_anim.z;
    float steps = clip.y - 1.0;
    float f = clip.z > 0.0 ? min((t - clip.z * floor(t / clip.z)) * (steps / clip.z), steps) : 0.0;
    float f0 = floor(f);
    int row0 = int(clip.x + f0);
    int row1 = int(clip.x + min(f0 + 1.0, steps));
    return mix(texelFetch(u_anim_tex, ivec2(local, row0), 0), texelFetch(u_anim_tex, ivec2(local, row1), 0), f - f0);
}
