// The hand-written anchor for kiln's matmul + bias + relu on Vulkan: C = relu(A B + bias), A
// [M, K], B [K, N] row-major; a 16 x 16 workgroup per 64 x 64 tile of C, each invocation a 4 x 4
// block in registers, K in steps of 16 through shared memory (a 64 x 16 block of A, a 16 x 64
// block of B, zero past the edges).
#version 450
layout(local_size_x = 16, local_size_y = 16) in;
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) readonly buffer Bias { float bias[]; };
layout(std430, binding = 3) writeonly buffer C { float c[]; };
layout(push_constant) uniform Metadata { uint M; uint N; uint K; };
shared vec4 a_block[16][16];  // [k][rows 4 q .. 4 q + 3]
shared vec4 b_block[16][16];  // [k][columns 4 q .. 4 q + 3]

void main() {
  uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y, t = ty * 16 + tx;
  uint row0 = gl_WorkGroupID.y * 64, col0 = gl_WorkGroupID.x * 64;
  vec4 acc[4] = vec4[4](vec4(0.0), vec4(0.0), vec4(0.0), vec4(0.0));
  for (uint k0 = 0; k0 < K; k0 += 16) {
    uint ak = k0 + t % 16, ar = row0 + 4 * (t / 16);
    vec4 av;
    for (uint i = 0; i < 4; ++i) av[i] = ar + i < M && ak < K ? a[(ar + i) * K + ak] : 0.0;
    a_block[t % 16][t / 16] = av;
    uint bk = k0 + t / 16, bc = col0 + 4 * (t % 16);
    vec4 bv;
    for (uint i = 0; i < 4; ++i) bv[i] = bc + i < N && bk < K ? b[bk * N + bc + i] : 0.0;
    b_block[t / 16][t % 16] = bv;
    barrier();
    for (uint q = 0; q < 16; ++q) {
      vec4 x = a_block[q][ty], y = b_block[q][tx];
      acc[0] += x.x * y;
      acc[1] += x.y * y;
      acc[2] += x.z * y;
      acc[3] += x.w * y;
    }
    barrier();
  }
  for (uint i = 0; i < 4; ++i) {
    uint r = row0 + 4 * ty + i;
    for (uint j = 0; j < 4; ++j) {
      uint col = col0 + 4 * tx + j;
      if (r < M && col < N) c[r * N + col] = max(acc[i][j] + bias[col], 0.0);
    }
  }
}
