// Compiled modules (executable::save, kiln::module::load): a saved function runs from
// <kiln/runtime.hpp> alone (modules/runner.cpp, which would not compile if that header included
// the compiler) with the same plan, name, signature and results as the executable it came from,
// on the CPU and on lavapipe, checked against a double reference; variables keep their values,
// trace points their names; a kiln::fn saves too. Truncated, corrupted, wrong-version and
// wrong-byte-order files, and well-checksummed files whose plan is broken, are kiln::errors that
// name the problem.
#include <gtest/gtest.h>
#include <unistd.h>

#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <kiln/executable.hpp>
#include <kiln/kiln.hpp>
#include <kiln/runtime/npy.hpp>

#include "modules/runner.hpp"

#include "../support/errors.hpp"

using namespace kiln;

namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("kiln-module-" + std::to_string(getpid()) + "-" + name))
      .string();
}

// y = relu(x @ w + b) with w a tensor constant, s = y summed over each row.
const std::vector<float> weights = [] {
  std::vector<float> w(64);
  for (int i = 0; i < 64; ++i) w[i] = 0.125f * float((i * 7) % 11) - 0.5f;
  return w;
}();

executable mlp_layer() {
  graph g;
  auto x = g.input("x", dtype::f32, {dyn, 8});
  auto b = g.input("b", dtype::f32, {8});
  auto w = g.constant(weights, {8, 8});
  auto y = g.relu(g.add(g.matmul(x, w), b));
  g.output("y", y);
  g.output("s", g.reduce_sum(y, {1}, false));
  return compile(g);
}

TEST(Modules, ASavedFunctionRunsFromTheRuntimeAlone) {
  executable exe = mlp_layer();
  const std::string path = temp_path("mlp.kiln");
  exe.save(path);
  executable loaded = module::load(path);
  EXPECT_EQ(loaded.name(), exe.name());
  EXPECT_EQ(compiler::print(loaded.plan()), compiler::print(exe.plan()));
  EXPECT_EQ(to_string(loaded.signature()), to_string(exe.signature()));
  EXPECT_EQ(module_runner::signature_of(path), to_string(exe.signature()));
  EXPECT_EQ(loaded.input_names(), exe.input_names());
  EXPECT_EQ(loaded.output_names(), exe.output_names());
  EXPECT_EQ(loaded.result_dims(std::vector<shape>{{37, 8}, {8}}),
            (std::vector<shape>{{37, 8}, {37}}));
  EXPECT_NE(error_of([&] {
              loaded.result_dims(std::vector<shape>{{37, 9}, {8}});
            }).find("argument 1 has extents [37, 9] but the graph declares f32[?, 8]"),
            std::string::npos);

  const std::int64_t rows = 37;
  std::vector<float> x(rows * 8), b(8);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * float(i));
  for (int j = 0; j < 8; ++j) b[j] = 0.1f * float(j) - 0.3f;
  // The reference, in double.
  std::vector<double> y_ref(rows * 8), s_ref(rows);
  for (std::int64_t r = 0; r < rows; ++r)
    for (int j = 0; j < 8; ++j) {
      double acc = b[j];
      for (int k = 0; k < 8; ++k) acc += double(x[r * 8 + k]) * weights[k * 8 + j];
      y_ref[r * 8 + j] = std::max(acc, 0.0);
      s_ref[r] += y_ref[r * 8 + j];
    }
  for (const char* name : {"cpu", "vulkan"}) {
    SCOPED_TRACE(name);
    device d = std::string(name) == "cpu" ? device::cpu() : device::vulkan();
    std::vector<float> y(rows * 8), s(rows);
    exe.run({{"x", view(x.data(), {rows, 8})}, {"b", b}},
            {{"y", view(y.data(), {rows, 8})}, {"s", s}}, d);
    std::vector<float> got = module_runner::run_saved(path, x, b, rows, name);
    ASSERT_EQ(got.size(), y.size() + s.size());
    // The same plan on the same device: the same bits.
    EXPECT_EQ(std::vector<float>(got.begin(), got.begin() + y.size()), y);
    EXPECT_EQ(std::vector<float>(got.begin() + y.size(), got.end()), s);
    for (std::size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(got[i], y_ref[i], 1e-5) << i;
    for (std::int64_t r = 0; r < rows; ++r) EXPECT_NEAR(got[y.size() + r], s_ref[r], 1e-4) << r;
  }
  std::filesystem::remove(path);
}

