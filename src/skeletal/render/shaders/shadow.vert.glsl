// A soft round contact shadow under each instance: an instanced quad on the ground.
in vec2 a_corner;           // -1..1
in vec3 a_center;           // per instance: world position under the character (y ignored)
uniform float u_ground_y;
uniform float u_radius;
uniform mat4 u_view_proj;
out vec2 v_local;
void main() {
    v_local = a_corner;
    vec3 p = vec3(a_center.x + a_corner.x * u_radius, u_ground_y, a_center.z + a_corner.y * u_radius);
    gl_Position = u_view_proj * vec4(p, 1.0);
}
