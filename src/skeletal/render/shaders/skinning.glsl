// Skinning in the vertex shader, shared by mesh.vert and feedback.vert: linear blend skinning, or
// dual quaternion skinning when SKINNING_DQS is defined (see the end of this file). Both vertex
// shaders call skin_vertex(position, normal, out position, out normal).
//
// Palette contract (see palette.py): palette_row(i) is row i of the frame's palette, a vec4. Matrix
// m of instance k occupies rows 3*(k*u_joint_stride + m) + 0..2: the three rows of a ROW-MAJOR 3x4
// affine matrix (xyz = linear part, w = translation); its bottom row 0 0 0 1 is implied.
// One define picks where the rows live: PALETTE_UNIFORM, PALETTE_UBO, PALETTE_SSBO,
// PALETTE_TEXTURE_BUFFER or PALETTE_TEXTURE_2D; PALETTE_ANIM_TEXTURE reads a baked animation texture
// (anim_texture.glsl). INFLUENCES is 4 or 8 (joint/weight attribute pairs).

uniform int u_joint_stride;   // J: palette matrices per instance
uniform int u_joint_offset;   // palette slot of this primitive's skin joint 0 (or of its rigid node)
uniform int u_instance_base;  // added to gl_InstanceID (per-instance draws of morphed primitives)

#if defined(PALETTE_UNIFORM)
uniform vec4 u_palette[PALETTE_ROWS];
vec4 palette_row(int i) { return u_palette[i]; }
#elif defined(PALETTE_UBO)
layout(std140) uniform Palette { vec4 rows[PALETTE_ROWS]; } palette_block;
vec4 palette_row(int i) { return palette_block.rows[i]; }
#elif defined(PALETTE_SSBO)
layout(std430, binding = 0) readonly buffer Palette { vec4 rows[]; } palette_block;
vec4 palette_row(int i) { return palette_block.rows[i]; }
#elif defined(PALETTE_TEXTURE_BUFFER)
uniform samplerBuffer u_palette_tex;  // RGBA32F, one texel per row
vec4 palette_row(int i) { return texelFetch(u_palette_tex, i); }
#elif defined(PALETTE_ANIM_TEXTURE)
#include "anim_texture.glsl"
#elif defined(PALETTE_TEXTURE_2D)
uniform sampler2D u_palette_tex;      // RGBA32F, PALETTE_TEXTURE_WIDTH texels per texture row
vec4 palette_row(int i) {
    return texelFetch(u_palette_tex, ivec2(i % PALETTE_TEXTURE_WIDTH, i / PALETTE_TEXTURE_WIDTH), 0);
}
#else
#error "skinning.glsl: no PALETTE_* mode defined"
#endif

// Influences: skin-local joint indices (integers: glVertexAttribIPointer) and weights summing to 1.
in ivec4 a_joints0;
in vec4 a_weights0;
#if INFLUENCES > 4
in ivec4 a_joints1;
in vec4 a_weights1;
#endif

int skin_instance() { return u_instance_base + gl_InstanceID; }

void add_influence(int first_slot, int joint, float weight, inout vec4 r0, inout vec4 r1, inout vec4 r2) {
    if (weight == 0.0) return;
    int row = (first_slot + joint) * 3;
    r0 += weight * palette_row(row);
    r1 += weight * palette_row(row + 1);
    r2 += weight * palette_row(row + 2);
}

// The weighted sum of this vertex's influence matrices (blend first, transform once: as skin.py).
void skin_rows(out vec4 r0, out vec4 r1, out vec4 r2) {
    int first_slot = skin_instance() * u_joint_stride + u_joint_offset;
    r0 = vec4(0.0);
    r1 = vec4(0.0);
    r2 = vec4(0.0);
    for (int k = 0; k < 4; ++k) add_influence(first_slot, a_joints0[k], a_weights0[k], r0, r1, r2);
#if INFLUENCES > 4
    for (int k = 0; k < 4; ++k) add_influence(first_slot, a_joints1[k], a_weights1[k], r0, r1, r2);
#endif
}

vec3 skin_point(vec4 r0, vec4 r1, vec4 r2, vec3 p) {
    vec4 h = vec4(p, 1.0);
    return vec3(dot(r0, h), dot(r1, h), dot(r2, h));
}

// Normals go through the cofactor matrix det(M) * inverse(M)^T (exact under non-uniform scale),
// renormalised and flipped when det < 0: the same as skin.py's kernel.
vec3 skin_normal(vec4 r0, vec4 r1, vec4 r2, vec3 n) {
    vec3 c0 = vec3(r0.x, r1.x, r2.x);  // columns of the linear part
    vec3 c1 = vec3(r0.y, r1.y, r2.y);
    vec3 c2 = vec3(r0.z, r1.z, r2.z);
    mat3 cofactor = mat3(cross(c1, c2), cross(c2, c0), cross(c0, c1));  // mat3() takes columns
    float det = dot(c0, cross(c1, c2));
    vec3 m = cofactor * n;
    float len = length(m);
    if (len > 0.0) m *= (det >= 0.0 ? 1.0 : -1.0) / len;
    return m;
}

