in vec2 v_local;
uniform float u_strength;
out vec4 f_color;
void main() {
    float r2 = dot(v_local, v_local);
    f_color = vec4(0.0, 0.0, 0.0, u_strength * exp(-3.5 * r2) * (1.0 - smoothstep(0.8, 1.0, r2)));
}
