// Vertical gradient with a soft vignette; colours are display (gamma-encoded) values.
in vec2 v_screen;
uniform vec3 u_top_color;
uniform vec3 u_bottom_color;
out vec4 f_color;
void main() {
    float t = smoothstep(0.0, 1.0, v_screen.y);
    vec3 color = mix(u_bottom_color, u_top_color, t);
    vec2 d = v_screen - 0.5;
    color *= 1.0 - 0.25 * dot(d, d);
    f_color = vec4(color, 1.0);
}
