// The activations ONNX names (gelu, leaky_relu, elu, selu, celu, hard_sigmoid, hard_swish, mish,
// thresholded_relu, shrink, prelu), written with the elementwise ops so that they fuse; the graph
// API has each as a method of the same name and defaults, the ONNX importer maps its ops to them.
#pragma once

#include <string_view>

#include "kiln/dsl/ops.hpp"

namespace kiln {

// approximate = false: x/2 (1 + erf(x / sqrt 2)); true: x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715
// x^3))), ONNX's Gelu with approximate "none" and "tanh".
template <tensor_value A>
constexpr auto gelu(const A& x, bool approximate = false) {
  if (!approximate) return 0.5 * x * (1.0 + erf(x * 0.70710678118654752440));
  return 0.5 * x * (1.0 + tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
}
template <tensor_value A>
constexpr auto leaky_relu(const A& x, double alpha = 0.01) {
  return select(x < 0.0, alpha * x, x);
}
template <tensor_value A, tensor_value S>
constexpr auto prelu(const A& x, const S& slope) {  // slope broadcasts to x
  return select(x < 0.0, x * slope, x);
}
template <tensor_value A>
constexpr auto elu(const A& x, double alpha = 1.0) {
  return select(x < 0.0, alpha * expm1(x), x);
}
template <tensor_value A>
constexpr auto selu(const A& x, double alpha = 1.67326319217681884765625,
                    double gamma = 1.05070102214813232421875) {
  return gamma * select(x <= 0.0, alpha * expm1(x), x);
}
template <tensor_value A>
constexpr auto celu(const A& x, double alpha = 1.0) {
  return max(x, 0.0) + min(alpha * expm1(x / alpha), 0.0);
}
template <tensor_value A>
constexpr auto hard_sigmoid(const A& x, double alpha = 0.2, double beta = 0.5) {
  return clip(alpha * x + beta, 0.0, 1.0);
}
template <tensor_value A>
constexpr auto hard_swish(const A& x) {
  return x * hard_sigmoid(x, 1.0 / 6.0, 0.5);
}
template <tensor_value A>
constexpr auto mish(const A& x) {
  return x * tanh(softplus(x));
}
template <tensor_value A>
constexpr auto thresholded_relu(const A& x, double alpha = 1.0) {
  return select(x > alpha, x, 0.0);
}
template <tensor_value A>
constexpr auto shrink(const A& x, double bias = 0.0, double lambd = 0.5) {
  return select(x < -lambd, x + bias, select(x > lambd, x - bias, 0.0));
}

}  // namespace kiln
