in vec2 a_pos;
in vec4 a_color;
uniform vec2 u_size;
out vec4 v_color;
// the editor's dope-sheet keys: pixel positions in the panel -> clip space
void main() {
    gl_Position = vec4(a_pos.x / u_size.x * 2.0 - 1.0, 1.0 - a_pos.y / u_size.y * 2.0, 0.0, 1.0);
    v_color = a_color;
}
