// Vertex-only program for transform feedback: the world-space skinned position and normal of every
// vertex of every instance, exactly as mesh.vert computes them (tests compare them with skin.py).
#include "skinning.glsl"

in vec3 a_position;
in vec3 a_normal;
in vec3 a_offset;  // per instance

out vec3 f_position;
out vec3 f_normal;

void main() {
    skin_vertex(a_position, a_normal, f_position, f_normal);
    f_position += a_offset;
}
