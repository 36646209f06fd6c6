// Vertex-only program for transform feedback: the world-space skinned position and normal of every
// vertex of every instance, exactly as mesh.vert computes them (tests compare them with skin.py).
#include "skinning.glsl"

in vec3 a_position;
in vec3 a_normal;
in vec3 a_offset;  // per instance

out vec3 f_position;
out vec3 f_normal;

void main() {
    vec4 r0, r1, r2;
    skin_rows(r0, r1, r2);
    f_position = skin_point(r0, r1, r2, a_position) + a_offset;
    f_normal = skin_normal(r0, r1, r2, a_normal);
}
