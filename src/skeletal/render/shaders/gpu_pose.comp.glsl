// GPU posing of a crowd (see gpu_pose.py): one invocation per instance advances its clocks, samples
// and blends its clips node by node, runs the hierarchy parents first and writes its palette rows
// straight into the buffer the skinning shader reads (skinning.glsl's PALETTE_SSBO layout).
//
// Conventions, as on the CPU: quaternions xyzw; a local pose row is t(3) q(4) s(3); matrices are
// row-major 3x4 acting on column vectors (the bottom row 0 0 0 1 implied), stored as three vec4 rows.
// Defines: NODES (rig nodes, parents before children), SLOTS (palette matrices per instance),
// TIMELINES (the most key timelines a clip has).

layout(local_size_x = 64) in;

// palette rows: matrix m of instance k is rows 3 * (k * SLOTS + m) + 0..2 (skinning.glsl's contract)
layout(std430, binding = 0) writeonly buffer Palette { vec4 rows[]; } palette_out;
// ClipSet.values (float32 keys; CUBICSPLINE keys are in-tangent, value, out-tangent triples)
layout(std430, binding = 1) readonly buffer Values { float key_values[]; };
// ClipSet.times (float32 key times of every track, track after track)
layout(std430, binding = 2) readonly buffer Times { float key_times[]; };
// per track: first value, first key, key count, mode (interpolation | TRACK_NLERP | (timeline of its
// clip + 1) << TIMELINE_SHIFT, 0 for a constant track); then per timeline (u_timelines_at + l): first
// key, key count; then per clip (u_clip_timelines_at + c): its first timeline, its end
layout(std430, binding = 3) readonly buffer Tracks { ivec4 tracks[]; };
// per clip, node and path (translation, rotation, scale): the track, or -1 (the clip leaves it alone)
layout(std430, binding = 4) readonly buffer NodeTracks { int node_tracks[]; };
// rest rows (NODES * 10), layer mask (NODES), palette inverse binds (SLOTS * 12), clip durations (hi, lo)
layout(std430, binding = 5) readonly buffer RigFloats { float rig_f[]; };
// parents (NODES), palette slot nodes (SLOTS)
layout(std430, binding = 6) readonly buffer RigInts { int rig_i[]; };
// per key of a LINEAR rotation track: its angle to the next key and 1 / sin(angle), 0 0 where slerp
// lerps and normalises (ClipSet.slerp_keys, float32): no acos on the GPU, whose precision GLSL leaves open
layout(std430, binding = 9) readonly buffer SlerpKeys { vec2 slerp_keys[]; };
// per instance STATE_WIDTH floats (gpu_pose.py's S_* fields): clocks, speeds, clip ids, weights
layout(std430, binding = 7) buffer State { float state[]; };

uniform int u_count;         // instances
uniform int u_clips;         // clips in the tables
uniform float u_dt;          // seconds to advance the clocks by (0: pose the clocks as they are)
uniform int u_layer_mode;    // 0 no layer, 1 override (masked), 2 additive
uniform int u_timelines_at;  // where the timelines start in tracks[]
uniform int u_clip_timelines_at;  // where the clips' timeline ranges start in tracks[]

const int STATE_WIDTH = 20;
const int S_CLIP0 = 0, S_TIME0 = 1, S_SPEED0 = 2, S_LOOP0 = 3;
const int S_CLIP1 = 4, S_TIME1 = 5, S_SPEED1 = 6, S_LOOP1 = 7;
const int S_BLEND = 8, S_BLEND_RATE = 9, S_LAYER_WEIGHT = 10;
const int S_CLIPL = 12, S_TIMEL = 13, S_SPEEDL = 14, S_LOOPL = 15;
const int S_TIME0_LO = 16, S_TIME1_LO = 17, S_TIMEL_LO = 18;  // the clocks' low parts (see clock_add)
const int LOOP_REPEAT = 1, LOOP_PINGPONG = 2, LOOP_CLAMP = 3;
const int STEP = 0, LINEAR = 1, CUBICSPLINE = 2, TRACK_NLERP = 4, TIMELINE_SHIFT = 4;
const float NLERP_ABOVE_COS = 0.9995;  // skeletal.quat: nearly parallel keys are lerped and normalised
const int MASK_AT = NODES * 10;
const int IBM_AT = MASK_AT + NODES;
const int DURATION_AT = IBM_AT + SLOTS * 12;

