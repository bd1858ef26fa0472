// expect: kiln::exp: needs floating-point elements
#include <kiln/kiln.hpp>
using namespace kiln;
constexpr auto f = fn<tensor<i32, dyn>>([](auto x) { return exp(x); });
int main() { return f.plan.dispatch_count(); }
