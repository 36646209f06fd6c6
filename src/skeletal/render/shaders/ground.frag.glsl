// Procedural grid: thin lines every u_cell, stronger ones every 5 cells, antialiased with fwidth,
// fading out with distance so the floor melts into the background gradient.
in vec3 v_world;
uniform vec3 u_center;
uniform float u_half_size;
uniform float u_cell;
uniform vec3 u_floor_color;   // display values
uniform vec3 u_line_color;
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
    float dist = length(v_world.xz - u_center.xz) / u_half_size;
    float alpha = 1.0 - smoothstep(0.25, 1.0, dist);
    f_color = vec4(color, alpha);
}
