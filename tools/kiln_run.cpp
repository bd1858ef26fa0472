// kiln-run: runs a saved module (executable::save, f.save) from the command line, as
// iree-run-module does: inputs from .npy files or literals, results printed and written as .npy.
// It includes <kiln/runtime.hpp> only: a module runs without the compiler. Given an ONNX model
// (MODEL.onnx), it runs kiln-import-onnx (beside kiln-run, else on PATH) into a temporary module
// first, so ONNX's library stays out of kiln-run too; --dim, --shape, --value, --sequence and
// --optional go to the importer (a named dimension's size, an input's extents, an input's value
// at import, a sequence input's length, an optional input's presence: kiln-import-onnx says what
// each does). --save writes the module it runs (the imported one, for
// a model) to a file, which runs where neither the importer nor protobuf is installed; with no
// input to give, kiln-run then only saves.
//
//   kiln-run MODULE|MODEL.onnx [--dim NAME=SIZE]... [--shape INPUT=AxBxC]...
//            [--value NAME=VALUE|FILE.npy]... [--sequence INPUT=COUNT]...
//            [--optional INPUT=present|absent]...
//            [--device cpu|vulkan|vulkan:N] [--dump DIR]
//            [--input NAME=FILE.npy | NAME=VALUE | NAME=2x3=1,2,3,4,5,6]...
//            [--output NAME=FILE.npy]... [--benchmark N] [--signature] [--save FILE.kiln]
//            [--trust-kernels]   (run the module's own SPIR-V, not kernels emitted from its plan)
//   kiln-run --list-devices
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <kiln/runtime.hpp>
#include <kiln/runtime/constants.hpp>
#include <kiln/runtime/cpu/kernels.hpp>
#include <kiln/runtime/npy.hpp>
#include <kiln/runtime/vulkan/context.hpp>

#include <sys/wait.h>
#include <unistd.h>

namespace {

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "kiln-run: %s\n"
               "usage: kiln-run MODULE|MODEL.onnx [--dim NAME=SIZE]... [--shape INPUT=AxBxC]...\n"
               "         [--value NAME=VALUE|FILE.npy]... [--sequence INPUT=COUNT]...\n"
               "         [--optional INPUT=present|absent]...\n"
               "         [--device cpu|vulkan|vulkan:N] [--dump DIR]\n"
               "         [--input NAME=FILE.npy | NAME=VALUE | NAME=2x3=1,2,3,4,5,6]...\n"
               "         [--output NAME=FILE.npy]... [--benchmark N] [--signature]\n"
               "         [--save FILE.kiln] [--trust-kernels]\n"
               "       kiln-run --list-devices\n",
               why.c_str());
  std::exit(2);
}

// One element of a literal, exact for element type t or refused: an integer type takes integers in
// its range (nothing truncated or saturated), bool takes true, false, 1 and 0, a float type
// decimals (rounded to the nearest value), inf and nan, but nothing past its largest finite value.
kiln::scalar literal_element(const std::string& name, const std::string& one, kiln::dtype t) {
  auto refuse = [&](const std::string& why) {
    usage("input '" + name + "': '" + one + "' " + why);
  };
  const std::string type = std::string(kiln::name(t));
  if (t == kiln::dtype::boolean) {
    if (one == "true" || one == "1") return kiln::scalar::of_integer(t, 1);
    if (one == "false" || one == "0") return kiln::scalar::of_integer(t, 0);
    usage("input '" + name + "': '" + one + "' is not a bool (true, false, 1 or 0)");
  }
  char* stop = nullptr;
  errno = 0;
  if (kiln::is_integer(t)) {
    const long long v = std::strtoll(one.c_str(), &stop, 10);
    if (one.empty() || *stop != '\0') refuse("is not an integer, as " + type + " needs");
    const kiln::scalar s = kiln::scalar::of_integer(t, v);
    if (errno == ERANGE || s.i != v) refuse("is out of " + type + "'s range");
    return s;
  }
  const double v = std::strtod(one.c_str(), &stop);
  if (one.empty() || *stop != '\0') refuse("is not a number");
  const kiln::scalar s = kiln::scalar::of_float(t, v);
  if ((errno == ERANGE && std::isinf(v)) || (std::isinf(s.f) && !std::isinf(v)))
    refuse("is beyond " + type + "'s largest value");
  return s;
}

