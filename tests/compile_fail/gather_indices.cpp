// expect: kiln::gather: the indices must be std::int32_t or std::int64_t
#include <kiln/kiln.hpp>
using namespace kiln;
constexpr auto f =
    fn<tensor<f32, 3, 4>, tensor<f32, 2>>([](auto x, auto i) { return gather<0>(x, i); });
int main() { return f.plan.dispatch_count(); }
