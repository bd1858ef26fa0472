// expect: kiln::avg_pool2d: the input must be
#include <kiln/kiln.hpp>
using namespace kiln;
constexpr auto f = fn<tensor<i32, 1, 2, 4, 4>>([](auto x) {
  return avg_pool2d<pool_params{.kernel = {2, 2}, .strides = {2, 2}}>(x);
});
int main() { return f.plan.dispatch_count(); }