TEST(Modules, VariablesKeepTheirValuesAndTracesTheirNames) {
  graph g;
  auto w = g.variable("w", dtype::i32, {4});
  auto x = g.input("x", dtype::i32, {4});
  auto sum = g.trace("sum", g.add(w, x));
  g.assign(w, sum);
  g.output("twice", g.mul(sum, g.constant(2, dtype::i32)));
  set_trace_sink([](const traced_value&) {});
  executable exe = compile(g);
  set_trace_sink({});
  ASSERT_EQ(exe.trace_names(), std::vector<std::string>{"sum"});
  exe.variable("w").load(std::vector<std::int32_t>{1, 2, 3, 4});
  std::vector<std::int32_t> xs{10, 20, 30, 40}, twice(4);
  testing::internal::CaptureStderr();  // (the default sink's lines)
  exe.run({xs}, {twice}, device::cpu());
  EXPECT_EQ(twice, (std::vector<std::int32_t>{22, 44, 66, 88}));
  auto bytes = exe.to_bytes();
  executable loaded = module::from_bytes(bytes, "saved bytes");
  std::string lines = testing::internal::GetCapturedStderr();
  EXPECT_NE(lines.find("'sum' i32[4]: 11, 22, 33, 44"), std::string::npos) << lines;
  EXPECT_EQ(loaded.trace_names(), std::vector<std::string>{"sum"});
  EXPECT_TRUE(loaded.assigns_in_place("w"));
  std::vector<std::int32_t> w_now(4);
  loaded.variable("w").save(w_now);
  EXPECT_EQ(w_now, (std::vector<std::int32_t>{11, 22, 33, 44}));
  EXPECT_FALSE(loaded.variable("w") == exe.variable("w"));  // a copy of the value, not the tensor
  for (const device& d : {device::cpu(), device::vulkan()}) {
    testing::internal::CaptureStderr();
    loaded.run({xs}, {twice}, d);
    testing::internal::GetCapturedStderr();
  }
  loaded.variable("w").save(w_now);
  EXPECT_EQ(w_now, (std::vector<std::int32_t>{31, 62, 93, 124}));
  EXPECT_EQ(twice, (std::vector<std::int32_t>{62, 124, 186, 248}));
}

constexpr auto scaled_softmax =
    fn<tensor<f32, dyn, 16>, tensor<f32>>([](auto x, auto t) { return softmax<1>(x * t); });

TEST(Modules, AKilnFnSavesToo) {
  const std::string path = temp_path("fn.kiln");
  scaled_softmax.save(path);
  executable loaded = module::load(path);
  EXPECT_EQ(loaded.input_names(), (std::vector<std::string>{"arg1", "arg2"}));
  std::vector<float> x(5 * 16), want(x.size()), got(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.7f * float(i));
  scaled_softmax(view(x.data(), {5, 16}), 1.5f, into(view(want.data(), {5, 16})));
  loaded.run({view(x.data(), {5, 16}), 1.5f}, {view(got.data(), {5, 16})});
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6f) << i;
  std::filesystem::remove(path);
}