// A clock is two floats, hi + lo (lo: what hi could not hold; about 48 bits in all), so that long clips
// and long runs sample at the CPU's float64 times. ``precise`` keeps the compiler from reassociating.
vec2 clock_add(vec2 t, float x) {
    precise float s = t.x + x;
    precise float bb = s - t.x;
    precise float err = (t.x - (s - bb)) + (x - bb) + t.y;
    precise float hi = s + err;
    precise float lo = err - (hi - s);
    return vec2(hi, lo);
}

// clip c's duration, hi + lo
vec2 clip_duration(int c) { return vec2(rig_f[DURATION_AT + 2 * c], rig_f[DURATION_AT + 2 * c + 1]); }

// The action clock after dt seconds (the CPU's F_TIME: [0, d) repeat, [0, 2d) ping-pong, [0, d] clamp).
vec2 advance_clock(vec2 t, float speed, int loop, vec2 d) {
    if (d.x <= 0.0) return vec2(0.0);
    t = clock_add(t, u_dt * speed);
    if (loop == LOOP_REPEAT || loop == LOOP_PINGPONG) {
        float scale = loop == LOOP_PINGPONG ? 2.0 : 1.0;
        float k = floor((t.x + t.y) / (scale * (d.x + d.y)));
        if (k != 0.0) t = clock_add(clock_add(t, -k * scale * d.x), -k * scale * d.y);
        if (t.x + t.y < 0.0) t = clock_add(clock_add(t, scale * d.x), scale * d.y);  // rounding below 0
    } else if (t.x + t.y > d.x + d.y) {
        t = d;
    } else if (t.x + t.y < 0.0) {
        t = vec2(0.0);
    }
    return t;
}

// The clip-local time a clock samples (ping-pong folds its second half back).
vec2 sample_time(vec2 t, int loop, vec2 d) {
    if (d.x <= 0.0) return vec2(0.0);
    if (loop == LOOP_PINGPONG && t.x + t.y > d.x + d.y) return clock_add(clock_add(-t, 2.0 * d.x), 2.0 * d.y);
    return t;
}

vec4 load4(int a) { return vec4(key_values[a], key_values[a + 1], key_values[a + 2], key_values[a + 3]); }
vec4 load3(int a) { return vec4(key_values[a], key_values[a + 1], key_values[a + 2], 0.0); }
vec4 load_w(int a, int width) { return width == 4 ? load4(a) : load3(a); }

vec4 nlerp4(vec4 a, vec4 b, float u) {
    if (dot(a, b) < 0.0) b = -b;
    vec4 q = a + (b - a) * u;
    return q * inversesqrt(dot(q, q));
}

// sin(x) for 0 <= x <= pi / 2 to float32 precision (a Taylor polynomial: GLSL's sin may be coarser)
float sin_quarter(float x) {
    float x2 = x * x;
    return x * (1.0 + x2 * (-1.0 / 6.0 + x2 * (1.0 / 120.0 + x2 * (-1.0 / 5040.0 + x2 * (1.0 / 362880.0
           + x2 * (-1.0 / 39916800.0))))));
}

// cos(x) for 0 <= x <= pi / 2, likewise
float cos_quarter(float x) {
    float x2 = x * x;
    return 1.0 + x2 * (-1.0 / 2.0 + x2 * (1.0 / 24.0 + x2 * (-1.0 / 720.0 + x2 * (1.0 / 40320.0
           + x2 * (-1.0 / 3628800.0 + x2 * (1.0 / 479001600.0))))));
}

// atan(y / x) for y, x >= 0 (not both 0) to float32 precision: reduced to |z| <= tan(pi / 8), then
// the series z - z^3 / 3 + ... to z^23
float atan_positive(float y, float x) {
    bool swap = y > x;
    float z = swap ? x / y : y / x;
    float offset = 0.0;
    if (z > 0.41421356) { z = (z - 1.0) / (z + 1.0); offset = 0.78539816; }
    float z2 = z * z;
    float p = 0.0;
    for (int n = 11; n >= 0; --n) p = ((n & 1) == 0 ? 1.0 : -1.0) / float(2 * n + 1) + z2 * p;
    float a = offset + z * p;
    return swap ? 1.57079633 - a : a;
}