// A literal: "2.5" (a scalar), "1,2,3" (rank 1), or "2x3=1,2,3,4,5,6" (the extents first).
kiln::runtime::npy_array parse_literal(const std::string& name, const std::string& text,
                                       kiln::dtype t) {
  kiln::runtime::npy_array a;
  a.type = t;
  std::string values = text;
  bool explicit_dims = false;
  if (auto eq = text.find('='); eq != std::string::npos) {
    explicit_dims = true;
    values = text.substr(eq + 1);
    std::string dims = text.substr(0, eq);
    std::size_t at = 0;
    while (at <= dims.size()) {
      std::size_t end = dims.find('x', at);
      if (end == std::string::npos) end = dims.size();
      char* stop = nullptr;
      long long d = std::strtoll(dims.c_str() + at, &stop, 10);
      if (stop != dims.c_str() + end || d < 0 || a.dims.rank == kiln::max_rank)
        usage("input '" + name + "': extents '" + dims + "' are not like 2x3");
      a.dims.dims[a.dims.rank++] = d;
      at = end + 1;
    }
  }
  // Every piece between commas is one element: "1,2," has an empty third one. No values at all
  // only where the extents hold no elements.
  std::vector<kiln::scalar> elements;
  for (std::size_t at = 0; !values.empty() && at <= values.size();) {
    std::size_t end = values.find(',', at);
    if (end == std::string::npos) end = values.size();
    elements.push_back(literal_element(name, values.substr(at, end - at), t));
    at = end + 1;
  }
  if (!explicit_dims && elements.size() != 1) a.dims = kiln::shape{std::int64_t(elements.size())};
  std::int64_t count = 0;
  try {
    count = kiln::checked_element_count(a.dims, kiln::size_in_bytes(t), "input '" + name + "'",
                                        "extents");
  } catch (const kiln::error& e) {
    usage(e.what());
  }
  if (count != static_cast<std::int64_t>(elements.size()))
    usage("input '" + name + "': extents " + kiln::to_string(a.dims) + " hold " +
          std::to_string(count) + " elements, " + std::to_string(elements.size()) + " given");
  a.bytes = kiln::runtime::tensor_bytes(t, elements);
  return a;
}

// numpy's print of an array: nested brackets, and past 1000 elements only the first and last 3
// along each axis, with "..." between.
void print_values(std::string& out, const kiln::runtime::npy_array& a, int axis,
                  std::int64_t offset, bool summarize) {
  if (a.dims.rank == 0 || axis == a.dims.rank) {
    char text[32];
    double v = kiln::runtime::element_as_double(a.type, a.bytes.data(), offset);
    if (a.type == kiln::dtype::boolean)
      std::snprintf(text, sizeof text, "%s", v != 0 ? "True" : "False");
    else
      std::snprintf(text, sizeof text, "%.7g", v);
    out += text;
    return;
  }
  std::int64_t n = a.dims.dims[axis], stride = 1;
  for (int i = axis + 1; i < a.dims.rank; ++i) stride *= a.dims.dims[i];
  out += "[";
  for (std::int64_t i = 0; i < n; ++i) {
    if (summarize && n > 6 && i == 3) {
      out += axis + 1 == a.dims.rank ? "..., " : "...,\n" + std::string(axis + 1, ' ');
      i = n - 3;
    }
    print_values(out, a, axis + 1, offset + i * stride, summarize);
    if (i + 1 < n) out += axis + 1 == a.dims.rank ? ", " : ",\n" + std::string(axis + 1, ' ');
  }
  out += "]";
}

std::string values_text(const kiln::runtime::npy_array& a) {
  std::string out;
  print_values(out, a, 0, 0, a.dims.element_count() > 1000);
  return out;
}

