// ONNX's random ops (RandomUniform, RandomNormal and their Like forms, Bernoulli) and Dropout in
// training mode, through graph's counter-based generator (graph/random.hpp). Internal to
// kiln::onnx.
#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "node_context.hpp"

namespace kiln::onnx_import {

namespace {

using value = graph::value;

// The generator's key: the seed attribute (a float's f64 bits, an int's value), or, where the model
// gives none (ONNX: "auto generated"), an FNV-1a hash of how errors name the node (its index, name
// and op), so that two unseeded nodes draw different numbers. Either way a node draws the same
// numbers at every call (README).
std::uint64_t seed_of(const node_context& c) {
  if (const auto* seed = c.attr("seed"))  // a float, but Dropout's is an int
    return seed->type() == ::onnx::AttributeProto::INT
               ? static_cast<std::uint64_t>(seed->i())
               : std::bit_cast<std::uint64_t>(c.attr_float("seed", 0));
  std::uint64_t h = 0xcbf29ce484222325u;
  for (char ch : c.who()) h = (h ^ static_cast<unsigned char>(ch)) * 0x100000001b3u;
  return h;
}

// The dtype attribute, or `otherwise` where the node has none (graph's draws refuse non-floats).
dtype draw_type(const node_context& c, dtype otherwise) {
  return c.has_attr("dtype") ? c.element_type(c.attr_int("dtype", 1)) : otherwise;
}

std::vector<std::int64_t> static_dims(const node_context& c, const shape& d) {
  if (!d.is_static())
    c.fail(errc::unsupported, "the input's extents " + to_string(d) +
                                  " are not static (each position is the generator's counter)");
  return {d.dims.begin(), d.dims.begin() + d.rank};
}

// RandomUniform (low, high) and RandomNormal (mean, scale); `like`: their Like forms, of the
// input's extents and, without a dtype attribute, its element type.
void lower_random(node_context& c, bool like, bool normal) {
  const std::string_view first = normal ? "mean" : "low", second = normal ? "scale" : "high";
  c.only_attrs({"dtype", first, second, "seed", "shape"});
  const std::vector<std::int64_t> dims = like ? static_dims(c, c.dims_of(0)) : c.attr_ints("shape");
  const dtype t = draw_type(c, like ? c.type_of(0) : dtype::f32);
  const double a = c.attr_float(first, 0), b = c.attr_float(second, 1);
  c.out(0, normal ? c.g.random_normal(dims, a, b, seed_of(c), t)
                  : c.g.random_uniform(dims, a, b, seed_of(c), t));
}

void lower_bernoulli(node_context& c) {
  c.only_attrs({"dtype", "seed"});
  c.out(0, c.g.bernoulli(c.in(0), seed_of(c), draw_type(c, c.type_of(0))));
}

}  // namespace

// Dropout in training mode with ratio r in (0, 1): each element kept where a uniform draw is at
// least r, and scaled by 1 / (1 - r); the mask (bool) says which were kept.
void lower_training_dropout(node_context& c, double ratio) {
  if (!(ratio > 0 && ratio < 1))
    c.fail(errc::invalid_argument, "ratio " + std::to_string(ratio) + " is not in [0, 1)");
  const value x = c.in(0);
  const dtype t = c.type_of(0);
  const dtype u_type = t == dtype::f64 ? dtype::f64 : dtype::f32;
  const value u = c.g.random_uniform(static_dims(c, c.dims_of(0)), 0, 1, seed_of(c), u_type);
  const value keep = c.g.ge(u, c.g.constant(ratio, u_type));
  const value kept = c.g.mul(c.g.mul(x, c.g.cast(keep, t)), c.g.constant(1 / (1 - ratio), t));
  c.out(0, kept);
  if (c.wants(1)) c.out(1, keep);
}

void add_random_lowerings(lowering_table& t) {
  t["RandomUniform"] = [](node_context& c) { lower_random(c, false, false); };
  t["RandomUniformLike"] = [](node_context& c) { lower_random(c, true, false); };
  t["RandomNormal"] = [](node_context& c) { lower_random(c, false, true); };
  t["RandomNormalLike"] = [](node_context& c) { lower_random(c, true, true); };
  t["Bernoulli"] = lower_bernoulli;
}

}  // namespace kiln::onnx_import
