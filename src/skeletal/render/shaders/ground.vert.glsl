// A large horizontal quad at the ground height, centred under the subject.
in vec2 a_corner;           // -1..1
uniform vec3 u_center;      // world position of the quad's centre (y = ground height)
uniform float u_half_size;
uniform mat4 u_view_proj;
out vec3 v_world;
void main() {
    v_world = u_center + vec3(a_corner.x, 0.0, a_corner.y) * u_half_size;
    gl_Position = u_view_proj * vec4(v_world, 1.0);
}
