// Mesh shading: glTF base colour (factor x texture) or the weight heat map, lit by one directional
// key light, a hemisphere ambient (sky above, ground bounce below), a little specular and rim.
// Lighting is done in linear RGB and written gamma-encoded (the framebuffer is plain RGBA8).

in vec3 v_position;
in vec3 v_normal;
in vec2 v_uv;
in float v_heat;

uniform vec4 u_base_color;        // glTF baseColorFactor, linear RGBA
uniform sampler2D u_base_texture; // glTF baseColorTexture, sRGB-encoded RGBA8
uniform bool u_has_texture;
uniform mat3 u_uv_transform;      // KHR_texture_transform of the base colour texture (identity without one)
uniform bool u_unlit;             // KHR_materials_unlit: the base colour as it is, no lighting
uniform vec3 u_emissive;          // glTF emissiveFactor x KHR_materials_emissive_strength, linear RGB
uniform float u_alpha_cutoff;     // alphaMode MASK: fragments below it are discarded (< 0: no mask)
uniform bool u_heat_mode;
uniform vec3 u_light_dir;         // unit vector towards the key light
uniform vec3 u_light_color;
uniform vec3 u_sky_color;         // ambient from above
uniform vec3 u_ground_color;      // ambient from below
uniform vec3 u_camera_position;

out vec4 f_color;

vec3 to_linear(vec3 c) { return pow(c, vec3(2.2)); }

// Weight 0 -> blue, 0.25 cyan, 0.5 green, 0.75 yellow, 1 -> red ("red is a lot of glue").
vec3 heat_color(float w) {
    w = clamp(w, 0.0, 1.0);
    vec3 c = clamp(vec3(4.0 * w - 2.0, 2.0 - abs(4.0 * w - 2.0), 2.0 - 4.0 * w), 0.0, 1.0);
    return to_linear(c);
}

void main() {
    vec3 n = normalize(v_normal);
    if (!gl_FrontFacing) n = -n;  // everything is drawn double-sided
    vec3 view = normalize(u_camera_position - v_position);

    vec3 albedo;
    float alpha = u_base_color.a;
    if (u_heat_mode) {
        albedo = heat_color(v_heat);
    } else {
        albedo = u_base_color.rgb;
        if (u_has_texture) {
            vec4 texel = texture(u_base_texture, (u_uv_transform * vec3(v_uv, 1.0)).xy);
            albedo *= to_linear(texel.rgb);
            alpha *= texel.a;
        }
        if (alpha < u_alpha_cutoff) discard;
        if (u_unlit) {
            f_color = vec4(pow(clamp(albedo, 0.0, 1.0), vec3(1.0 / 2.2)), 1.0);
            return;
        }
    }

    float diffuse = max(dot(n, u_light_dir), 0.0);
    vec3 ambient = mix(u_ground_color, u_sky_color, 0.5 + 0.5 * n.y);
    vec3 half_vector = normalize(u_light_dir + view);
    float specular = pow(max(dot(n, half_vector), 0.0), 40.0) * 0.12 * step(0.0, diffuse);
    float rim = pow(1.0 - max(dot(n, view), 0.0), 3.0) * 0.18;

    vec3 color = albedo * (ambient + u_light_color * diffuse) + u_light_color * specular + u_sky_color * rim;
    if (!u_heat_mode) color += u_emissive;
    if (u_heat_mode) color = mix(color, albedo * 1.6, 0.35);  // keep the map readable in shadow
    f_color = vec4(pow(clamp(color, 0.0, 1.0), vec3(1.0 / 2.2)), 1.0);
}
