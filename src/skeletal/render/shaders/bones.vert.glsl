// Bones of a skeleton-only asset (a BVH has no mesh): one capsule per bone, instanced. The capsule
// mesh is a unit sphere cut at its equator: vertices with a_end = 0 sit on the bone's parent joint,
// a_end = 1 on its child joint, so the equator band stretches into the cylinder between them.
in vec3 a_sphere;     // point on the unit sphere = the surface normal in the bone's frame (+Y along it)
in float a_end;       // 0: parent end, 1: child end
in vec3 a_start;      // per instance (divisor 1): parent joint, world
in vec3 a_stop;       // per instance: child joint, world
in float a_radius;    // per instance: capsule radius, world units
in vec3 a_color;      // per instance: linear RGB

uniform mat4 u_view_proj;  // column-major, as GLSL wants

out vec3 v_position;
out vec3 v_normal;
out vec3 v_color;

void main() {
    vec3 axis = a_stop - a_start;
    float len = length(axis);
    vec3 y = len > 1e-12 ? axis / len : vec3(0.0, 1.0, 0.0);
    vec3 helper = abs(y.y) < 0.9 ? vec3(0.0, 1.0, 0.0) : vec3(1.0, 0.0, 0.0);
    vec3 x = normalize(cross(helper, y));
    vec3 z = cross(x, y);
    vec3 n = x * a_sphere.x + y * a_sphere.y + z * a_sphere.z;
    v_position = mix(a_start, a_stop, a_end) + a_radius * n;
    v_normal = n;
    v_color = a_color;
    gl_Position = u_view_proj * vec4(v_position, 1.0);
}