// skeletal.quat.slerp_into with the key pair's tabulated angle (key row ``row`` of slerp_keys):
// shortest path; identical or nearly parallel keys (no angle tabulated) lerped and normalised
vec4 slerp4(vec4 a, vec4 b, float u, int row) {
    if (a == b) return a;
    if (dot(a, b) < 0.0) b = -b;
    vec2 angle = slerp_keys[row];
    if (angle.x <= 0.0) {
        vec4 q = a * (1.0 - u) + b * u;
        return q * inversesqrt(dot(q, q));
    }
    return a * (sin_quarter((1.0 - u) * angle.x) * angle.y) + b * (sin_quarter(u * angle.x) * angle.y);
}

// Each action's key interval on every timeline of its clip, found once per instance (tracks with the
// same key times share a timeline: the CPU crowd's one key search per timeline): action a (0 and 1 the
// base slots, 2 the layer), timeline l of its clip. Key -1 before the first key, count - 1 after the last.
int action_key[3 * TIMELINES];
float action_u[3 * TIMELINES];

void locate_action(int a, int clip, vec2 t) {
    if (clip < 0 || clip >= u_clips) return;
    ivec4 range = tracks[u_clip_timelines_at + clip];
    for (int l = 0; l < range.y - range.x && l < TIMELINES; ++l) {
        ivec4 timeline = tracks[u_timelines_at + range.x + l];
        int ks = timeline.x, count = timeline.y;
        int key;
        if (t.x < key_times[ks]) key = -1;
        else if (t.x >= key_times[ks + count - 1]) key = count - 1;
        else {
            int lo = 0, hi = count - 1;  // key_times[lo] <= t < key_times[hi]
            while (hi - lo > 1) {
                int m = (lo + hi) >> 1;
                if (key_times[ks + m] <= t.x) lo = m; else hi = m;
            }
            key = lo;
        }
        float u = 0.0;
        if (key >= 0 && key < count - 1) {
            float t0 = key_times[ks + key];
            u = ((t.x - t0) + t.y) / (key_times[ks + key + 1] - t0);
        }
        action_key[a * TIMELINES + l] = key;
        action_u[a * TIMELINES + l] = u;
    }
}

// Track k of action a's clip at the action's time (skeletal.sampling.interpolate_into): width 3
// (translation, scale) or 4 (rotation, xyzw); outside the keys the end key's value.
vec4 sample_track(int k, int a, int width) {
    ivec4 tr = tracks[k];
    int vs = tr.x, ks = tr.y, count = tr.z;
    int interp = tr.w & 3;
    int timeline = (tr.w >> TIMELINE_SHIFT) - 1;
    int stride = interp == CUBICSPLINE ? 3 * width : width;
    int mid = interp == CUBICSPLINE ? width : 0;
    int key = timeline < 0 ? -1 : action_key[a * TIMELINES + timeline];
    if (key < 0 || key >= count - 1 || interp == STEP) return load_w(vs + max(key, 0) * stride + mid, width);
    float u = action_u[a * TIMELINES + timeline];
    int a0 = vs + key * stride;
    int b0 = a0 + stride;
    if (interp == LINEAR) {
        if (width == 3) return load3(a0) * (1.0 - u) + load3(b0) * u;
        return (tr.w & TRACK_NLERP) != 0 ? nlerp4(load4(a0), load4(b0), u) : slerp4(load4(a0), load4(b0), u, ks + key);
    }
    float span = key_times[ks + key + 1] - key_times[ks + key];
    float u2 = u * u, u3 = u2 * u;
    float h00 = 2.0 * u3 - 3.0 * u2 + 1.0, h10 = (u3 - 2.0 * u2 + u) * span;
    float h01 = -2.0 * u3 + 3.0 * u2, h11 = (u3 - u2) * span;
    vec4 v = h00 * load_w(a0 + width, width) + h10 * load_w(a0 + 2 * width, width)
           + h01 * load_w(b0 + width, width) + h11 * load_w(b0, width);
    if (width == 4) {
        float n = length(v);
        v = n > 0.0 ? v / n : vec4(0.0, 0.0, 0.0, 1.0);
    }
    return v;
}

int track_of(int clip, int node, int path) {
    if (clip < 0 || clip >= u_clips) return -1;
    return node_tracks[(clip * NODES + node) * 3 + path];
}

