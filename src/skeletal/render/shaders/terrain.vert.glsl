// A ground surface mesh (positions and normals in world space, shifted by -u_shift for drawing).
in vec3 a_position;
in vec3 a_normal;
uniform mat4 u_view_proj;
uniform vec3 u_shift;
out vec3 v_world;     // unshifted world position (the grid sticks to the ground)
out vec3 v_normal;
void main() {
    v_world = a_position;
    v_normal = a_normal;
    gl_Position = u_view_proj * vec4(a_position - u_shift, 1.0);
}