#ifdef KILN_RUN_PATH
// What kiln-run prints and exits with, running `arguments`.
std::pair<std::string, int> kiln_run(const std::string& arguments) {
  std::string out_file = temp_path("kiln-run.out");
  int status = std::system(
      (std::string(KILN_RUN_PATH) + " " + arguments + " > " + out_file + " 2>&1").c_str());
  std::ifstream in(out_file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(out_file);
  return {text, WEXITSTATUS(status)};
}

TEST(Modules, KilnRunRunsASavedModule) {
  const std::string module_path = temp_path("run.kiln"), x_path = temp_path("x.npy"),
                    y_path = temp_path("y.npy");
  mlp_layer().save(module_path);
  const std::int64_t rows = 3;
  std::vector<float> x(rows * 8);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = 0.25f * float(i % 9) - 1.0f;
  runtime::write_npy(x_path, dtype::f32, {rows, 8}, x.data());
  auto [sig, sig_status] = kiln_run(module_path + " --signature");
  EXPECT_EQ(sig_status, 0) << sig;
  EXPECT_NE(sig.find("input x: f32[?, 8]\ninput b: f32[8]\noutput y: f32[?, 8]\noutput s: f32[?]"),
            std::string::npos)
      << sig;
  executable exe = module::load(module_path);
  std::vector<float> b{0, 0.5f, 1, -1, 0, 0, 2, 0.25f};
  for (const char* device : {"cpu", "vulkan"}) {
    SCOPED_TRACE(device);
    auto [text, status] =
        kiln_run(module_path + " --device " + device + " --input x=" + x_path +
                 " --input b=8=0,0.5,1,-1,0,0,2,0.25 --output y=" + y_path + " --benchmark 3");
    ASSERT_EQ(status, 0) << text;
    runtime::npy_array y = runtime::read_npy(y_path);
    ASSERT_EQ(y.dims, (shape{rows, 8}));
    std::vector<float> got(rows * 8);
    std::memcpy(got.data(), y.bytes.data(), y.bytes.size());
    // The same bits as the module run in this process on that device, and the reference.
    std::vector<float> here(rows * 8), s(rows);
    exe.run({view(x.data(), {rows, 8}), b}, {view(here.data(), {rows, 8}), s},
            std::string(device) == "cpu" ? device::cpu() : device::vulkan());
    EXPECT_EQ(got, here);
    for (std::int64_t r = 0; r < rows; ++r)
      for (int j = 0; j < 8; ++j) {
        double acc = b[j];
        for (int k = 0; k < 8; ++k) acc += double(x[r * 8 + k]) * weights[k * 8 + j];
        EXPECT_NEAR(got[r * 8 + j], std::max(acc, 0.0), 1e-5) << r << "," << j;
      }
    EXPECT_NE(text.find("y: f32[3, 8] = [["), std::string::npos) << text;
    char s_text[64];
    std::snprintf(s_text, sizeof s_text, "s: f32[3] = [%.7g, %.7g, %.7g]", s[0], s[1], s[2]);
    EXPECT_NE(text.find(s_text), std::string::npos) << s_text << "\n" << text;
    EXPECT_NE(text.find("benchmark: 3 calls, min "), std::string::npos) << text;
  }
  auto [devices, devices_status] = kiln_run("--list-devices");
  EXPECT_EQ(devices_status, 0) << devices;
  EXPECT_NE(devices.find("cpu: the host"), std::string::npos) << devices;
  EXPECT_NE(devices.find("vulkan:0 ("), std::string::npos) << devices;
  EXPECT_NE(devices.find("storage buffers per stage"), std::string::npos) << devices;
  auto [missing, missing_status] = kiln_run(module_path + " --input x=" + x_path);
  EXPECT_EQ(missing_status, 2);
  EXPECT_NE(missing.find("input 'b' is not given"), std::string::npos) << missing;
  auto [wrong, wrong_status] = kiln_run(module_path + " --input x=" + x_path + " --input b=1,2");
  EXPECT_EQ(wrong_status, 1);
  EXPECT_NE(wrong.find("argument 2 has extents [2] but the graph declares f32[8]"),
            std::string::npos)
      << wrong;
  auto [damaged, damaged_status] = kiln_run(x_path);  // not a module
  EXPECT_EQ(damaged_status, 1);
  EXPECT_NE(damaged.find("not a kiln module"), std::string::npos) << damaged;
  // Paths that are not regular files, as the module and as an input: named kiln::errors.
  const std::string folder = temp_path("folder.npy");
  std::filesystem::create_directory(folder);
  for (const std::string& args :
       {folder, module_path + " --input x=" + folder + " --input b=8=0,0,0,0,0,0,0,0"}) {
    auto [text, status] = kiln_run(args);
    EXPECT_EQ(status, 1) << args << "\n" << text;
    EXPECT_NE(text.find("cannot open " + folder + ": not a regular file"), std::string::npos)
        << text;
  }
  EXPECT_NE(error_of([&] { module::load(folder); }).find("not a regular file"), std::string::npos);
  std::filesystem::remove(folder);
  // Literals exact for the input's type, or refused (status 2, naming the element).
  for (const auto& [literal, why] : std::vector<std::pair<std::string, std::string>>{
           {"8=1,2,3,4,5,6,7,", "'' is not a number"},
           {"8=1,2,3,4,5,6,7,1e39", "'1e39' is beyond f32's largest value"},
           {"8=1,2,3,4,5,6,7,x", "'x' is not a number"}}) {
    auto [text, status] = kiln_run(module_path + " --input x=" + x_path + " --input b=" + literal);
    EXPECT_EQ(status, 2) << literal << "\n" << text;
    EXPECT_NE(text.find(why), std::string::npos) << literal << "\n" << text;
  }
  for (const auto& p : {module_path, x_path, y_path}) std::filesystem::remove(p);
}

// With KILN_REPRO_DIR set, a call that fails leaves its module, arguments and a kiln-run command
// there, and its error names the folder; the command fails the same way.
TEST(Modules, AFailedCallLeavesAReproducer) {
  const std::string root = temp_path("repro");
  std::filesystem::remove_all(root);
  graph g;
  auto x = g.input("x", dtype::f32, {dyn, dyn});
  g.output("i", g.argmax(x, 1, false));
  executable exe = compile(g);
  std::vector<float> empty;  // 3 x 0: argmax has no index to give
  std::vector<std::int64_t> out(3);
  const std::string plain = error_of([&] {
    exe.run({view(empty.data(), {3, 0})}, {out}, device::cpu());
  });
  ASSERT_NE(plain, "");
  EXPECT_EQ(plain.find("reproducer"), std::string::npos);  // KILN_REPRO_DIR unset: nothing
  setenv("KILN_REPRO_DIR", root.c_str(), 1);
  const std::string named = error_of([&] {
    exe.run({view(empty.data(), {3, 0})}, {out}, device::cpu());
  });
  unsetenv("KILN_REPRO_DIR");
  const std::string folder = root + "/" + exe.name() + "-";
  ASSERT_EQ(named.rfind(plain + " (reproducer: " + folder, 0), 0u) << named;
  std::string where = named.substr(plain.size() + std::string(" (reproducer: ").size());
  where.pop_back();  // the closing parenthesis
  for (const char* file :
       {"module.kiln", "1-x.npy", "plan.txt", "error.txt", "device.txt", "command.sh"})
    EXPECT_TRUE(std::filesystem::exists(where + "/" + file)) << file;
  EXPECT_EQ(module::load(where + "/module.kiln").name(), exe.name());
  EXPECT_EQ(runtime::read_npy(where + "/1-x.npy").dims, (shape{3, 0}));
  std::ifstream command_file(where + "/command.sh");
  std::string command((std::istreambuf_iterator<char>(command_file)),
                      std::istreambuf_iterator<char>());
  EXPECT_NE(command.find("kiln-run module.kiln --device cpu --input 'x=1-x.npy'"),
            std::string::npos)
      << command;
  auto [again, status] =
      kiln_run(where + "/module.kiln --device cpu --input x=" + where + "/1-x.npy");
  EXPECT_EQ(status, 1);
  EXPECT_NE(again.find(plain.substr(plain.find(": ", 6))), std::string::npos) << again;
  std::filesystem::remove_all(root);
  // KILN_REPRO_DIR where no folder can be made (a file): the error is the plain one, naming no
  // reproducer, and stderr says why once.
  const std::string file = temp_path("repro-is-a-file");
  std::ofstream(file) << "x";
  setenv("KILN_REPRO_DIR", file.c_str(), 1);
  testing::internal::CaptureStderr();
  const std::string unwritten = error_of([&] {
    exe.run({view(empty.data(), {3, 0})}, {out}, device::cpu());
  });
  const std::string said = testing::internal::GetCapturedStderr();
  unsetenv("KILN_REPRO_DIR");
  EXPECT_EQ(unwritten, plain);
  EXPECT_NE(said.find("kiln: KILN_REPRO_DIR: cannot write " + file), std::string::npos) << said;
  std::filesystem::remove(file);
}
// A kiln::fn's own call that fails, and a submitted call that fails, leave reproducers too: the
// error (the fn's at once, the submission's at its fence) names the folder, which holds the
// module and the arguments. A named kiln::fn's reproducer and saved module carry its name.
TEST(Modules, FnCallsAndSubmissionsLeaveReproducers) {
  const std::string root = temp_path("repro-fn");
  std::filesystem::remove_all(root);
  constexpr auto f = fn<tensor<f32, dyn, dyn>>([](auto x) { return argmax<1>(x); });
  f.set_name("pick");
  graph g;
  g.output("i", g.argmax(g.input("x", dtype::f32, {dyn, dyn}), 1, false));
  executable exe = compile(g);
  std::vector<float> empty;  // 3 x 0: argmax has no index to give
  std::vector<std::int64_t> out(3);
  auto folder_of = [](const std::string& message) {
    const auto at = message.find(" (reproducer: ");
    if (at == std::string::npos) return std::string();
    std::string where = message.substr(at + std::string(" (reproducer: ").size());
    where.pop_back();
    return where;
  };
  setenv("KILN_REPRO_DIR", root.c_str(), 1);
  const std::string from_fn = error_of([&] { f(view(empty.data(), {3, 0}), into(out)); });
  const std::string from_submission = error_of([&] {
    exe.submit({view(empty.data(), {3, 0})}, {out}, device::cpu()).wait();
  });
  unsetenv("KILN_REPRO_DIR");
  for (const std::string& message : {from_fn, from_submission}) {
    SCOPED_TRACE(message);
    const std::string where = folder_of(message);
    ASSERT_NE(where, "");
    EXPECT_EQ(where.rfind(root + "/", 0), 0u);
    for (const char* file : {"module.kiln", "plan.txt", "error.txt", "command.sh"})
      EXPECT_TRUE(std::filesystem::exists(where + "/" + file)) << file;
    EXPECT_NE(message.find("argmax"), std::string::npos);
    EXPECT_EQ(runtime::read_npy(where + "/1-" + (message == from_fn ? "arg1" : "x") + ".npy").dims,
              (shape{3, 0}));
  }
  EXPECT_EQ(folder_of(from_fn).rfind(root + "/pick-", 0), 0u) << from_fn;
  EXPECT_EQ(module::load(folder_of(from_fn) + "/module.kiln").name().rfind("pick-", 0), 0u);
  f.save(root + "/saved.kiln");
  EXPECT_EQ(module::load(root + "/saved.kiln").name().rfind("pick-", 0), 0u);
  std::filesystem::remove_all(root);
}
#endif

constexpr auto with_tables = fn<tensor<f32, dyn, 4>>([](auto x) {
  return x * table<float, 4>{{0.5f, -1.0f, 2.0f, 0.25f}} + table<float, 1, 1>{{10}};
});

// A kiln::fn's tables become the executable's tensor constants (compile(f)) and the module's.
TEST(Modules, TablesTravelWithTheFunction) {
  std::vector<float> x(12), want(12), compiled(12), loaded(12);
  for (int i = 0; i < 12; ++i) x[i] = float(i) - 5;
  with_tables(view(x.data(), {3, 4}), into(view(want.data(), {3, 4})));
  const float scale[4] = {0.5f, -1.0f, 2.0f, 0.25f};
  for (int i = 0; i < 12; ++i) EXPECT_EQ(want[i], x[i] * scale[i % 4] + 10) << i;
  executable exe = compile(with_tables);
  EXPECT_EQ(exe.input_names(), std::vector<std::string>{"arg1"});
  exe.run({view(x.data(), {3, 4})}, {view(compiled.data(), {3, 4})});
  EXPECT_EQ(compiled, want);
  const std::string path = temp_path("tables.kiln");
  with_tables.save(path);
  module::load(path).run({view(x.data(), {3, 4})}, {view(loaded.data(), {3, 4})});
  EXPECT_EQ(loaded, want);
  std::filesystem::remove(path);
}

// kiln-run's literals for an integer input: exact, or refused naming the element.
TEST(Modules, KilnRunTakesIntegerLiteralsExactly) {
  graph g;
  auto n = g.input("n", dtype::i32, {2});
  g.output("twice", g.add(n, n));
  const std::string path = temp_path("ints.kiln");
  compile(g).save(path);
  auto [ok, ok_status] = kiln_run(path + " --device cpu --input n=7,-8");
  EXPECT_EQ(ok_status, 0) << ok;
  EXPECT_NE(ok.find("twice: i32[2] = [14, -16]"), std::string::npos) << ok;
  for (const auto& [literal, why] : std::vector<std::pair<std::string, std::string>>{
           {"3000000000,1", "'3000000000' is out of i32's range"},
           {"1.5,2", "'1.5' is not an integer, as i32 needs"},
           {"1,2,", "'' is not an integer"},
           {"9223372036854775807x2=1,2", "does not fit in 64 bits"}}) {
    auto [text, status] = kiln_run(path + " --device cpu --input n=" + literal);
    EXPECT_EQ(status, 2) << literal << "\n" << text;
    EXPECT_NE(text.find(why), std::string::npos) << literal << "\n" << text;
  }
  std::filesystem::remove(path);
}

// A view of higher rank than the region that reads it (a reshape adding leading 1s, a reflect
// pad, reshaped back: how exporters write a 1-D padding, as in a voice-activity model) loads
// from its module and runs as the executable it came from does.
TEST(Modules, AViewOfHigherRankThanItsRegionLoads) {
  graph g;
  auto x = g.input("x", dtype::f32, {1, 16});
  auto padded = g.pad(g.reshape(x, {1, 1, 1, 16}), {0, 0, 0, 4, 0, 0, 0, 4}, "reflect");
  g.output("y", g.mul(g.reshape(padded, {1, 1, 24}), g.constant(2.0)));
  executable e = compile(g);
  const compiler::plan& p = e.plan();
  bool higher = false;
  for (const auto& r : p.regions)
    for (auto v : r.views) higher = higher || p.graph.nodes[p.views[v]].dims.rank > r.space.rank;
  ASSERT_TRUE(higher) << "the plan no longer reads a view of higher rank than its region";
  executable loaded = executable::from_bytes(e.to_bytes());
  std::vector<float> xs(16), y(24), z(24);
  for (int i = 0; i < 16; ++i) xs[i] = float(i * i) - 3;
  e.run({xs}, {y}, device::cpu());
  loaded.run({xs}, {z}, device::cpu());
  for (int j = 0; j < 24; ++j) {
    const int k = j < 4 ? 4 - j : j > 19 ? 34 - j : j - 4;  // reflected into [0, 16)
    EXPECT_EQ(y[j], 2 * xs[k]) << j;
    EXPECT_EQ(z[j], y[j]) << j;
  }
}

// Two views of one product read by one region (an LSTM's gates, as slices of one MatMul): the
// region lists the product once, and the plan loads from its module and runs as it came.
TEST(Modules, ViewsOfOneValueInARegionLoad) {
  graph g;
  auto x = g.input("x", dtype::f32, {2, 3});
  auto w = g.input("w", dtype::f32, {3, 8});
  auto m = g.matmul(x, w);
  g.output("y", g.mul(g.slice(m, {0}, {4}, {1}), g.sigmoid(g.slice(m, {4}, {8}, {1}))));
  executable e = compile(g);
  const compiler::plan& p = e.plan();
  bool shared = false;
  for (const auto& r : p.regions)
    for (std::size_t i = 0; i < r.views.size(); ++i)
      for (std::size_t j = 0; j < i; ++j)
        shared = shared || p.view_bases[r.views[i]] == p.view_bases[r.views[j]];
  ASSERT_TRUE(shared) << "the plan no longer reads two views of one value in a region";
  executable loaded = executable::from_bytes(e.to_bytes());
  std::vector<float> xs = {1, -2, 0.5f, 0.25f, 3, -1}, ws(24), y(8), z(8);
  for (int i = 0; i < 24; ++i) ws[i] = 0.1f * float((i * 5) % 7) - 0.3f;
  e.run({xs, ws}, {y}, device::cpu());
  loaded.run({xs, ws}, {z}, device::cpu());
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) {
      double a = 0, b = 0;
      for (int k = 0; k < 3; ++k) {
        a += double(xs[i * 3 + k]) * ws[k * 8 + j];
        b += double(xs[i * 3 + k]) * ws[k * 8 + 4 + j];
      }
      EXPECT_NEAR(y[i * 4 + j], a / (1 + std::exp(-b)), 1e-5) << i << "," << j;
      EXPECT_EQ(z[i * 4 + j], y[i * 4 + j]) << i << "," << j;
    }
}

