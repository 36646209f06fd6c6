// The CPU's changes to a GPU crowd's state (gpu_pose.py): each edit is (float index, float bits),
// written in one dispatch when the game changed something; nothing is uploaded on other frames.
// Edits name distinct indices (the CPU keeps the last edit of each).

layout(local_size_x = 64) in;

layout(std430, binding = 7) buffer State { float state[]; };
layout(std430, binding = 8) readonly buffer Edits { uvec2 edits[]; };

uniform int u_edits;

void main() {
    int i = int(gl_GlobalInvocationID.x);
    if (i >= u_edits) return;
    uvec2 e = edits[i];
    state[e.x] = uintBitsToFloat(e.y);
}
