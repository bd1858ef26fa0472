// Bad and extreme input through the public API only: each is a clear kiln::error naming what was
// wrong (never a crash, undefined behaviour or a silent wrong answer). Run in the suite's
// ASan+UBSan build too. Also: graphs large enough to expose quadratic building, and a plan with
// more regions than the descriptor pool first holds.
#include <gmock/gmock.h>

#include <limits>
#include <numeric>

#include <kiln/executable.hpp>
#include <kiln/runtime/cpu/streaming_stores.hpp>
#include <kiln/runtime/cpu/thread_pool.hpp>
#include <kiln/runtime/vulkan/context.hpp>

#include "../support/reference.hpp"

using namespace kiln;
using ::testing::HasSubstr;

namespace {

std::string error_of(const auto& f) {
  try {
    f();
  } catch (const error& e) {
    return e.what();
  }
  return "(no error)";
}

executable negate_graph() {
  graph g;
  auto a = g.input("a", dtype::f32, {dyn});
  g.output("r1", g.neg(a));
  g.output("r2", g.abs(a));
  return compile(g);
}

}  // namespace

TEST(BadInputs, ShapesBeyondMaxRankNegativeOrOverflowing) {
  float f = 0;
  EXPECT_EQ(error_of([&] {
              tensor_ref(&f, dtype::f32, {1, 1, 1, 1, 1, 1, 1, 1, 1});
            }),
            "kiln: tensor_ref: the tensor has rank 9, above kiln::max_rank (8)");
  EXPECT_EQ(error_of([&] {
              tensor_ref(&f, dtype::f32, {-2, -3});
            }),
            "kiln: tensor_ref: the tensor has extents [?, ?] (size -2 at axis 0); a size is >= 0");
  EXPECT_THAT(error_of([&] {
                tensor_ref(&f, dtype::f32, {(std::int64_t{1} << 62) + 1, 4});
              }),
              HasSubstr("does not fit in 64 bits"));
  EXPECT_THAT(error_of([&] {
                tensor_ref(&f, dtype::f32, {std::int64_t{1} << 32, std::int64_t{1} << 32});
              }),
              HasSubstr("the element count times 4 bytes does not fit in 64 bits"));
  // A zero anywhere makes the count 0, however large the other sizes.
  EXPECT_NO_THROW(tensor_ref(&f, dtype::f32, {0, std::int64_t{1} << 62, 16}));
  graph g;
  EXPECT_EQ(error_of([&] {
              g.input("x", dtype::f32, {1, 1, 1, 1, 1, 1, 1, 1, 1});
            }),
            "kiln: input: 'x' has rank 9, above kiln::max_rank (8)");
  EXPECT_EQ(error_of([&] {
              view(&f, {1, -5});
            }),
            "kiln: view: the view has extents [1, ?] (size -5 at axis 1); a size is >= 0");
}

TEST(BadInputs, EnumValuesOutsideTheirRange) {
  float f = 0;
  graph g;
  auto x = g.input("x", dtype::f32, {2});
  EXPECT_EQ(error_of([&] { tensor_ref(&f, static_cast<dtype>(77), {1}); }),
            "kiln: tensor_ref: dtype value 77 is not a kiln::dtype");
  EXPECT_EQ(error_of([&] { g.input("y", static_cast<dtype>(200), {2}); }),
            "kiln: input: 'y': dtype value 200 is not a kiln::dtype");
  EXPECT_EQ(error_of([&] { g.apply(static_cast<ir::op>(250), {x}); }),
            "kiln: apply: op value 250 is not a kiln::ir::op");
  EXPECT_EQ(error_of([&] { g.cast(x, static_cast<dtype>(99)); }),
            "kiln: cast: target dtype value 99 is not a kiln::dtype");
  EXPECT_EQ(error_of([&] {
              g.constant(scalar{static_cast<dtype>(50), 1.0, 0});
            }),
            "kiln: constant: dtype value 50 is not a kiln::dtype");
}

TEST(BadInputs, MovedFromExecutable) {
  executable a = negate_graph();
  executable b = std::move(a);
  std::vector<float> x(4), r1(4), r2(4);
  const std::string moved =
      "kiln: executable: this executable was moved from; use the one it was moved to (or copy "
      "it: copies share the compiled kernels)";
  EXPECT_EQ(error_of([&] { a.run({x}, {r1, r2}, device::cpu()); }), moved);
  EXPECT_EQ(error_of([&] { a.run({{"a", x}}, {{"r1", r1}, {"r2", r2}}, device::cpu()); }), moved);
  EXPECT_EQ(error_of([&] { (void)a.name(); }), moved);
  auto r = a.try_run({x}, {r1, r2}, device::cpu());
  ASSERT_FALSE(r);
  EXPECT_EQ(std::string(r.failure().what()), moved);
  EXPECT_NO_THROW(b.run({x}, {r1, r2}, device::cpu()));
}