// Each device with the limits and features kiln plans its kernels for.
void list_devices() {
  std::printf("cpu: the host, %u hardware threads\n", std::thread::hardware_concurrency());
  // The CPU kernels' instruction sets: those built, which this CPU runs, and the one in use.
  std::string sets;
  for (const kiln::cpu::built_kernel& k : kiln::cpu::built_kernels())
    sets += std::string(" ") + k.table->level + (k.runs ? "" : " (not on this CPU)");
  try {
    std::printf("  kernels: %s (%s); built:%s\n", kiln::cpu::chosen_kernels().level,
                kiln::cpu::chosen_kernels().isa, sets.c_str());
  } catch (const kiln::error& e) {
    std::printf("  kernels: %s; built:%s\n", e.what(), sets.c_str());
  }
  for (int i = 0;; ++i) {
    kiln::device d = kiln::device::cpu();
    try {
      d = kiln::device::vulkan(i);
    } catch (const kiln::error&) {
      if (i == 0) std::printf("(no Vulkan device)\n");
      return;
    }
    const kiln::spirv::target& t = d.context()->target();
    auto yes = [](bool b) { return b ? "yes" : "no"; };
    std::printf(
        "%s\n  Vulkan %u.%u, subgroup %u, workgroup <= %u invocations, shared memory %u bytes,\n"
        "  %u storage buffers per stage, buffers up to %llu bytes, offset alignment %llu,\n"
        "  float64 %s, int64 %s, subgroup arithmetic %s, memory shared with the host %s,\n"
        "  subnormals kept in f32 %s, inf/NaN/-0 kept in f32 %s, f32 quotients %s,\n"
        "  matmul tile %ux%u, f16 products on matrix units %s\n",
        d.name().c_str(), t.vulkan_version >> 22, (t.vulkan_version >> 12) & 0x3ff, t.subgroup_size,
        t.max_workgroup_size_x, t.shared_memory_bytes, t.max_storage_buffers,
        static_cast<unsigned long long>(t.max_storage_buffer_range),
        static_cast<unsigned long long>(d.context()->storage_offset_alignment()), yes(t.float64),
        yes(t.int64), yes(t.subgroup_arithmetic), yes(d.context()->unified()),
        yes(t.keeps_subnormals32()), yes(t.preserve_inf_nan32),
        t.cpu_device         ? "the driver's (a CPU's: exact)"
        : t.divides_in_f64() ? "rounded once from f64"
                             : "the driver's OpFDiv (2.5 ulp)",
        t.gemm().rows(), t.gemm().cols(),
        t.gemm(true).on_matrix_units()
            ? (std::to_string(t.f16_matrix_m) + "x" + std::to_string(t.f16_matrix_n) + "x" +
               std::to_string(t.f16_matrix_k) + " (VK_NV_cooperative_matrix), tile " +
               std::to_string(t.gemm(true).rows()) + "x" + std::to_string(t.gemm(true).cols()))
                  .c_str()
            : "no");
  }
}

