// kiln-import-onnx: an ONNX model compiled into a kiln module, as iree-import-onnx and
// iree-compile do together: the module then runs with kiln-run, or executable::load, on any
// device, without ONNX's library.
//
//   kiln-import-onnx MODEL.onnx -o MODULE [--dim NAME=SIZE]... [--variable NAME]... [--no-check]
//
// --variable makes the initializer NAME a variable of the module (executable::variable), saved
// with its initializer's value.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <kiln/onnx.hpp>

namespace {

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "kiln-import-onnx: %s\n"
               "usage: kiln-import-onnx MODEL.onnx -o MODULE [--dim NAME=SIZE]... "
               "[--variable NAME]... [--no-check]\n",
               why.c_str());
  std::exit(2);
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
      std::string v = value("--dim");
      auto eq = v.find('=');
      char* stop = nullptr;
      long long size = eq == std::string::npos ? -1 : std::strtoll(v.c_str() + eq + 1, &stop, 10);
      if (eq == std::string::npos || eq == 0 || size < 0 || *stop != '\0')
        usage("--dim takes NAME=SIZE (a size >= 0), got " + v);
      opt.dims[v.substr(0, eq)] = size;
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
    kiln::executable exe = kiln::compile(std::move(m.graph));
    kiln::onnx::load_variables(exe, m);
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