TEST(BadInputs, ResultsThatOverlapEachOther) {
  executable exe = negate_graph();
  std::vector<float> a = {1, -2, 3, -4, 5, -6, 7, -8}, out(9);
  for (const device& d : {device::cpu(), device::default_device()}) {
    EXPECT_EQ(error_of([&] {
                exe.run({a}, {std::span(out).subspan(0, 8), std::span(out).subspan(1, 8)}, d);
              }),
              "kiln: " + exe.name() +
                  ": result 2 overlaps result 1; every result needs memory "
                  "of its own");
    EXPECT_THAT(error_of([&] {
                  exe.run({a}, {std::span(out).subspan(0, 8), std::span(out).subspan(0, 8)}, d);
                }),
                HasSubstr("result 2 overlaps result 1"));
  }
  std::vector<float> r1(8), r2(8);
  exe.run({a}, {r1, r2});  // apart: fine
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(r1[i], -a[i]);
    EXPECT_EQ(r2[i], std::fabs(a[i]));
  }
}

TEST(BadInputs, IntegerConstantsAreExact) {
  graph g;
  auto x = g.input("x", dtype::i64, {1});
  g.output("y", g.add(x, g.constant((std::int64_t{1} << 60) + 1, dtype::i64)));
  executable exe = compile(g);
  std::vector<std::int64_t> in = {0}, out = {0};
  exe.run({in}, {out}, device::cpu());
  EXPECT_EQ(out[0], (std::int64_t{1} << 60) + 1);
  EXPECT_EQ(error_of([&] { g.constant(1.5, dtype::i32); }),
            "kiln: constant: 1.500000 is not a value of i32 (integer constants: pass an integer, "
            "not a double)");
  EXPECT_THAT(error_of([&] { g.constant(9223372036854775808.0, dtype::i64); }),
              HasSubstr("is not a value of i64"));
  EXPECT_EQ(error_of([&] { g.constant(300, dtype::u8); }),
            "kiln: constant: 300 is outside the range of u8");
  EXPECT_NO_THROW(g.constant(255, dtype::u8));
  EXPECT_NO_THROW(g.constant(-3.0, dtype::i8));
}

TEST(BadInputs, ThreadCountFromTheEnvironment) {
  // Not a positive integer: the hardware count (with a notice); too many: 4 x the hardware.
  EXPECT_EQ(cpu::parse_thread_count(nullptr, 6), 6);
  EXPECT_EQ(cpu::parse_thread_count("3", 6), 3);
  EXPECT_EQ(cpu::parse_thread_count("abc", 6), 6);
  EXPECT_EQ(cpu::parse_thread_count("0", 6), 6);
  EXPECT_EQ(cpu::parse_thread_count("-5", 6), 6);
  EXPECT_EQ(cpu::parse_thread_count("4x", 6), 6);
  EXPECT_EQ(cpu::parse_thread_count("", 6), 6);
  EXPECT_EQ(cpu::parse_thread_count("30000", 2), 8);
  EXPECT_EQ(cpu::parse_thread_count("100000", 0), 4);  // no hardware count known: 1
}

TEST(BadInputs, CacheSizeFromTheEnvironment) {
  // Not a non-negative integer: the size sysfs reports (with a notice); 0: never stream.
  EXPECT_EQ(cpu::parse_cache_bytes(nullptr, 1 << 25), 1 << 25);
  EXPECT_EQ(cpu::parse_cache_bytes("1048576", 1 << 25), 1 << 20);
  EXPECT_EQ(cpu::parse_cache_bytes("0", 1 << 25), 0);
  EXPECT_EQ(cpu::parse_cache_bytes("-1", 1 << 25), 1 << 25);
  EXPECT_EQ(cpu::parse_cache_bytes("32M", 1 << 25), 1 << 25);
  EXPECT_EQ(cpu::parse_cache_bytes("", 1 << 25), 1 << 25);
}

TEST(BadInputs, DeviceAllocationsAreChecked) {
  device d = device::default_device();
  if (d.type() != device::kind::vulkan) GTEST_SKIP() << "no Vulkan device";
  EXPECT_EQ(
      error_of([&] {
        d.alloc<float>(shape{-1, -5});
      }),
      "kiln: device::alloc: the shape has extents [?, ?] (size -1 at axis 0); a size is >= 0");
  EXPECT_THAT(error_of([&] { d.alloc<float>(std::int64_t{1} << 62); }),
              HasSubstr("kiln: device::alloc: the count has extents [4611686018427387904]: the "
                        "element count times 4 bytes does not fit in 64 bits"));
  // More than the device has: the call that refused and the size, and the device still works.
  EXPECT_THAT(error_of([&] { d.alloc<float>(std::int64_t{1} << 45); }),
              HasSubstr("failed for a block of 140737488355328 bytes"));
  auto b = d.upload(std::vector<float>{1, 2, 3});
  std::vector<float> back(3);
  b.download(back);
  EXPECT_EQ(back, (std::vector<float>{1, 2, 3}));
}

