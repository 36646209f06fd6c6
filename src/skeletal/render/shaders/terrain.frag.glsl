// The ground grid (grid.glsl) on a shaded surface: half-Lambert light, fading out toward the patch's edge.
in vec3 v_world;
in vec3 v_normal;
uniform vec3 u_center;        // unshifted world centre of the patch
uniform float u_half_size;
uniform float u_cell;
uniform vec3 u_floor_color;
uniform vec3 u_line_color;
uniform vec3 u_light_dir;
out vec4 f_color;

#include "grid.glsl"

void main() {
    vec3 color = grid_color(v_world.xz, u_cell, u_floor_color, u_line_color);
    float light = 0.55 + 0.45 * max(dot(normalize(v_normal), normalize(u_light_dir)), 0.0);
    float dist = max(abs(v_world.x - u_center.x), abs(v_world.z - u_center.z)) / u_half_size;
    float alpha = 1.0 - smoothstep(0.55, 1.0, dist);
    f_color = vec4(color * light, alpha);
}
