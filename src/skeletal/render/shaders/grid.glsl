// The floor's grid, shared by ground.frag.glsl and terrain.frag.glsl: thin lines every `cell` in world
// x/z, stronger ones every 5 cells, antialiased with fwidth. Colours are display values.

float grid_line(vec2 coord, float width) {
    vec2 d = fwidth(coord);
    vec2 g = abs(fract(coord - 0.5) - 0.5) / max(d, vec2(1e-6));
    return 1.0 - min(min(g.x, g.y) / width, 1.0);
}

vec3 grid_color(vec2 world_xz, float cell, vec3 floor_color, vec3 line_color) {
    vec2 coord = world_xz / cell;
    float minor = grid_line(coord, 1.0);
    float major = grid_line(coord / 5.0, 1.5);
    return mix(floor_color, line_color, clamp(0.45 * minor + 0.8 * major, 0.0, 1.0));
}
