uniform vec4 u_color;   // display RGBA
uniform bool u_round;   // points: discard outside the disc
out vec4 f_color;
void main() {
    if (u_round && length(gl_PointCoord - 0.5) > 0.5) discard;
    f_color = u_color;
}