TEST(Modules, DamagedFilesAreErrorsThatSayWhat) {
  const std::vector<std::uint8_t> good = mlp_layer().to_bytes();
  auto load_error = [](std::vector<std::uint8_t> b) {
    return error_of([&] { module::from_bytes(b, "m.kiln"); });
  };
  // Every truncation.
  for (std::size_t n = 0; n < good.size(); ++n) {
    std::string e = load_error(std::vector<std::uint8_t>(good.begin(), good.begin() + n));
    ASSERT_EQ(e.rfind("kiln: module: m.kiln: truncated", 0), 0u) << n << ": " << e;
  }
  // Every byte of the payload flipped.
  for (std::size_t i = 32; i < good.size(); ++i) {
    auto b = good;
    b[i] ^= 0x5a;
    ASSERT_EQ(load_error(b),
              "kiln: module: m.kiln: corrupt: the checksum does not match its contents")
        << i;
  }
  auto patched = [&](std::size_t at, std::vector<std::uint8_t> with) {
    auto b = good;
    std::copy(with.begin(), with.end(), b.begin() + static_cast<std::ptrdiff_t>(at));
    return b;
  };
  EXPECT_EQ(load_error(patched(0, {'N', 'O', 'P', 'E'})),
            "kiln: module: m.kiln: not a kiln module (its first bytes are not \"KILNMOD\")");
  EXPECT_EQ(load_error(patched(8, {1, 2, 3, 4})),  // the mark as a big-endian writer stores it
            "kiln: module: m.kiln: written with the other byte order (big-endian) than this "
            "machine's");
  EXPECT_EQ(load_error(patched(12, {1, 0, 0, 0})),
            "kiln: module: m.kiln: format version 1, but this kiln reads version 6");
  auto longer = good;
  longer.push_back(0);
  EXPECT_EQ(load_error(longer), "kiln: module: m.kiln: 1 bytes after the end of the module");
  EXPECT_NE(error_of([] { module::load("/nonexistent/m.kiln"); }).find("/nonexistent/m.kiln"),
            std::string::npos);
  // Well checksummed, but the plan is broken: every index the runtime follows is checked.
  auto broken = [&](auto&& change) {
    runtime::module_contents m = runtime::decode_module(good, "m.kiln");
    change(m);
    return load_error(runtime::encode_module(m));
  };
  EXPECT_NE(
      broken([](auto& m) { m.plan.graph.nodes.back().operands[0] = 999; }).find("corrupt plan: %"),
      std::string::npos);
  EXPECT_NE(broken([](auto& m) {
              m.plan.regions[0].args.push_back(77);
            }).find("corrupt plan: a region's parameter 77 is not below"),
            std::string::npos);
  EXPECT_NE(broken([](auto& m) {
              m.plan.regions[0].results.push_back(5);
            }).find("corrupt plan: a region's result 5 is not below 2"),
            std::string::npos);
  EXPECT_NE(broken([](auto& m) {
              m.parts.outputs.pop_back();
            }).find("the names do not match the plan's inputs and outputs"),
            std::string::npos);
  EXPECT_NE(broken([](auto& m) {
              auto& bytes = m.parts.constants[0].bytes;
              bytes = shared_bytes::copy_of(bytes.data(), bytes.size() - 1);
            }).find("a tensor constant's size"),
            std::string::npos);
  EXPECT_NE(broken([](auto& m) {
              m.plan.graph.nodes[0].kind = static_cast<ir::op>(250);
            }).find("no valid op"),
            std::string::npos);
  // Sizes that name a symbol the graph does not have, in 64 bits: one near 2^31 wraps to a small
  // index in 32 (a declaration, a node, every place a size is read from).
  for (std::int64_t forged : {std::int64_t{-2147483647} - 2, std::int64_t{-4294967297},
                              std::numeric_limits<std::int64_t>::min()}) {
    EXPECT_NE(broken([&](auto& m) {
                m.plan.graph.inputs[0].dims.dims[0] = forged;
              }).find("parameter 0 has an invalid type, rank or size"),
              std::string::npos)
        << forged;
    EXPECT_NE(broken([&](auto& m) {
                m.plan.graph.nodes[0].dims.dims[0] = forged;
              }).find("names an unknown symbol"),
              std::string::npos)
        << forged;
  }
  // An elementwise node larger than its operands' broadcast, which every kernel would read past.
  EXPECT_NE(broken([](auto& m) {
              for (auto& n : m.plan.graph.nodes)
                if (n.kind == ir::op::relu) n.dims.dims[1] *= 2;
            }).find("not the broadcast of its operands'"),
            std::string::npos);
  // A transient read that no region writes (the product's region writes y and, for the sum, t0):
  // the arena would give it no place, and the sum would read past the arena.
  ASSERT_EQ(runtime::decode_module(good, "m.kiln").plan.regions[0].writes.size(), 1u);
  EXPECT_NE(broken([](auto& m) {
              m.plan.regions[0].writes.clear();
            }).find("corrupt plan: a region reads transient 0 before any region writes it"),
            std::string::npos);
  // An input node whose extents differ from its declaration's.
  EXPECT_NE(broken([](auto& m) { m.plan.graph.nodes[0].dims.dims[0] += 1; }).find("declaration"),
            std::string::npos);
}

