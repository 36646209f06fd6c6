// Skinned (or rigid: one influence on the node's palette slot) mesh, instanced.
#include "skinning.glsl"

in vec3 a_position;   // bind-space position (morphs already applied on the CPU)
in vec3 a_normal;
in vec2 a_uv;         // glTF TEXCOORD_n: origin top-left, which is texel row 0 as uploaded
in float a_heat;      // weight of the overlay joint, 0..1 (heat map mode)
in vec3 a_offset;     // per instance (divisor 1): placement in the world

uniform mat4 u_view_proj;  // column-major, as GLSL wants
// Instance-rate attributes always start at element 0 (no base instance before GL 4.2), so a draw of
// instance i alone (u_instance_base = i) reads offsets[0]; the renderer passes offsets[i] - offsets[0].
uniform vec3 u_placement_shift;

out vec3 v_position;
out vec3 v_normal;
out vec2 v_uv;
out float v_heat;

void main() {
    skin_vertex(a_position, a_normal, v_position, v_normal);
    v_position += a_offset + u_placement_shift;
    v_uv = a_uv;
    v_heat = a_heat;
    gl_Position = u_view_proj * vec4(v_position, 1.0);
}
