// The runtime's side of the module tests: this translation unit includes <kiln/runtime.hpp> and
// nothing else of kiln, and declares its own kiln::compiler::canonicalize,
// kiln::compiler::form_dispatch_regions, kiln::ir::builder, kiln::graph and kiln::fn. It would
// not compile if the runtime header brought in the compiler's passes, the graph API or the DSL,
// which is the proof that a saved module runs without them.
#include <kiln/runtime.hpp>

#include <string>
#include <vector>

namespace kiln::compiler {
int canonicalize = 0;
int form_dispatch_regions = 0;
}  // namespace kiln::compiler
namespace kiln::ir {
int builder = 0;
}  // namespace kiln::ir
namespace kiln {
int graph = 0;
int fn = 0;
}  // namespace kiln

#include "runner.hpp"

namespace module_runner {

std::vector<float> run_saved(const std::string& path, const std::vector<float>& x,
                             const std::vector<float>& b, std::int64_t rows,
                             const std::string& device_name) {
  kiln::executable m = kiln::module::load(path);
  kiln::device d = device_name == "cpu" ? kiln::device::cpu() : kiln::device::vulkan();
  std::vector<float> y(x.size()), s(static_cast<std::size_t>(rows));
  m.run({{"x", kiln::view(x.data(), {rows, static_cast<std::int64_t>(x.size()) / rows})}, {"b", b}},
        {{"y", kiln::view(y.data(), {rows, static_cast<std::int64_t>(x.size()) / rows})}, {"s", s}},
        d);
  y.insert(y.end(), s.begin(), s.end());
  return y;
}

std::string signature_of(const std::string& path) {
  return kiln::to_string(kiln::module::load(path).signature());
}

}  // namespace module_runner