// One node's base layer: up to two actions (weights w0, w1) blended over the rest pose as the CPU mixer
// blends (skeletal.playback.kernels: weighted sums; rotations sign-aligned to the first contribution
// and normalised; a total weight under 1 filled by the rest pose; one full-weight action as sampled).
void base_layer(int node, int c0, float w0, int c1, float w1, inout vec3 T, inout vec4 R, inout vec3 S) {
    int clips[2] = int[2](c0, c1);
    float weights[2] = float[2](w0, w1);
    for (int path = 0; path < 3; ++path) {
        int width = path == 1 ? 4 : 3;
        vec4 acc = vec4(0.0);
        float total = 0.0;
        int contributions = 0;
        for (int i = 0; i < 2; ++i) {
            float w = weights[i];
            if (w <= 0.0) continue;
            int k = track_of(clips[i], node, path);
            if (k < 0) continue;
            vec4 v = sample_track(k, i, width);
            float signed_w = (path == 1 && total > 0.0 && dot(acc, v) < 0.0) ? -w : w;
            acc += signed_w * v;
            total += w;
            contributions += 1;
        }
        if (total <= 0.0) continue;
        float rest = total < 1.0 ? 1.0 - total : 0.0;
        if (path == 1) {
            if (rest == 0.0 && total == 1.0 && contributions == 1) { R = acc; continue; }
            float sign = dot(acc, R) < 0.0 ? -1.0 : 1.0;
            vec4 q = acc + sign * rest * R;
            float n = length(q);
            if (n > 0.0) R = q / n;
        } else if (path == 0) {
            T = (acc.xyz + rest * T) / (total + rest);
        } else {
            S = (acc.xyz + rest * S) / (total + rest);
        }
    }
}

// q * slerp(identity, dq, w) (skeletal.playback.kernels._add_rotation: angle scaling in axis-angle form)
vec4 add_rotation(vec4 q, vec4 dq, float w) {
    if (dq.w < 0.0) dq = -dq;
    float sin_half = length(dq.xyz);
    if (sin_half < 1e-12) return q;
    float half_angle = atan_positive(sin_half, dq.w) * w;  // |w| <= 1: within [0, pi / 2]
    vec4 b = vec4(dq.xyz * (sin_quarter(half_angle) / sin_half), cos_quarter(half_angle));
    return vec4(q.w * b.xyz + b.w * q.xyz + cross(q.xyz, b.xyz), q.w * b.w - dot(q.xyz, b.xyz));
}

// The one layer over the base: additive (deltas scaled by weight * mask) or override (mixed over the
// pose beneath by min(weight * mask, 1)), as the CPU mixer's second layer.
void top_layer(int node, int c, float weight, inout vec3 T, inout vec4 R, inout vec3 S) {
    float mask = rig_f[MASK_AT + node];
    if (mask <= 0.0 || weight <= 0.0) return;
    for (int path = 0; path < 3; ++path) {
        int k = track_of(c, node, path);
        if (k < 0) continue;
        int width = path == 1 ? 4 : 3;
        vec4 v = sample_track(k, 2, width);
        if (u_layer_mode == 2) {
            float wa = weight * mask;
            if (path == 0) T += wa * v.xyz;
            else if (path == 1) R = add_rotation(R, v, wa);
            else S *= vec3(1.0) + wa * (v.xyz - vec3(1.0));
            continue;
        }
        float m = min(mask * weight, 1.0);
        if (path == 1) {
            if (m == 1.0) { R = v; continue; }
            float n = length(v);
            if (n == 0.0) continue;
            vec4 q = v / n;
            if (dot(q, R) < 0.0) q = -q;
            q = R + (q - R) * m;
            R = q / length(q);
        } else if (path == 0) {
            T = T + (v.xyz - T) * m;
        } else {
            S = S + (v.xyz - S) * m;
        }
    }
}