// The kernels emitted before saving travel in the module: loaded as trusted, on a device with the
// same target the module runs them as they are (no kernel emitted again), with the same bits; a
// kernel that is not SPIR-V, or not valid SPIR-V, is refused at load. Loaded as a file from
// elsewhere (the default), its kernels are emitted again from the plan, to the same words.
TEST(Modules, TheirKernelsRunAsTheyAreOnTheSameTargetWhereTrusted) {
  graph g;
  auto x = g.input("x", dtype::f32, {dyn, 64});
  g.output("p", g.add(g.softmax(g.mul(x, g.constant(2.0)), -1), g.constant(1.0)));
  g.output("s", g.reduce(ir::op::reduce_sum, x, {1}, false));
  executable e = compile(g);
  const device vk = device::vulkan();
  std::vector<float> in(5 * 64), p1(5 * 64), s1(5), p2(5 * 64), s2(5);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = float(i % 17) * 0.25f - 2.0f;
  e.run({view(in.data(), {5, 64})}, {view(p1.data(), {5, 64}), s1}, vk);
  const std::vector<spirv::kernel> emitted = e.kernels();
  ASSERT_FALSE(emitted.empty());
  const std::vector<std::uint8_t> bytes = e.to_bytes();
  executable fresh = module::from_bytes(bytes, "m.kiln");
  EXPECT_TRUE(fresh.kernels().empty());
  fresh.run({view(in.data(), {5, 64})}, {view(p2.data(), {5, 64}), s2}, vk);
  EXPECT_EQ(p2, p1);
  EXPECT_EQ(s2, s1);
  const std::vector<spirv::kernel> again = fresh.kernels();
  ASSERT_EQ(again.size(), emitted.size());
  for (std::size_t k = 0; k < emitted.size(); ++k) EXPECT_EQ(again[k].code, emitted[k].code);
  executable loaded = module::from_bytes(bytes, "m.kiln", /*trust_kernels=*/true);
  const std::vector<spirv::kernel> carried = loaded.kernels();
  ASSERT_EQ(carried.size(), emitted.size());
  for (std::size_t k = 0; k < emitted.size(); ++k) {
    EXPECT_EQ(carried[k].code, emitted[k].code);
    EXPECT_EQ(carried[k].constants, emitted[k].constants);
    EXPECT_EQ(carried[k].bindings, emitted[k].bindings);
  }
  loaded.run({view(in.data(), {5, 64})}, {view(p2.data(), {5, 64}), s2}, vk);
  EXPECT_EQ(loaded.kernels().size(), emitted.size());  // every variant was there
  EXPECT_EQ(p2, p1);
  EXPECT_EQ(s2, s1);
  auto load_error = [&](const runtime::module_contents& m) {
    return error_of([&] { (void)module::from_bytes(runtime::encode_module(m), "m.kiln", true); });
  };
  runtime::module_contents m = runtime::decode_module(bytes, "m.kiln", true);
  ASSERT_FALSE(m.kernels.empty());
  auto& [key, k] = m.kernels[0];
  const auto code = k.code;
  k.code[0] = 0x12345678;
  EXPECT_NE(load_error(m).find("kernel '" + key + "' is not SPIR-V"), std::string::npos);
  k.code = code;
  k.code.resize(k.code.size() - 3);  // cut inside its last instruction
  EXPECT_NE(load_error(m).find("kernel '" + key + "' is not valid SPIR-V"), std::string::npos);
  k.code = code;
  k.regions = 99;
  EXPECT_NE(load_error(m).find("impossible bindings, metadata or regions"), std::string::npos);
}

}  // namespace
