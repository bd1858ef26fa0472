// Trace points (runtime/trace.hpp): trace(name, v) in the DSL and graph::trace record a value at
// each call when tracing is on, through a sink or (KILN_TRACE=1) a line on stderr and .npy files
// under KILN_DUMP_DIR, without changing the results; with tracing off the plan is the one the
// function has without them. Checked on the CPU and on lavapipe against scalar references. And
// KILN_PROFILE on the CPU: a line per region (a row group's on one) with its time and ops.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include <kiln/executable.hpp>
#include <kiln/kiln.hpp>

#include "../support/profile.hpp"

using namespace kiln;

namespace {

std::vector<device> devices() { return {device::cpu(), device::vulkan()}; }

std::vector<float> ramp(std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = -1.5f + 0.125f * float(i % 29);
  return v;
}

// One traced value as the sink saw it, copied.
struct record {
  std::string function, name;
  std::uint64_t call;
  dtype type;
  shape dims;
  std::vector<unsigned char> bytes;
  std::vector<float> floats() const {
    std::vector<float> out(bytes.size() / sizeof(float));
    std::memcpy(out.data(), bytes.data(), bytes.size());
    return out;
  }
};

// Installs a sink that keeps every record, for one test; takes it out again.
struct recording {
  std::mutex mutex;
  std::vector<record> records;
  recording() {
    set_trace_sink([this](const traced_value& v) {
      std::lock_guard lock(mutex);
      const auto* b = static_cast<const unsigned char*>(v.data);
      records.push_back(
          {std::string(v.function), std::string(v.name), v.call, v.type, v.dims,
           std::vector<unsigned char>(b, b + v.dims.element_count() * size_in_bytes(v.type))});
    });
  }
  ~recording() { set_trace_sink({}); }
  std::vector<record> take() {
    std::lock_guard lock(mutex);
    return std::exchange(records, {});
  }
};

// y = exp(x) * 2 + 1 with h = exp(x) * 2 and s = sum(h) traced.
graph traced_graph(bool with_traces) {
  graph g;
  auto x = g.input("x", dtype::f32, {dyn});
  auto h = g.mul(g.exp(x), g.constant(2.0));
  if (with_traces) {
    g.trace("h", h);
    g.trace("s", g.reduce_sum(h, {0}, false));
  }
  g.output("y", g.add(h, g.constant(1.0)));
  return g;
}

void expect_near_all(const std::vector<float>& got, const std::vector<double>& want, double rel) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], rel * std::max(1.0, std::abs(want[i]))) << "at " << i;
}

constexpr auto traced_fn = fn<tensor<f32, dyn>>([](auto x) {
  auto h = trace("h", exp(x) * 2.0f);
  return h + 1.0f;
});
constexpr auto plain_fn = fn<tensor<f32, dyn>>([](auto x) { return exp(x) * 2.0f + 1.0f; });

TEST(Trace, OffLeavesThePlanAsWithout) {
  ASSERT_FALSE(tracing_enabled()) << "run without KILN_TRACE";
  // The traced IR shows them; the compiled plan has none.
  EXPECT_NE(ir::print(traced_graph(true).ir()).find("trace 'h' %"), std::string::npos);
  executable with = compile(traced_graph(true)), without = compile(traced_graph(false));
  EXPECT_TRUE(with.trace_names().empty());
  EXPECT_EQ(compiler::print(with.plan()), compiler::print(without.plan()));
  EXPECT_EQ(with.name(), without.name());
  EXPECT_EQ(compiler::print(traced_fn.plan.thaw()), compiler::print(plain_fn.plan.thaw()));
  // And calls give the same bits.
  auto x = ramp(37);
  std::vector<float> a(37), b(37);
  with.run({x}, {a});
  without.run({x}, {b});
  EXPECT_EQ(a, b);
  traced_fn(x, into(a));
  plain_fn(x, into(b));
  EXPECT_EQ(a, b);
}

TEST(Trace, SinkGetsEachCallsValuesOnEachDevice) {
  recording rec;
  executable exe = compile(traced_graph(true));
  ASSERT_EQ(exe.trace_names(), (std::vector<std::string>{"h", "s"}));
  EXPECT_EQ(exe.signature().results.size(), 1u);  // trace points are not results of the function
  std::uint64_t call = 0;
  for (const device& d : devices()) {
    for (std::size_t n : {1u, 37u, 1000u}) {
      SCOPED_TRACE(d.name() + " n=" + std::to_string(n));
      auto x = ramp(n);
      std::vector<float> y(n);
      exe.run({x}, {y}, d);
      ++call;
      std::vector<double> h(n), yy(n);
      double s = 0;
      for (std::size_t i = 0; i < n; ++i) {
        h[i] = std::exp(double(x[i])) * 2.0;
        yy[i] = h[i] + 1.0;
        s += h[i];
      }
      expect_near_all(y, yy, 2e-6);
      auto got = rec.take();
      ASSERT_EQ(got.size(), 2u);
      EXPECT_EQ(got[0].name, "h");
      EXPECT_EQ(got[1].name, "s");
      for (const record& r : got) {
        EXPECT_EQ(r.function, exe.name());
        EXPECT_EQ(r.call, call);
        EXPECT_EQ(r.type, dtype::f32);
      }
      EXPECT_EQ(got[0].dims, (shape{std::int64_t(n)}));
      EXPECT_EQ(got[1].dims, shape{});
      expect_near_all(got[0].floats(), h, 2e-6);
      expect_near_all(got[1].floats(), {s}, 1e-5);
    }
  }
}

