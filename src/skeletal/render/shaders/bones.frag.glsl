// Bone capsules: the mesh shader's lighting (key light, hemisphere ambient, specular, rim) on a
// per-bone colour; linear RGB in, gamma-encoded out.
in vec3 v_position;
in vec3 v_normal;
in vec3 v_color;

uniform vec3 u_light_dir;
uniform vec3 u_light_color;
uniform vec3 u_sky_color;
uniform vec3 u_ground_color;
uniform vec3 u_camera_position;

out vec4 f_color;

void main() {
    vec3 n = normalize(v_normal);
    vec3 view = normalize(u_camera_position - v_position);
    float diffuse = max(dot(n, u_light_dir), 0.0);
    vec3 ambient = mix(u_ground_color, u_sky_color, 0.5 + 0.5 * n.y);
    vec3 half_vector = normalize(u_light_dir + view);
    float specular = pow(max(dot(n, half_vector), 0.0), 40.0) * 0.25 * step(0.0, diffuse);
    float rim = pow(1.0 - max(dot(n, view), 0.0), 3.0) * 0.18;
    vec3 color = v_color * (ambient + u_light_color * diffuse) + u_light_color * specular + u_sky_color * rim;
    f_color = vec4(pow(clamp(color, 0.0, 1.0), vec3(1.0 / 2.2)), 1.0);
}
