// The hand-written anchor for kiln's emitted relu(x * y + z): the same work per invocation (four
// elements as a vec4, grid-stride loop, workgroup size from specialization constant 0).
#version 450
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer X { vec4 x[]; };
layout(std430, binding = 1) readonly buffer Y { vec4 y[]; };
layout(std430, binding = 2) readonly buffer Z { vec4 z[]; };
layout(std430, binding = 3) writeonly buffer O { vec4 o[]; };
layout(push_constant) uniform Metadata { uint groups; };

void main() {
  uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint g = gl_GlobalInvocationID.x; g < groups; g += stride)
    o[g] = max(x[g] * y[g] + z[g], vec4(0.0));
}