void main() {
    int b = int(gl_GlobalInvocationID.x);
    if (b >= u_count) return;
    int base = b * STATE_WIDTH;
    int c0 = int(state[base + S_CLIP0]), c1 = int(state[base + S_CLIP1]), cl = int(state[base + S_CLIPL]);
    int l0 = int(state[base + S_LOOP0]), l1 = int(state[base + S_LOOP1]), ll = int(state[base + S_LOOPL]);
    float blend = state[base + S_BLEND];
    vec2 clock0 = vec2(state[base + S_TIME0], state[base + S_TIME0_LO]);
    vec2 clock1 = vec2(state[base + S_TIME1], state[base + S_TIME1_LO]);
    vec2 clockl = vec2(state[base + S_TIMEL], state[base + S_TIMEL_LO]);
    if (u_dt != 0.0) {  // the clocks and the crossfade move on the GPU; the CPU writes only changes
        if (c0 >= 0) clock0 = advance_clock(clock0, state[base + S_SPEED0], l0, clip_duration(c0));
        if (c1 >= 0) clock1 = advance_clock(clock1, state[base + S_SPEED1], l1, clip_duration(c1));
        if (cl >= 0) clockl = advance_clock(clockl, state[base + S_SPEEDL], ll, clip_duration(cl));
        state[base + S_TIME0] = clock0.x; state[base + S_TIME0_LO] = clock0.y;
        state[base + S_TIME1] = clock1.x; state[base + S_TIME1_LO] = clock1.y;
        state[base + S_TIMEL] = clockl.x; state[base + S_TIMEL_LO] = clockl.y;
        blend = clamp(blend + state[base + S_BLEND_RATE] * u_dt, 0.0, 1.0);
        state[base + S_BLEND] = blend;
    }
    vec2 t0 = c0 >= 0 ? sample_time(clock0, l0, clip_duration(c0)) : vec2(0.0);
    vec2 t1 = c1 >= 0 ? sample_time(clock1, l1, clip_duration(c1)) : vec2(0.0);
    vec2 tl = cl >= 0 ? sample_time(clockl, ll, clip_duration(cl)) : vec2(0.0);
    float w0 = c0 >= 0 ? 1.0 - blend : 0.0;
    float w1 = c1 >= 0 ? blend : 0.0;
    float layer_weight = (u_layer_mode != 0 && cl >= 0) ? state[base + S_LAYER_WEIGHT] : 0.0;
    if (w0 > 0.0) locate_action(0, c0, t0);
    if (w1 > 0.0) locate_action(1, c1, t1);
    if (layer_weight > 0.0) locate_action(2, cl, tl);

    // world rows of every node, parents first (rig order)
    vec4 world[NODES * 3];
    for (int n = 0; n < NODES; ++n) {
        int r = n * 10;
        vec3 T = vec3(rig_f[r], rig_f[r + 1], rig_f[r + 2]);
        vec4 R = vec4(rig_f[r + 3], rig_f[r + 4], rig_f[r + 5], rig_f[r + 6]);
        vec3 S = vec3(rig_f[r + 7], rig_f[r + 8], rig_f[r + 9]);
        base_layer(n, c0, w0, c1, w1, T, R, S);
        if (layer_weight > 0.0) top_layer(n, cl, layer_weight, T, R, S);
        // T R S as rows (skeletal.pose._trs_rows)
        float x2 = R.x + R.x, y2 = R.y + R.y, z2 = R.z + R.z;
        float xx = R.x * x2, xy = R.x * y2, xz = R.x * z2, yy = R.y * y2, yz = R.y * z2, zz = R.z * z2;
        float wx = R.w * x2, wy = R.w * y2, wz = R.w * z2;
        vec4 l0r = vec4((1.0 - (yy + zz)) * S.x, (xy - wz) * S.y, (xz + wy) * S.z, T.x);
        vec4 l1r = vec4((xy + wz) * S.x, (1.0 - (xx + zz)) * S.y, (yz - wx) * S.z, T.y);
        vec4 l2r = vec4((xz - wy) * S.x, (yz + wx) * S.y, (1.0 - (xx + yy)) * S.z, T.z);
        int p = rig_i[n];
        if (p < 0) {
            world[n * 3] = l0r; world[n * 3 + 1] = l1r; world[n * 3 + 2] = l2r;
        } else {
            for (int i = 0; i < 3; ++i) {
                vec4 a = world[p * 3 + i];
                world[n * 3 + i] = a.x * l0r + a.y * l1r + a.z * l2r + vec4(0.0, 0.0, 0.0, a.w);
            }
        }
    }
    // palettes: world[slot node] @ inverse_bind[slot] (identity for a rigid mesh's slot)
    for (int j = 0; j < SLOTS; ++j) {
        int node = rig_i[NODES + j];
        int ib = IBM_AT + j * 12;
        vec4 i0 = vec4(rig_f[ib], rig_f[ib + 1], rig_f[ib + 2], rig_f[ib + 3]);
        vec4 i1 = vec4(rig_f[ib + 4], rig_f[ib + 5], rig_f[ib + 6], rig_f[ib + 7]);
        vec4 i2 = vec4(rig_f[ib + 8], rig_f[ib + 9], rig_f[ib + 10], rig_f[ib + 11]);
        int out_row = (b * SLOTS + j) * 3;
        for (int i = 0; i < 3; ++i) {
            vec4 a = world[node * 3 + i];
            palette_out.rows[out_row + i] = a.x * i0 + a.y * i1 + a.z * i2 + vec4(0.0, 0.0, 0.0, a.w);
        }
    }
}
