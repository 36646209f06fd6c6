in vec3 a_pos;
in vec4 a_color;
uniform mat4 u_view_proj;
out vec4 v_color;
// the editor's onion-skin ghosts: model-space lines
void main() {
    gl_Position = u_view_proj * vec4(a_pos, 1.0);
    v_color = a_color;
}
