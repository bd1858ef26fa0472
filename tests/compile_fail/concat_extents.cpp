// expect: kiln::concat: the pieces must have the same extents except along the axis
#include <kiln/kiln.hpp>
using namespace kiln;
constexpr auto f =
    fn<tensor<f32, 3, 4>, tensor<f32, 2, 5>>([](auto a, auto b) { return concat<0>(a, b); });
int main() { return f.plan.dispatch_count(); }
