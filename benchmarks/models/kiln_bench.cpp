// kiln's side of the model benchmark: each model of make_models.py imported by kiln::onnx (the
// batch bound to 1; BERT's also to 8, its sequence length to 128, the MLP's tokens to 256), with
// the inputs ort_bench.js feeds ONNX Runtime; import plus compile plus the first call, then the
// median and minimum of 20 timed calls, and at the end the process's peak resident memory. Where
// ort_bench.js left ONNX Runtime's output beside the model (<model>.ort.bin), kiln's is compared
// with it; kiln's is written beside it (<model>.kiln.bin). KILN_BENCH_DEVICE=vulkan runs the calls
// on the Vulkan device instead: with host data (each call stages its inputs and result), then on
// device buffers, the last call under KILN_PROFILE=1, whose dispatches' device times kiln prints.
// A model cut where a size depends on values (the detector) runs through kiln::onnx::model.
// --busy: beside another process that keeps a core busy (a spinning child), each model's calls
// with one thread and with THREADS alternate, ten of each at a time, 80 of each: both medians
// and the ratio (a pool that waits on a descheduled worker makes more threads slower).
// Usage: kiln_bench MODEL_DIR [THREADS] [--busy]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string_view>
#include <vector>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <kiln/onnx.hpp>

namespace {

using clock_type = std::chrono::steady_clock;

double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

// The milliseconds of 20 calls of `call`, sorted.
template <class F>
std::vector<double> sorted_times(F&& call) {
  std::vector<double> times;
  for (int i = 0; i < 20; ++i) {
    auto s = clock_type::now();
    call();
    times.push_back(ms_since(s));
  }
  std::sort(times.begin(), times.end());
  return times;
}

// ort_bench.js's inputs: floats sin(0.37 i), the int64 mask 1 for i % 100 < 90.
std::vector<unsigned char> input_bytes(kiln::dtype t, std::int64_t n) {
  std::vector<unsigned char> b(static_cast<std::size_t>(n * kiln::size_in_bytes(t)));
  for (std::int64_t i = 0; i < n; ++i) {
    if (t == kiln::dtype::i64) {
      std::int64_t v = i % 100 < 90;
      std::memcpy(b.data() + i * 8, &v, 8);
    } else {
      float v = std::sin(0.37f * static_cast<float>(i));
      std::memcpy(b.data() + i * 4, &v, 4);
    }
  }
  return b;
}

// max |kiln - ORT| over ORT's first output left beside the model, where both have its size.
void compare_with_ort(const std::filesystem::path& dir, const char* model, const float* got,
                      std::size_t n) {
  std::ofstream(dir / (std::string(model) + ".kiln.bin"), std::ios::binary)
      .write(reinterpret_cast<const char*>(got), static_cast<std::streamsize>(n * sizeof(float)));
  std::ifstream ort(dir / (std::string(model) + ".ort.bin"), std::ios::binary | std::ios::ate);
  if (!ort || static_cast<std::size_t>(ort.tellg()) != n * sizeof(float)) {
    if (ort) std::printf(", ORT's first output has another size");
    return;
  }
  std::vector<float> want(n);
  ort.seekg(0);
  ort.read(reinterpret_cast<char*>(want.data()), static_cast<std::streamsize>(n * sizeof(float)));
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < n; ++i) {
    worst = std::max(worst, std::fabs(double(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(double(want[i])));
  }
  std::printf(", max |kiln - ORT| %.3g (outputs up to %.3g)", worst, scale);
}

// A model cut where a size depends on values (the detector's NonMaxSuppression): its calls through
// kiln::onnx::model, which allocates the results; beside them the first graph's calls alone (what
// the cut adds: the wait for that graph, the node on the host, the graph after it).
void run_cut_model(const char* name, const std::filesystem::path& dir, kiln::onnx::model model,
                   clock_type::time_point t0, int threads, const kiln::device& dev) {
  for (const kiln::executable& e : model.executables()) e.set_threads(threads);
  std::vector<std::vector<unsigned char>> data;
  std::vector<kiln::tensor_ref> args;
  for (const auto& p : model.inputs()) {
    const kiln::shape d(p.dims);
    data.push_back(input_bytes(p.type, d.element_count()));
    args.emplace_back(static_cast<const void*>(data.back().data()), p.type, d);
  }
  std::vector<kiln::onnx::tensor_data> out = model.run(args, dev);
  const double first = ms_since(t0);
  const std::vector<double> times = sorted_times([&] { model.run(args, dev); });
  const kiln::executable& before = model.executables().front();
  std::vector<kiln::shape> in_dims;
  for (const auto& a : args) in_dims.push_back(a.ref.dims);
  std::vector<std::vector<unsigned char>> held;
  std::vector<kiln::tensor_ref> results;
  const auto sig = before.signature();
  const auto dims = before.result_dims(in_dims);
  for (std::size_t r = 0; r < dims.size(); ++r) {
    const auto t = sig.results[r].type;
    held.emplace_back(static_cast<std::size_t>(dims[r].element_count() * kiln::size_in_bytes(t)));
    results.emplace_back(static_cast<void*>(held.back().data()), t, dims[r]);
  }
  const std::vector<double> alone = sorted_times([&] { before.run(args, results, dev); });
  std::printf(
      "%s: median %.3f ms, min %.3f ms, first call %.1f ms, %d threads, %zu graphs cut "
      "around a host step (the graph before it alone: median %.3f ms), %lld rows",
      name, times[10], times[0], first, threads, model.executables().size(), alone[10],
      static_cast<long long>(out[0].dims.dims[0]));
  compare_with_ort(dir, name, reinterpret_cast<const float*>(out[0].bytes.data()),
                   out[0].bytes.size() / sizeof(float));
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  const std::filesystem::path dir = argc > 1 ? argv[1] : ".";
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  const bool busy = argc > 3 && std::string_view(argv[3]) == "--busy";
  pid_t spinner = -1;
  if (busy && (spinner = fork()) == 0)
    for (;;) __asm__ volatile("");  // spins until killed
  const char* on = std::getenv("KILN_BENCH_DEVICE");
  const bool vulkan = on && std::string_view(on) == "vulkan";
  const kiln::device dev = vulkan ? kiln::device::vulkan() : kiln::device::cpu();
  struct run_of {
    const char* label;
    const char* file;
    std::int64_t batch;
  };
  for (const auto& [model, file, batch] :
       {run_of{"bert_layer", "bert_layer", 1}, run_of{"bert_layer_b8", "bert_layer", 8},
        run_of{"mlp", "mlp", 1}, run_of{"resnet_stages", "resnet_stages", 1},
        run_of{"mobilenet_224", "mobilenet_224", 1},
        run_of{"mobilenet_48x192", "mobilenet_48x192", 1}, run_of{"detector", "detector", 1}}) {
    const auto path = dir / (std::string(file) + ".onnx");
    if (!std::filesystem::exists(path)) continue;
    auto t0 = clock_type::now();
    kiln::onnx::import_options opt;
    opt.dims["batch"] = batch;
    opt.dims["seq"] = 128;     // BERT's
    opt.dims["tokens"] = 256;  // the MLP's
    kiln::onnx::imported imported = kiln::onnx::import(path, opt);
    if (imported.rest) {  // cut where a size depends on values: run whole by kiln::onnx::model
      if (!busy)
        run_cut_model(model, dir, kiln::onnx::model(std::move(imported)), t0, threads, dev);
      continue;
    }
    kiln::executable exe = kiln::onnx::compile(std::move(imported));
    exe.set_threads(threads);
    const auto sig = exe.signature();
    std::vector<std::vector<unsigned char>> data;
    std::vector<kiln::tensor_ref> args, results;
    for (const auto& p : sig.inputs) {
      kiln::shape d(p.dims);
      data.push_back(input_bytes(p.type, d.element_count()));
      args.emplace_back(static_cast<const void*>(data.back().data()), p.type, d);
    }
    std::vector<kiln::shape> in_dims;
    for (const auto& p : sig.inputs) in_dims.emplace_back(p.dims);
    auto out_dims = exe.result_dims(in_dims);
    std::vector<std::vector<float>> out;
    for (const auto& d : out_dims) out.emplace_back(static_cast<std::size_t>(d.element_count()));
    for (std::size_t r = 0; r < out.size(); ++r)
      results.emplace_back(static_cast<void*>(out[r].data()), kiln::dtype::f32, out_dims[r]);
    exe.run(args, results, dev);
    const double first = ms_since(t0);
    if (busy) {
      std::vector<double> alone, shared;
      for (int round = 0; round < 8; ++round)
        for (auto [n, into] : {std::pair{1, &alone}, std::pair{threads, &shared}}) {
          exe.set_threads(n);
          for (int i = 0; i < 10; ++i) {
            auto s = clock_type::now();
            exe.run(args, results, dev);
            into->push_back(ms_since(s));
          }
        }
      std::sort(alone.begin(), alone.end());
      std::sort(shared.begin(), shared.end());
      std::printf("%s beside a busy process: 1 thread median %.3f ms, %d threads %.3f ms (%.2fx)\n",
                  model, alone[40], threads, shared[40], alone[40] / shared[40]);
      continue;
    }
    const std::vector<double> times = sorted_times([&] { exe.run(args, results, dev); });
    std::printf("%s: median %.3f ms, min %.3f ms, first call %.1f ms, %d threads, %d dispatches",
                model, times[10], times[0], first, threads, exe.dispatch_count());
    if (vulkan) {  // the same calls on device buffers (as a framework's tensors are), one profiled
      std::vector<kiln::buffer<unsigned char>> held;
      std::vector<kiln::tensor_ref> on_device_args, on_device_results;
      auto device_ref = [&](const void* bytes, kiln::dtype t, const kiln::shape& d) {
        const auto n = static_cast<std::size_t>(d.element_count() * kiln::size_in_bytes(t));
        const auto* b = static_cast<const unsigned char*>(bytes);
        held.push_back(dev.upload(std::vector<unsigned char>(b, b + n)));
        kiln::runtime::buffer_ref r{nullptr, d, true, held.back().memory(), 0};
        return kiln::tensor_ref(r, t, true);
      };
      for (std::size_t a = 0; a < args.size(); ++a)
        on_device_args.push_back(device_ref(data[a].data(), sig.inputs[a].type, in_dims[a]));
      for (std::size_t r = 0; r < out.size(); ++r)
        on_device_results.push_back(device_ref(out[r].data(), kiln::dtype::f32, out_dims[r]));
      const std::vector<double> on_device =
          sorted_times([&] { exe.run(on_device_args, on_device_results, dev); });
      std::printf(", device buffers: median %.3f ms, min %.3f ms\n", on_device[10], on_device[0]);
      setenv("KILN_PROFILE", "1", 1);
      exe.run(on_device_args, on_device_results, dev);
      unsetenv("KILN_PROFILE");
      std::fflush(stdout);
    }
    compare_with_ort(dir, model, out[0].data(), out[0].size());
    std::printf("\n");
  }
  if (spinner > 0) {
    kill(spinner, SIGKILL);
    waitpid(spinner, nullptr, 0);
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("peak RSS %ld MB\n", usage.ru_maxrss / 1024);
}