// ONNX model `model` compiled into a temporary module by kiln-import-onnx (beside this program,
// else on PATH), given the importer's flags `at_import` (--dim, --value...); returns its path. A
// model the importer refuses ends kiln-run with status 1, its message already on stderr.
std::filesystem::path imported_module(const std::string& model,
                                      const std::vector<std::string>& at_import) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path beside = fs::read_symlink("/proc/self/exe", ec).parent_path() / "kiln-import-onnx";
  const std::string importer = !ec && fs::exists(beside) ? beside.string() : "kiln-import-onnx";
  const fs::path module =
      fs::temp_directory_path() / ("kiln-run-" + std::to_string(::getpid()) + ".kiln");
  std::vector<std::string> words = {importer, model, "-o", module.string()};
  words.insert(words.end(), at_import.begin(), at_import.end());
  std::vector<char*> command;
  for (std::string& w : words) command.push_back(w.data());
  command.push_back(nullptr);
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child == 0) {
    ::dup2(2, 1);  // the importer's own lines go to stderr: stdout is the results'
    ::execvp(command[0], command.data());
    std::fprintf(stderr,
                 "kiln-run: %s is an ONNX model, which kiln-run runs through kiln-import-onnx "
                 "(a build with KILN_BUILD_ONNX); none was found beside kiln-run or on PATH\n",
                 model.c_str());
    ::_exit(127);
  }
  int status = 0;
  if (child < 0 || ::waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    fs::remove(module, ec);
    std::exit(child > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 2 ? 2 : 1);
  }
  return module;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path, device_name = "default", save;
  std::map<std::string, std::string> inputs, outputs;
  std::vector<std::string> at_import;  // the importer's flags, as it takes them
  bool signature = false, trust_kernels = false;
  int benchmark = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* flag) {
      if (a.size() > std::strlen(flag) && a[std::strlen(flag)] == '=')
        return a.substr(std::strlen(flag) + 1);
      if (i + 1 >= argc) usage(std::string(flag) + " needs a value");
      return std::string(argv[++i]);
    };
    auto named = [&](const char* flag, std::map<std::string, std::string>& into) {
      std::string v = value(flag);
      auto eq = v.find('=');
      if (eq == std::string::npos || eq == 0) usage(std::string(flag) + " takes NAME=...");
      into[v.substr(0, eq)] = v.substr(eq + 1);
    };
    if (a.rfind("--device", 0) == 0)
      device_name = value("--device");
    else if (a.rfind("--dump", 0) == 0)
      setenv("KILN_DUMP_DIR", value("--dump").c_str(), 1);
    else if (a.rfind("--input", 0) == 0)
      named("--input", inputs);
    else if (a.rfind("--dim", 0) == 0)
      at_import.insert(at_import.end(), {"--dim", value("--dim")});
    else if (a.rfind("--shape", 0) == 0)
      at_import.insert(at_import.end(), {"--shape", value("--shape")});
    else if (a.rfind("--value", 0) == 0)
      at_import.insert(at_import.end(), {"--value", value("--value")});
    else if (a.rfind("--sequence", 0) == 0)
      at_import.insert(at_import.end(), {"--sequence", value("--sequence")});
    else if (a.rfind("--optional", 0) == 0)
      at_import.insert(at_import.end(), {"--optional", value("--optional")});
    else if (a.rfind("--output", 0) == 0)
      named("--output", outputs);
    else if (a == "--signature")
      signature = true;
    else if (a.rfind("--save", 0) == 0)
      save = value("--save");
    else if (a == "--trust-kernels")
      trust_kernels = true;
    else if (a.rfind("--benchmark", 0) == 0) {
      std::string n = value("--benchmark");
      char* stop = nullptr;
      benchmark = static_cast<int>(std::strtol(n.c_str(), &stop, 10));
      if (*stop != '\0' || benchmark < 1) usage("--benchmark takes a count of calls, got " + n);
    } else if (a == "--list-devices") {
      try {
        list_devices();
      } catch (const kiln::error& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
      }
      return 0;
    } else if (a == "--help" || a == "-h")
      usage("runs a saved kiln module");
    else if (a.rfind("--", 0) == 0)
      usage("unknown option " + a);
    else if (path.empty())
      path = a;
    else
      usage("one module at a time (" + path + ", then " + a + ")");
  }
  if (path.empty()) usage("no module given");
  try {
    if (device_name == "cpu")
      setenv("KILN_DEVICE", "cpu", 1);
    else if (device_name.rfind("vulkan", 0) == 0)
      setenv("KILN_DEVICE", device_name.c_str(), 1);
    else if (device_name != "default")
      usage("--device takes cpu, vulkan or vulkan:N");
    const bool onnx = path.size() > 5 && path.compare(path.size() - 5, 5, ".onnx") == 0;
    if (!onnx && !at_import.empty())
      usage("--dim, --shape and --value bind an ONNX model's dimensions and inputs at import");
    kiln::executable m = [&] {
      if (!onnx) return kiln::module::load(path, trust_kernels);
      const std::filesystem::path module = imported_module(path, at_import);
      struct removed {
        const std::filesystem::path& p;
        ~removed() {
          std::error_code ec;
          std::filesystem::remove(p, ec);
        }
      } cleanup{module};
      return kiln::module::load(module.string(), trust_kernels);
    }();
    if (!save.empty()) {
      m.save(save);
      std::printf("saved %s\n", save.c_str());
      if (inputs.empty() && outputs.empty() && !signature && benchmark == 0 &&
          !m.input_names().empty())
        return 0;
    }
    kiln::signature sig = m.signature();
    if (signature) {
      std::printf("%s\n", kiln::to_string(sig).c_str());
      const kiln::ir::graph& g = m.plan().graph;
      for (std::size_t k = 0; k < m.input_names().size(); ++k)
        std::printf("input %s: %s\n", m.input_names()[k].c_str(),
                    kiln::runtime::declared_text(g.inputs[k]).c_str());
      for (std::size_t k = 0; k < m.output_names().size(); ++k) {
        const kiln::ir::node& n = g.nodes[g.outputs[k]];
        std::printf("output %s: %s%s\n", m.output_names()[k].c_str(),
                    std::string(kiln::name(n.type)).c_str(), kiln::to_string(n.dims).c_str());
      }
      return 0;
    }
    for (const auto& [name, _] : inputs) {
      bool known = false;
      for (const auto& n : m.input_names()) known = known || n == name;
      if (!known) usage("the module has no input named '" + name + "'");
    }
    for (const auto& [name, _] : outputs) {
      bool known = false;
      for (const auto& n : m.output_names()) known = known || n == name;
      if (!known) usage("the module has no output named '" + name + "'");
    }
    std::vector<kiln::runtime::npy_array> args;
    std::vector<kiln::shape> dims;
    for (std::size_t k = 0; k < m.input_names().size(); ++k) {
      const std::string& name = m.input_names()[k];
      auto given = inputs.find(name);
      if (given == inputs.end())
        usage("input '" + name + "' is not given (--input " + name + "=...)");
      const std::string& v = given->second;
      kiln::runtime::npy_array a = v.size() > 4 && v.compare(v.size() - 4, 4, ".npy") == 0
                                       ? kiln::runtime::read_npy(v)
                                       : parse_literal(name, v, sig.inputs[k].type);
      if (a.type != sig.inputs[k].type)
        usage("input '" + name + "' is " + std::string(kiln::name(a.type)) +
              " but the module takes " + std::string(kiln::name(sig.inputs[k].type)));
      dims.push_back(a.dims);
      args.push_back(std::move(a));
    }
    std::vector<kiln::shape> result_dims = m.result_dims(dims);
    std::vector<kiln::runtime::npy_array> results(result_dims.size());
    std::vector<kiln::tensor_ref> arg_refs, result_refs;
    for (auto& a : args)
      arg_refs.emplace_back(static_cast<const void*>(a.bytes.data()), a.type, a.dims);
    for (std::size_t r = 0; r < results.size(); ++r) {
      results[r].type = sig.results[r].type;
      results[r].dims = result_dims[r];
      results[r].bytes.resize(
          std::max<std::size_t>(1, static_cast<std::size_t>(result_dims[r].element_count() *
                                                            kiln::size_in_bytes(results[r].type))));
      result_refs.emplace_back(static_cast<void*>(results[r].bytes.data()), results[r].type,
                               results[r].dims);
    }
    m.run(arg_refs, result_refs);
    if (benchmark > 0) {  // after the first call (kernels built, memory planned)
      std::vector<double> us;
      for (int k = 0; k < benchmark; ++k) {
        auto t0 = std::chrono::steady_clock::now();
        m.run(arg_refs, result_refs);
        us.push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                .count());
      }
      std::sort(us.begin(), us.end());
      std::printf("benchmark: %d calls, min %.1f us, median %.1f us, max %.1f us\n", benchmark,
                  us.front(), us[us.size() / 2], us.back());
    }
    for (std::size_t r = 0; r < results.size(); ++r) {
      const std::string& name = m.output_names()[r];
      results[r].bytes.resize(static_cast<std::size_t>(result_dims[r].element_count() *
                                                       kiln::size_in_bytes(results[r].type)));
      std::printf("%s: %s%s = %s\n", name.c_str(), std::string(kiln::name(results[r].type)).c_str(),
                  kiln::to_string(results[r].dims).c_str(), values_text(results[r]).c_str());
      if (auto file = outputs.find(name); file != outputs.end())
        kiln::runtime::write_npy(file->second, results[r].type, results[r].dims,
                                 results[r].bytes.data());
    }
  } catch (const kiln::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
