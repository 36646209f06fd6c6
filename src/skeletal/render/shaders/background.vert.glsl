// One triangle covering the screen, made from gl_VertexID (no vertex buffer).
out vec2 v_screen;  // 0..1 across the viewport, y up
void main() {
    vec2 p = vec2(float((gl_VertexID << 1) & 2), float(gl_VertexID & 2));  // (0,0) (2,0) (0,2)
    v_screen = p;
    gl_Position = vec4(p * 2.0 - 1.0, 1.0, 1.0);
}
