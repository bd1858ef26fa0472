// expect: kiln::conv2d: x must be
#include <kiln/kiln.hpp>
using namespace kiln;
// x has 3 channels, the kernel takes 4.
constexpr auto f = fn<tensor<f32, 1, 3, 8, 8>, tensor<f32, 5, 4, 3, 3>>([](auto x, auto w) {
  return conv2d<conv_params{.pads = {1, 1, 1, 1}}>(x, w);
});
int main() { return f.plan.dispatch_count(); }
