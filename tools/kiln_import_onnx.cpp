// kiln-import-onnx: an ONNX model compiled into a kiln module, as iree-import-onnx and
// iree-compile do together: the module then runs with kiln-run, or executable::load, on any
// device, without ONNX's library.
//
//   kiln-import-onnx MODEL.onnx -o MODULE [--dim NAME=SIZE]... [--shape INPUT=AxBxC]...
//                    [--value NAME=VALUE|FILE.npy]... [--variable NAME]... [--no-check]
//                    [--sequence INPUT=COUNT]... [--optional INPUT=present|absent]...
//
// --shape gives an input's extents (import_options::input_dims: for dimensions without a name to
// bind). --value gives the graph input NAME its value at import (import_options::input_values): it
// is then a constant of the module, so that what depends on it alone (a sample rate choosing a
// branch, a shape) is computed then. VALUE is a scalar: i64 when written as an integer, else f32;
// a .npy file gives any type and extents. --variable makes the initializer NAME a variable of the
// module (executable::variable), saved with its initializer's value. --sequence says how many
// tensors a sequence input holds (parameters INPUT.0, INPUT.1, ...; --shape INPUT.1=... gives one
// its extents), --optional whether an optional input holds its value
// (import_options::sequence_lengths, optionals_present).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include <kiln/onnx.hpp>
#include <kiln/runtime/npy.hpp>

namespace {

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(
      stderr,
      "kiln-import-onnx: %s\n"
      "usage: kiln-import-onnx MODEL.onnx -o MODULE [--dim NAME=SIZE]... "
      "[--shape INPUT=AxBxC]... [--value NAME=VALUE|FILE.npy]... [--variable NAME]...\n"
      "       [--no-check] [--sequence INPUT=COUNT]... [--optional INPUT=present|absent]...\n",
      why.c_str());
  std::exit(2);
}

// A --value's tensor: a .npy file's, or a scalar (i64 when the text is an integer, else f32).
kiln::onnx::tensor_data value_of(const std::string& text) {
  if (text.size() > 4 && text.compare(text.size() - 4, 4, ".npy") == 0) {
    kiln::runtime::npy_array a = kiln::runtime::read_npy(text);
    return {a.type, a.dims, std::move(a.bytes)};
  }
  char* stop = nullptr;
  const long long i = std::strtoll(text.c_str(), &stop, 10);
  if (!text.empty() && *stop == '\0') {
    std::vector<unsigned char> bytes(8);
    std::memcpy(bytes.data(), &i, 8);
    return {kiln::dtype::i64, kiln::shape{}, std::move(bytes)};
  }
  const float f = std::strtof(text.c_str(), &stop);
  if (text.empty() || *stop != '\0')
    usage("--value takes NAME=NUMBER or NAME=FILE.npy, got '" + text + "'");
  std::vector<unsigned char> bytes(4);
  std::memcpy(bytes.data(), &f, 4);
  return {kiln::dtype::f32, kiln::shape{}, std::move(bytes)};
}

// A NAME=COUNT flag's name and count (a count >= 0), or the usage message naming `form`.
std::pair<std::string, long long> name_and_count(const std::string& flag, const std::string& form,
                                                 const std::string& v) {
  auto eq = v.find('=');
  char* stop = nullptr;
  long long count = eq == std::string::npos ? -1 : std::strtoll(v.c_str() + eq + 1, &stop, 10);
  if (eq == std::string::npos || eq == 0 || count < 0 || *stop != '\0')
    usage(flag + " takes " + form + ", got " + v);
  return {v.substr(0, eq), count};
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, out;
  kiln::onnx::import_options opt;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* flag) {
      if (i + 1 >= argc) usage(std::string(flag) + " needs a value");
      return std::string(argv[++i]);
    };
    if (a == "-o") {
      out = value("-o");
    } else if (a == "--dim") {
      auto [name, size] = name_and_count(a, "NAME=SIZE (a size >= 0)", value("--dim"));
      opt.dims[name] = size;
    } else if (a == "--shape") {
      std::string v = value("--shape");
      auto eq = v.find('=');
      kiln::shape s;
      bool ok = eq != std::string::npos && eq > 0;
      for (std::size_t at = eq + 1; ok && at <= v.size();) {
        char* stop = nullptr;
        const long long d = std::strtoll(v.c_str() + at, &stop, 10);
        ok = stop != v.c_str() + at && d >= 0 && s.rank < kiln::max_rank &&
             (*stop == 'x' || *stop == '\0');
        if (ok) s.dims[s.rank++] = d;
        at = static_cast<std::size_t>(stop - v.c_str()) + 1;
        if (*stop == '\0') break;
      }
      if (!ok) usage("--shape takes INPUT=AxBxC (sizes >= 0), got " + v);
      opt.input_dims[v.substr(0, eq)] = s;
    } else if (a == "--value") {
      std::string v = value("--value");
      auto eq = v.find('=');
      if (eq == std::string::npos || eq == 0) usage("--value takes NAME=VALUE, got " + v);
      try {
        opt.input_values[v.substr(0, eq)] = value_of(v.substr(eq + 1));
      } catch (const kiln::error& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
      }
    } else if (a == "--sequence") {
      auto [name, count] = name_and_count(a, "INPUT=COUNT (a count >= 0)", value("--sequence"));
      opt.sequence_lengths[name] = count;
    } else if (a == "--optional") {
      std::string v = value("--optional");
      auto eq = v.find('=');
      const std::string held = eq == std::string::npos ? "" : v.substr(eq + 1);
      if (eq == 0 || (held != "present" && held != "absent"))
        usage("--optional takes INPUT=present or INPUT=absent, got " + v);
      opt.optionals_present[v.substr(0, eq)] = held == "present";
    } else if (a == "--variable") {
      opt.variables.insert(value("--variable"));
    } else if (a == "--no-check") {
      opt.check = false;
    } else if (a == "--help" || a == "-h") {
      usage("compiles an ONNX model into a kiln module");
    } else if (a.rfind("-", 0) == 0) {
      usage("unknown option " + a);
    } else if (model.empty()) {
      model = a;
    } else {
      usage("one model at a time (" + model + ", then " + a + ")");
    }
  }
  if (model.empty() || out.empty()) usage("a model and -o MODULE are needed");
  try {
    kiln::onnx::imported m = kiln::onnx::import(model, opt);
    const auto info = m.info;
    kiln::executable exe = kiln::onnx::compile(std::move(m));
    exe.save(out);
    std::printf("%s: opset %lld, %lld nodes (%lld computed at import), %d dispatches",
                model.c_str(), static_cast<long long>(info.opset),
                static_cast<long long>(info.nodes), static_cast<long long>(info.folded_nodes),
                exe.dispatch_count());
    for (const auto& d : info.symbolic_dims) std::printf(", '%s' at the call", d.c_str());
    std::printf(" -> %s\n", out.c_str());
  } catch (const kiln::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
