// The hand-written anchor for kiln's softmax along rows: one workgroup per row (grid-stride over
// rows), each reduction a strided loop per invocation and a shared-memory tree, the workgroup
// size from specialization constant 0 (at most 256).
#version 450
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer O { float o[]; };
layout(push_constant) uniform Metadata { uint rows; uint cols; };
shared float part[256];

void main() {
  uint n = gl_WorkGroupSize.x, t = gl_LocalInvocationID.x;
  for (uint r = gl_WorkGroupID.x; r < rows; r += gl_NumWorkGroups.x) {
    uint base = r * cols;
    float m = -1.0 / 0.0;
    for (uint c = t; c < cols; c += n) m = max(m, x[base + c]);
    part[t] = m;
    barrier();
    for (uint s = n / 2; s > 0; s >>= 1) {
      if (t < s) part[t] = max(part[t], part[t + s]);
      barrier();
    }
    m = part[0];
    barrier();
    float sum = 0.0;
    for (uint c = t; c < cols; c += n) sum += exp(x[base + c] - m);
    part[t] = sum;
    barrier();
    for (uint s = n / 2; s > 0; s >>= 1) {
      if (t < s) part[t] += part[t + s];
      barrier();
    }
    float inv = 1.0 / part[0];
    barrier();
    for (uint c = t; c < cols; c += n) o[base + c] = exp(x[base + c] - m) * inv;
  }
}