#if defined(SKINNING_NONE)
// Positions and normals arrive skinned (the renderer's cpu_skinning: numba on the CPU).
void skin_vertex(vec3 p, vec3 n, out vec3 p_out, out vec3 n_out) {
    p_out = p;
    n_out = n;
}
#elif defined(SKINNING_DQS)
// Dual quaternion skinning, the same maths as skeletal/skin_dq.py. Palette: FOUR rows per joint
// (rows 4*(k*u_joint_stride + m) + 0..3): qr (unit rotation quaternion, xyzw), qd (dual part,
// 0.5 * t * qr), then the joint's symmetric scale/shear matrix S as (s00, s01, s02, s11) and
// (s12, s22, -, -) (z: the CPU kernel's "this joint scales" flag, not read here): the same 16 floats
// per joint as the CPU kernel's packed palette. Scale-separated: p' = DQ(sum w_k sign_k (qr, qd)_k) applied to (sum w_k S_k) p,
// the signs putting every qr in the hemisphere of the pivot (the largest weight, first of equals).
const int DQ_ROWS = 4;

void dq_pivot(int joint, float weight, inout int pivot, inout float best) {
    if (weight > best) { best = weight; pivot = joint; }
}

void dq_add(int first_slot, int joint, float weight, vec4 pivot, inout vec4 br, inout vec4 bd, inout mat3 s) {
    if (weight == 0.0) return;
    int row = (first_slot + joint) * DQ_ROWS;
    vec4 qr = palette_row(row);
    vec4 r2 = palette_row(row + 2);
    vec4 r3 = palette_row(row + 3);
    float signed_weight = dot(qr, pivot) < 0.0 ? -weight : weight;
    br += signed_weight * qr;
    bd += signed_weight * palette_row(row + 1);
    s += weight * mat3(r2.x, r2.y, r2.z, r2.y, r2.w, r3.x, r2.z, r3.x, r3.y);
}

// x + 2/|q|^2 q x (q x x + w x): the rotation of the (unnormalised) blended quaternion q.
vec3 dq_rotate(vec4 q, float inv, vec3 x) {
    return x + inv * cross(q.xyz, cross(q.xyz, x) + q.w * x);
}

void skin_vertex(vec3 p, vec3 n, out vec3 p_out, out vec3 n_out) {
    int first_slot = skin_instance() * u_joint_stride + u_joint_offset;
    int pivot_joint = a_joints0[0];
    float best = a_weights0[0];
    for (int k = 1; k < 4; ++k) dq_pivot(a_joints0[k], a_weights0[k], pivot_joint, best);
#if INFLUENCES > 4
    for (int k = 0; k < 4; ++k) dq_pivot(a_joints1[k], a_weights1[k], pivot_joint, best);
#endif
    vec4 pivot = palette_row((first_slot + pivot_joint) * DQ_ROWS);
    vec4 br = vec4(0.0);
    vec4 bd = vec4(0.0);
    mat3 s = mat3(0.0);
    for (int k = 0; k < 4; ++k) dq_add(first_slot, a_joints0[k], a_weights0[k], pivot, br, bd, s);
#if INFLUENCES > 4
    for (int k = 0; k < 4; ++k) dq_add(first_slot, a_joints1[k], a_weights1[k], pivot, br, bd, s);
#endif
    float n2 = dot(br, br);
    float inv = n2 > 0.0 ? 2.0 / n2 : 0.0;  // rotation by br/|br|, translation 2 (bd br*) / |br|^2
    vec3 ps = s * p;
    vec3 u = cross(br.xyz, ps) + br.w * ps + bd.xyz;
    p_out = ps + inv * (cross(br.xyz, u) + br.w * bd.xyz - bd.w * br.xyz);
    // Normals: S's cofactor matrix (flipped when det S < 0, as for LBS), then the rotation.
    mat3 cofactor = mat3(cross(s[1], s[2]), cross(s[2], s[0]), cross(s[0], s[1]));
    float det = dot(s[0], cross(s[1], s[2]));
    vec3 m = dq_rotate(br, inv, cofactor * n);
    float len = length(m);
    n_out = len > 0.0 ? m * ((det >= 0.0 ? 1.0 : -1.0) / len) : m;
}
#else
void skin_vertex(vec3 p, vec3 n, out vec3 p_out, out vec3 n_out) {
    vec4 r0, r1, r2;
    skin_rows(r0, r1, r2);
    p_out = skin_point(r0, r1, r2, p);
    n_out = skin_normal(r0, r1, r2, n);
}
#endif