TEST(Trace, FnRecordsWhileTracingIsOn) {
  auto x = ramp(45);
  std::vector<double> h(45);
  for (std::size_t i = 0; i < h.size(); ++i) h[i] = std::exp(double(x[i])) * 2.0;
  {
    recording rec;
    for (const device& d : devices()) {
      SCOPED_TRACE(d.name());
      std::vector<float> y(45);
      traced_fn.on(d)(x, into(y));
      auto got = rec.take();
      ASSERT_EQ(got.size(), 1u);
      EXPECT_EQ(got[0].name, "h");
      EXPECT_EQ(got[0].function.rfind("fn-", 0), 0u) << got[0].function;
      expect_near_all(got[0].floats(), h, 2e-6);
      std::vector<double> want(45);
      for (std::size_t i = 0; i < 45; ++i) want[i] = h[i] + 1.0;
      expect_near_all(y, want, 2e-6);
    }
    // compile(f) then is the traced function too.
    EXPECT_EQ(compile(traced_fn).trace_names(), std::vector<std::string>{"h"});
  }
  // Off again: the compiled kernels, nothing recorded (a sink set now would see nothing).
  ASSERT_FALSE(tracing_enabled());
  std::vector<float> y(45);
  traced_fn(x, into(y));
  EXPECT_TRUE(compile(traced_fn).trace_names().empty());
}

TEST(Trace, SubmittedCallsRecordBeforeTheirFence) {
  recording rec;
  executable exe = compile(traced_graph(true));
  for (const device& d : devices()) {
    SCOPED_TRACE(d.name());
    auto x = ramp(300);
    std::vector<float> y(300), y2(300);
    fence first = exe.submit({x}, {y}, d);
    fence second = traced_fn.on(d).submit(x, into(y2));
    second.wait();
    ASSERT_TRUE(first.ready());
    auto got = rec.take();
    ASSERT_EQ(got.size(), 3u);  // h and s of the executable's call, h of the fn's
    EXPECT_EQ(got[0].name, "h");
    EXPECT_EQ(got[2].name, "h");
    EXPECT_EQ(got[0].floats(), got[2].floats());
    for (std::size_t i = 0; i < 300; ++i) {
      double h = std::exp(double(x[i])) * 2.0;
      EXPECT_NEAR(got[0].floats()[i], h, 2e-6 * std::max(1.0, h));
      EXPECT_NEAR(y[i], h + 1, 2e-6 * (h + 1));
    }
    EXPECT_EQ(y, y2);
  }
}

TEST(Trace, InputsResultsAndIntegers) {
  recording rec;
  graph g;
  auto x = g.input("x", dtype::i32, {2, dyn});
  g.trace("x", x);
  auto y = g.mul(x, g.constant(3, dtype::i32));
  g.trace("y", y);  // also the result
  g.trace("rows", g.reduce(ir::op::reduce_max, y, {1}, true));
  g.output("y", y);
  executable exe = compile(g);
  for (const device& d : devices()) {
    SCOPED_TRACE(d.name());
    std::vector<std::int32_t> in{1, -2, 7, 4, 0, -9}, out(6);
    exe.run({tensor_ref(in.data(), dtype::i32, {2, 3})},
            {tensor_ref(out.data(), dtype::i32, {2, 3})}, d);
    EXPECT_EQ(out, (std::vector<std::int32_t>{3, -6, 21, 12, 0, -27}));
    auto got = rec.take();
    ASSERT_EQ(got.size(), 3u);
    auto ints = [](const record& r) {
      std::vector<std::int32_t> v(r.bytes.size() / 4);
      std::memcpy(v.data(), r.bytes.data(), r.bytes.size());
      return v;
    };
    EXPECT_EQ(got[0].dims, (shape{2, 3}));
    EXPECT_EQ(ints(got[0]), in);
    EXPECT_EQ(ints(got[1]), out);
    EXPECT_EQ(got[2].dims, (shape{2, 1}));
    EXPECT_EQ(ints(got[2]), (std::vector<std::int32_t>{21, 12}));
  }
}

