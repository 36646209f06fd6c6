// Skeleton overlay: world-space points and line segments from the CPU world matrices.
in vec3 a_position;
uniform mat4 u_view_proj;
uniform float u_point_size;
void main() {
    gl_Position = u_view_proj * vec4(a_position, 1.0);
    gl_PointSize = u_point_size;
}
