// ONNX's elementwise ops as kiln graph ops: one row per op, attributes read per the op's spec.
#include <cmath>
#include <limits>

#include "node_context.hpp"

namespace kiln::onnx_import {

namespace {

using value = graph::value;

void unary(node_context& c, value (graph::*method)(value)) {
  c.only_attrs({});
  c.out(0, (c.g.*method)(c.in(0)));
}

// Before opset 7 a binary op broadcast only with broadcast = 1, B's axes matching A's from
// `axis` on (else from the right, as numpy): B gets trailing 1s to line up.
value legacy_broadcast(node_context& c) {
  value b = c.in(1);
  if (c.attr_int("broadcast", 0) == 0 || !c.has_attr("axis")) return b;
  const int ra = c.dims_of(0).rank;
  const shape bd = c.dims_of(1);
  std::int64_t axis = c.attr_int("axis", 0);
  if (axis < 0) axis += ra;
  if (axis < 0 || axis + bd.rank > ra)
    c.fail(errc::shape_mismatch, "axis " + std::to_string(axis) + " for B of dims " +
                                     to_string(bd) + " and A of rank " + std::to_string(ra));
  std::vector<std::int64_t> dims(bd.dims.begin(), bd.dims.begin() + bd.rank);
  dims.resize(static_cast<std::size_t>(ra - axis), 1);
  for (auto& d : dims) d = d == dyn ? 0 : d;
  return c.g.reshape(b, dims);
}

void binary(node_context& c, value (graph::*method)(value, value)) {
  if (c.opset() < 7) {
    c.only_attrs({"broadcast", "axis"});
    return c.out(0, (c.g.*method)(c.in(0), legacy_broadcast(c)));
  }
  c.only_attrs({});
  c.out(0, (c.g.*method)(c.in(0), c.in(1)));
}

// Sum, Max, Min: the inputs folded left to right (multidirectional broadcast at each step).
void variadic(node_context& c, value (graph::*method)(value, value)) {
  c.only_attrs({});
  std::vector<value> v = c.present_inputs();
  if (v.empty()) c.fail(errc::invalid_argument, "needs at least one input");
  value r = v[0];
  for (std::size_t i = 1; i < v.size(); ++i) r = (c.g.*method)(r, v[i]);
  c.out(0, r);
}

void identity(node_context& c) {
  if (c.known(0) || c.input_slot(0).sequence || c.input_slot(0).present || c.input_slot(0).list)
    c.out_slot(0, c.input_slot(0));  // shared, not copied (exporters alias weights this way)
  else
    c.out(0, c.in(0));
}

void cast_to(node_context& c, dtype to) {
  if (c.known(0) && c.type_of(0) == to) return identity(c);
  c.out(0, c.g.cast(c.in(0), to));
}

void lower_cast(node_context& c) {
  c.only_attrs({"to"});
  const auto* to = c.attr("to");
  if (!to) c.fail(errc::invalid_argument, "attribute 'to' is required");
  if (to->type() == ::onnx::AttributeProto::STRING) {  // before opset 6: the type's name
    ::onnx::TensorProto::DataType t{};
    if (!::onnx::TensorProto::DataType_Parse(to->s(), &t))
      c.fail(errc::invalid_argument, "attribute 'to' is '" + to->s() + "', not a type's name");
    return cast_to(c, c.element_type(t));
  }
  cast_to(c, c.element_type(c.attr_int("to", 0)));
}

void lower_cast_like(node_context& c) {
  c.only_attrs({});
  cast_to(c, c.type_of(1));
}

void lower_pow(node_context& c) {
  c.only_attrs({});
  value base = c.in(0), exponent = c.in(1);
  const dtype t = c.type_of(0);
  if (is_floating(t)) {
    if (c.type_of(1) != t) exponent = c.g.cast(exponent, t);
    return c.out(0, c.g.pow(base, exponent));
  }
  // Integer powers: computed in f64 (exact for every result an integer type holds to 2^53),
  // rounded before the cast back so that 7.9999… is 8.
  value p = c.g.pow(c.g.cast(base, dtype::f64), c.g.cast(exponent, dtype::f64));
  c.out(0, c.g.cast(c.g.round(p), t));
}

void lower_mod(node_context& c) {
  c.only_attrs({"fmod"});
  const bool fmod = c.attr_int("fmod", 0) != 0;
  if (!fmod && is_floating(c.type_of(0)))
    c.fail(errc::invalid_argument, "fmod = 0 on floating inputs (ONNX requires fmod = 1)");
  c.out(0, fmod ? c.g.fmod(c.in(0), c.in(1)) : c.g.mod(c.in(0), c.in(1)));
}

void lower_bit_shift(node_context& c) {
  c.only_attrs({"direction"});
  std::string d = c.attr_string("direction", "");
  if (d != "LEFT" && d != "RIGHT")
    c.fail(errc::invalid_argument, "direction is '" + d + "', expected LEFT or RIGHT");
  c.out(0, d == "LEFT" ? c.g.shift_left(c.in(0), c.in(1)) : c.g.shift_right(c.in(0), c.in(1)));
}

void lower_mean(node_context& c) {
  variadic(c, &graph::add);
  value sum = *c.produced()[0].value;
  c.out(0,
        c.g.div(sum, c.g.constant(static_cast<double>(c.present_inputs().size()), c.type_of(0))));
}

void lower_clip(node_context& c) {
  const dtype t = c.type_of(0);
  std::optional<value> lo, hi;
  if (c.opset() < 11) {
    c.only_attrs({"min", "max"});
    if (c.has_attr("min")) lo = c.g.constant(c.attr_float("min", 0), t);
    if (c.has_attr("max")) hi = c.g.constant(c.attr_float("max", 0), t);
  } else {
    c.only_attrs({});
    if (c.has(1)) lo = c.in(1);
    if (c.has(2)) hi = c.in(2);
  }
  value x = c.in(0);
  if (lo && hi) return c.out(0, c.g.clip(x, *lo, *hi));
  if (lo) x = c.g.max(x, *lo);
  if (hi) x = c.g.min(x, *hi);
  c.out(0, x);
}

void lower_is_inf(node_context& c) {
  c.only_attrs({"detect_negative", "detect_positive"});
  const bool negative = c.attr_int("detect_negative", 1) != 0;
  const bool positive = c.attr_int("detect_positive", 1) != 0;
  value x = c.in(0);
  value inf = c.g.isinf(x);
  value zero = c.g.constant(0.0, c.type_of(0));
  if (negative && positive) return c.out(0, inf);
  if (!negative && !positive) return c.out(0, c.g.logical_and(inf, c.g.ne(x, x)));  // all false
  c.out(0, c.g.logical_and(inf, negative ? c.g.lt(x, zero) : c.g.gt(x, zero)));
}

void lower_where(node_context& c) {
  c.only_attrs({});
  c.out(0, c.g.select(c.in(0), c.in(1), c.in(2)));
}

void lower_dropout(node_context& c) {
  // Inference: the identity. Training mode (opset 12's input, or is_test = 0 before opset 7)
  // with a nonzero ratio draws the mask (lower_random.cpp).
  c.only_attrs({"ratio", "seed", "is_test"});
  bool training = c.opset() < 7 && c.attr_int("is_test", 0) == 0;
  if (c.opset() >= 12 && c.has(2)) training = c.scalar_input(2, "training_mode") != 0;
  if (training) {  // the ratio is needed at import then only
    const double ratio =
        c.opset() >= 12 ? c.has(1) ? c.scalar_input(1, "ratio") : 0.5 : c.attr_float("ratio", 0.5);
    if (ratio != 0) return lower_training_dropout(c, ratio);
  }
  identity(c);
  if (c.wants(1)) {
    value x = c.in(0);
    value ones = c.g.constant(1, dtype::boolean);
    c.out(1, c.g.select(c.g.eq(x, x), ones, ones));  // the mask: all true, x's extents
  }
}

// ONNX's per-axis (or per-tensor) scale and zero point, shaped to broadcast along `axis` of x.
value along_axis(node_context& c, value v, int rank, std::int64_t axis) {
  shape d = c.g.dims_of(v);
  if (d.rank != 1 || rank == 0) return v;
  if (axis < 0) axis += rank;
  std::vector<std::int64_t> dims(static_cast<std::size_t>(rank), 1);
  dims[static_cast<std::size_t>(axis)] = d.dims[0];
  return c.g.reshape(v, dims);
}

void lower_dequantize(node_context& c) {
  c.only_attrs({"axis"});
  const int rank = c.dims_of(0).rank;
  const std::int64_t axis = c.attr_int("axis", 1);
  value x = c.g.cast(c.in(0), dtype::f32);
  if (c.has(2)) x = c.g.sub(x, along_axis(c, c.g.cast(c.in(2), dtype::f32), rank, axis));
  c.out(0, c.g.mul(x, along_axis(c, c.in(1), rank, axis)));
}

void lower_quantize(node_context& c) {
  c.only_attrs({"axis"});
  const int rank = c.dims_of(0).rank;
  const std::int64_t axis = c.attr_int("axis", 1);
  const dtype to = c.has(2) ? c.type_of(2) : dtype::u8;
  if (to != dtype::u8 && to != dtype::i8)
    c.fail(errc::unsupported, "y_zero_point is " + std::string(name(to)) + ", expected u8 or i8");
  value x = c.in(0);
  const dtype t = c.type_of(0);
  value y = c.g.round(c.g.div(x, along_axis(c, c.in(1), rank, axis)));  // half to even
  if (c.has(2)) y = c.g.add(y, along_axis(c, c.g.cast(c.in(2), t), rank, axis));
  const double lo = to == dtype::u8 ? 0 : -128, hi = to == dtype::u8 ? 255 : 127;
  c.out(0, c.g.cast(c.g.clip(y, c.g.constant(lo, t), c.g.constant(hi, t)), to));
}

void lower_prelu(node_context& c) {
  c.only_attrs({});
  value x = c.in(0), slope = c.in(1);
  // Before opset 7 a slope of C values applied along axis 1 (ONNX's converter keeps its shape):
  // where it does not broadcast from the right, it is shaped [C, 1, ...].
  const shape xd = c.dims_of(0), sd = c.dims_of(1);
  if (sd.rank == 1 && xd.rank >= 3 && sd.dims[0] != 1 && sd.dims[0] == xd.dims[1] &&
      sd.dims[0] != xd.dims[xd.rank - 1]) {
    std::vector<std::int64_t> dims(static_cast<std::size_t>(xd.rank - 1), 1);
    dims[0] = sd.dims[0];
    slope = c.g.reshape(slope, dims);
  }
  c.out(0, c.g.prelu(x, slope));
}

void lower_gelu(node_context& c) {
  c.only_attrs({"approximate"});
  c.out(0, c.g.gelu(c.in(0), c.attr_string("approximate", "none")));
}

}  // namespace

void add_elementwise_lowerings(lowering_table& t) {
#define KILN_UNARY(ONNX, METHOD) t[ONNX] = [](node_context& c) { unary(c, &graph::METHOD); };
  KILN_UNARY("Abs", abs)
  KILN_UNARY("Neg", neg)
  KILN_UNARY("Exp", exp)
  KILN_UNARY("Log", log)
  KILN_UNARY("Sqrt", sqrt)
  KILN_UNARY("Tanh", tanh)
  KILN_UNARY("Sigmoid", sigmoid)
  KILN_UNARY("Relu", relu)
  KILN_UNARY("Erf", erf)
  KILN_UNARY("Sin", sin)
  KILN_UNARY("Cos", cos)
  KILN_UNARY("Tan", tan)
  KILN_UNARY("Asin", asin)
  KILN_UNARY("Acos", acos)
  KILN_UNARY("Atan", atan)
  KILN_UNARY("Sinh", sinh)
  KILN_UNARY("Cosh", cosh)
  KILN_UNARY("Asinh", asinh)
  KILN_UNARY("Acosh", acosh)
  KILN_UNARY("Atanh", atanh)
  KILN_UNARY("Floor", floor)
  KILN_UNARY("Ceil", ceil)
  KILN_UNARY("Round", round)
  KILN_UNARY("Reciprocal", reciprocal)
  KILN_UNARY("Sign", sign)
  KILN_UNARY("Softsign", softsign)
  KILN_UNARY("Softplus", softplus)
  KILN_UNARY("Not", logical_not)
  KILN_UNARY("BitwiseNot", bitwise_not)
  KILN_UNARY("IsNaN", isnan)
  KILN_UNARY("HardSwish", hard_swish)
  KILN_UNARY("Mish", mish)
#undef KILN_UNARY
#define KILN_BINARY(ONNX, METHOD) t[ONNX] = [](node_context& c) { binary(c, &graph::METHOD); };
  KILN_BINARY("Add", add)
  KILN_BINARY("Sub", sub)
  KILN_BINARY("Mul", mul)
  KILN_BINARY("Div", div)
  KILN_BINARY("Equal", eq)
  KILN_BINARY("Less", lt)
  KILN_BINARY("LessOrEqual", le)
  KILN_BINARY("Greater", gt)
  KILN_BINARY("GreaterOrEqual", ge)
  KILN_BINARY("And", logical_and)
  KILN_BINARY("Or", logical_or)
  KILN_BINARY("Xor", ne)
  KILN_BINARY("BitwiseAnd", bitwise_and)
  KILN_BINARY("BitwiseOr", bitwise_or)
  KILN_BINARY("BitwiseXor", bitwise_xor)
#undef KILN_BINARY
  t["PRelu"] = lower_prelu;
  t["Sum"] = [](node_context& c) { variadic(c, &graph::add); };
  t["Max"] = [](node_context& c) { variadic(c, &graph::max); };
  t["Min"] = [](node_context& c) { variadic(c, &graph::min); };
  t["Mean"] = lower_mean;
  t["Pow"] = lower_pow;
  t["Mod"] = lower_mod;
  t["BitShift"] = lower_bit_shift;
  t["Clip"] = lower_clip;
  t["IsInf"] = lower_is_inf;
  t["Where"] = lower_where;
  t["Identity"] = identity;
  t["Dropout"] = lower_dropout;
  t["Cast"] = lower_cast;
  t["CastLike"] = lower_cast_like;
  t["DequantizeLinear"] = lower_dequantize;
  t["QuantizeLinear"] = lower_quantize;
  t["Gelu"] = lower_gelu;
  t["LeakyRelu"] = [](node_context& c) {
    c.only_attrs({"alpha"});
    c.out(0, c.g.leaky_relu(c.in(0), c.attr_float("alpha", 0.01)));
  };
  t["Elu"] = [](node_context& c) {
    c.only_attrs({"alpha"});
    c.out(0, c.g.elu(c.in(0), c.attr_float("alpha", 1.0)));
  };
  t["Selu"] = [](node_context& c) {
    c.only_attrs({"alpha", "gamma"});
    c.out(0, c.g.selu(c.in(0), c.attr_float("alpha", 1.67326319217681884765625),
                      c.attr_float("gamma", 1.05070102214813232421875)));
  };
  t["Celu"] = [](node_context& c) {
    c.only_attrs({"alpha"});
    c.out(0, c.g.celu(c.in(0), c.attr_float("alpha", 1.0)));
  };
  t["HardSigmoid"] = [](node_context& c) {
    c.only_attrs({"alpha", "beta"});
    c.out(0, c.g.hard_sigmoid(c.in(0), c.attr_float("alpha", 0.2), c.attr_float("beta", 0.5)));
  };
  t["ThresholdedRelu"] = [](node_context& c) {
    c.only_attrs({"alpha"});
    c.out(0, c.g.thresholded_relu(c.in(0), c.attr_float("alpha", 1.0)));
  };
  t["Shrink"] = [](node_context& c) {
    c.only_attrs({"bias", "lambd"});
    c.out(0, c.g.shrink(c.in(0), c.attr_float("bias", 0.0), c.attr_float("lambd", 0.5)));
  };
}

}  // namespace kiln::onnx_import