// The .npy file's header dict and its data.
std::pair<std::string, std::vector<unsigned char>> read_npy(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<unsigned char> all((std::istreambuf_iterator<char>(in)),
                                 std::istreambuf_iterator<char>());
  EXPECT_GE(all.size(), 10u);
  if (all.size() < 10) return {};
  EXPECT_EQ(std::string(all.begin() + 1, all.begin() + 6), "NUMPY");
  std::size_t header = all[8] | (all[9] << 8);
  EXPECT_EQ((10 + header) % 64, 0u);
  return {std::string(all.begin() + 10, all.begin() + 10 + header),
          std::vector<unsigned char>(all.begin() + 10 + header, all.end())};
}

TEST(Trace, KilnTraceWritesStderrAndNpyFiles) {
  auto dir = std::filesystem::temp_directory_path() / "kiln-trace-test";
  std::filesystem::remove_all(dir);
  setenv("KILN_TRACE", "1", 1);
  setenv("KILN_DUMP_DIR", dir.c_str(), 1);
  executable exe = compile(traced_graph(true));
  auto x = ramp(20);
  std::vector<float> y(20);
  testing::internal::CaptureStderr();
  exe.run({x}, {y}, device::cpu());
  std::string err = testing::internal::GetCapturedStderr();
  unsetenv("KILN_TRACE");
  unsetenv("KILN_DUMP_DIR");
  EXPECT_NE(err.find("kiln trace: " + exe.name() + " #1 'h' f32[20]: 0.446260"), std::string::npos)
      << err;
  EXPECT_NE(err.find("'s' f32[]: "), std::string::npos) << err;
  auto [header, data] = read_npy(dir / exe.name() / "trace" / "1-h.npy");
  EXPECT_NE(header.find("'descr': '<f4'"), std::string::npos) << header;
  EXPECT_NE(header.find("'shape': (20,)"), std::string::npos) << header;
  ASSERT_EQ(data.size(), 20 * sizeof(float));
  std::vector<float> h(20);
  std::memcpy(h.data(), data.data(), data.size());
  for (std::size_t i = 0; i < 20; ++i) EXPECT_FLOAT_EQ(h[i] + 1.0f, y[i]);
  auto [s_header, s_data] = read_npy(dir / exe.name() / "trace" / "1-s.npy");
  EXPECT_NE(s_header.find("'shape': ()"), std::string::npos) << s_header;
  EXPECT_EQ(s_data.size(), sizeof(float));
  std::filesystem::remove_all(dir);
}

TEST(Trace, BadNamesAndValuesAreRefused) {
  graph g, other;
  auto x = g.input("x", dtype::f32, {4});
  auto message = [&](auto&& f) {
    try {
      f();
    } catch (const error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] { g.trace("", x); }).find("trace: the name is empty"), std::string::npos);
  g.trace("x", x);
  EXPECT_NE(message([&] { g.trace("x", g.neg(x)); }).find("'x' is traced twice"),
            std::string::npos);
  EXPECT_NE(
      message([&] { g.trace(std::string(64, 'n'), x); }).find("has 64 characters; at most 63"),
      std::string::npos);
  EXPECT_NE(message([&] {
              g.trace("y", other.input("y", dtype::f32, {4}));
            }).find("belongs to another graph"),
            std::string::npos);
}

// A product with its epilogue, then a softmax (a row group: max, exp-sum and divide regions run
// a block of rows at a time): under KILN_PROFILE each CPU call prints one line per region and
// one for the row group, naming the executable, each within the call's time, then their sum;
// the results are the same bits as without.
TEST(CpuProfile, EachRegionsTimeIsPrintedOnTheCpu) {
  const auto [said, call_us, dispatches] =
      test_support::profile_softmax_of_product(device::cpu(), "profiled");
  std::istringstream lines(said);
  std::string line;
  int runs = 0;
  double sum = 0, total = -1;
  bool product = false, row_group = false;
  while (std::getline(lines, line)) {
    ASSERT_EQ(line.rfind("kiln profile: profiled-", 0), 0u) << line;
    if (auto at = line.find(" runs: "); at != std::string::npos) {
      EXPECT_EQ(std::stoi(line.substr(line.rfind(' ', at - 1) + 1)), runs) << line;
      total = std::stod(line.substr(at + 7));
      continue;
    }
    const auto at = line.find(" cpu ");
    ASSERT_NE(at, std::string::npos) << line;
    const double us = std::stod(line.substr(at + 5));
    EXPECT_GE(us, 0.0) << line;
    EXPECT_LE(us, call_us) << line;
    sum += us;
    product = product || line.find("region 0: matmul") != std::string::npos;
    row_group = row_group || (line.find("(a row group):") != std::string::npos &&
                              line.find("reduce_max") != std::string::npos);
    ++runs;
  }
  EXPECT_TRUE(product) << said;
  EXPECT_TRUE(row_group) << said;
  EXPECT_EQ(runs, 2) << said;
  EXPECT_NEAR(total, sum, 0.01 * runs + 1e-9) << said;
}

}  // namespace
