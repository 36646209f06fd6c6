// Procedural grid (grid.glsl) fading out with distance so the floor melts into the background gradient.
in vec3 v_world;
uniform vec3 u_center;
uniform float u_half_size;
uniform float u_cell;
uniform vec3 u_floor_color;   // display values
uniform vec3 u_line_color;
out vec4 f_color;

#include "grid.glsl"

void main() {
    vec3 color = grid_color(v_world.xz, u_cell, u_floor_color, u_line_color);
    float dist = length(v_world.xz - u_center.xz) / u_half_size;
    float alpha = 1.0 - smoothstep(0.25, 1.0, dist);
    f_color = vec4(color, alpha);
}