TEST(Scale, LongChainBuildsInLinearTime) {
  // 200,000 nodes: the builder's deduplication used to scan every node (minutes at this size).
  graph g;
  auto x = g.input("x", dtype::f32, {4});
  auto v = x;
  for (int i = 0; i < 100000; ++i) v = g.mul(g.add(v, g.constant(1.0 + i % 7)), g.constant(0.5));
  g.output("y", v);
  executable exe = compile(g);
  std::vector<float> in = {1, 2, 3, 4}, out(4);
  exe.run({in}, {out}, device::cpu());
  for (int k = 0; k < 4; ++k) {
    double want = in[k];
    for (int i = 0; i < 100000; ++i)
      want = static_cast<float>(static_cast<float>(want + (1.0 + i % 7)) * 0.5f);
    EXPECT_FLOAT_EQ(out[k], static_cast<float>(want)) << k;
  }
}

TEST(Scale, ManyDynamicInputs) {
  // 2,000 inputs of run-time size summed: each broadcast joins symbol sets (was cubic).
  graph g;
  std::vector<graph::value> in;
  for (int i = 0; i < 2000; ++i)
    in.push_back(g.input(std::string("x").append(std::to_string(i)), dtype::f32, {dyn}));
  auto sum = in[0];
  for (int i = 1; i < 2000; ++i) sum = g.add(sum, in[i]);
  g.output("sum", sum);
  executable exe = compile(g);
  std::vector<std::vector<float>> data(2000, std::vector<float>(3));
  for (int i = 0; i < 2000; ++i) data[i] = {1.f, static_cast<float>(i), 0.5f};
  std::vector<tensor_ref> args(data.begin(), data.end());
  std::vector<float> out(3);
  std::vector<tensor_ref> results = {out};
  exe.run(args, results, device::cpu());
  EXPECT_EQ(out[0], 2000.f);
  EXPECT_EQ(out[1], 1999.f * 2000.f / 2);
  EXPECT_EQ(out[2], 1000.f);
}

TEST(Scale, MoreRegionsThanTheFirstDescriptorPool) {
  // 300 results of different extents: 300 dispatches in one call (the pool starts at 64 sets;
  // real drivers refuse allocations past a pool's size).
  device d = device::default_device();
  if (d.type() != device::kind::vulkan) GTEST_SKIP() << "no Vulkan device";
  graph g;
  for (int i = 0; i < 300; ++i) {
    auto x = g.input(std::string("x").append(std::to_string(i)), dtype::f32, {i + 1});
    g.output(std::string("y").append(std::to_string(i)), g.mul(x, g.constant(2.0)));
  }
  executable exe = compile(g);
  ASSERT_EQ(exe.dispatch_count(), 300);
  std::vector<std::vector<float>> x(300), y(300);
  for (int i = 0; i < 300; ++i) {
    x[i].assign(i + 1, static_cast<float>(i));
    y[i].assign(i + 1, 0.f);
  }
  std::vector<tensor_ref> args(x.begin(), x.end()), results(y.begin(), y.end());
  exe.run(args, results, d);
  for (int i = 0; i < 300; ++i)
    for (float v : y[i]) ASSERT_EQ(v, 2.f * i) << "result " << i;
  EXPECT_GE(d.context()->queue().descriptor_set_capacity(), 300u);
}

// Window attributes near the int64 limits (as a damaged ONNX model gives them) are refused before
// any window arithmetic: no overflow, a kiln::error naming what is out of range.
TEST(BadInputs, WindowAttributesBeyondTheirBounds) {
  constexpr std::int64_t huge = std::numeric_limits<std::int64_t>::max();
  for (int field = 0; field < 4; ++field) {
    SCOPED_TRACE(field);
    graph g;
    auto x = g.input("x", dtype::f32, {1, 2, 8, 8});
    auto w = g.input("w", dtype::f32, {2, 2, 3, 3});
    ir::conv_window c;
    c.strides = {field == 0 ? huge : 1, 1};
    c.pads = {field == 1 ? huge : 0, 0, 0, field == 2 ? huge - 5 : 0};
    c.dilations = {field == 3 ? huge / 2 : 1, 1};
    try {
      g.conv(x, w, c);
      ADD_FAILURE() << "accepted";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::unsupported) << e.what();
      EXPECT_THAT(e.what(), HasSubstr("of 2^31 or more")) << e.what();
    }
    ir::pool_window p;
    p.kernel = {2, 2};
    p.strides = c.strides;
    p.pads = c.pads;
    p.dilations = c.dilations;
    EXPECT_THROW(g.max_pool(x, p), error);
  }
}
