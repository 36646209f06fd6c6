// The ground grid of ground.frag.glsl on a shaded surface: lines every u_cell in world x/z (stronger
// every 5 cells), half-Lambert light, fading out toward the patch's edge.
in vec3 v_world;
in vec3 v_normal;
uniform vec3 u_center;        // unshifted world centre of the patch
uniform float u_half_size;
uniform float u_cell;
uniform vec3 u_floor_color;
uniform vec3 u_line_color;
uniform vec3 u_light_dir;
out vec4 f_color;

float grid_line(vec2 coord, float width) {
    vec2 d = fwidth(coord);
    vec2 g = abs(fract(coord - 0.5) - 0.5) / max(d, vec2(1e-6));
    return 1.0 - min(min(g.x, g.y) / width, 1.0);
}

void main() {
    vec2 coord = v_world.xz / u_cell;
    float minor = grid_line(coord, 1.0);
    float major = grid_line(coord / 5.0, 1.5);
    vec3 color = mix(u_floor_color, u_line_color, clamp(0.45 * minor + 0.8 * major, 0.0, 1.0));
    float light = 0.55 + 0.45 * max(dot(normalize(v_normal), normalize(u_light_dir)), 0.0);
    float dist = max(abs(v_world.x - u_center.x), abs(v_world.z - u_center.z)) / u_half_size;
    float alpha = 1.0 - smoothstep(0.55, 1.0, dist);
    f_color = vec4(color * light, alpha);
}
