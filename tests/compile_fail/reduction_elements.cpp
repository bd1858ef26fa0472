// expect: kiln::reduce_mean: needs floating-point elements
#include <kiln/kiln.hpp>
using namespace kiln;
constexpr auto f = fn<tensor<std::int32_t, 3, 4>>([](auto x) { return reduce_mean<0>(x); });
int main() { return f.plan.dispatch_count(); }
