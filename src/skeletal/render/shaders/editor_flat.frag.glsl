in vec4 v_color;
out vec4 f_color;
// flat vertex colour (the editor's keys and ghosts)
void main() { f_color = v_color; }
