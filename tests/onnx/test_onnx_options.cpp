// kiln::onnx's options and refusals on models built here with ONNX's protobuf classes: named
// dimensions bound or left to the call, inputs given at import, external data (and paths that
// leave the model's folder), the checker's verdict, opsets, errors naming the node, the model's
// declared outputs checked against kiln's. Results are checked against values worked out here.
#include <gtest/gtest.h>

#include <onnx/onnx_pb.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <variant>

#include <kiln/onnx.hpp>
#include <kiln/runtime/npy.hpp>

#include "../support/threefry.hpp"
#include "model_builder.hpp"

namespace {

namespace fs = std::filesystem;
using kiln_test::dim;
using kiln_test::int_attr;
using kiln_test::model_builder;
using kiln_test::subgraph;

std::string refusal(const std::vector<std::uint8_t>& model, const kiln::onnx::import_options& opt,
                    kiln::errc want) {
  try {
    kiln::onnx::import_bytes(model, opt);
  } catch (const kiln::error& e) {
    EXPECT_EQ(e.code(), want) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "imported without an error";
  return "";
}

// y = Reshape(x, Concat(Shape(x)[1:], Shape(x)[:1])): [batch, 4] -> [4, batch], the shape
// arithmetic exporters write.
model_builder transposing_reshape() {
  model_builder b;
  b.input("x", {std::string("batch"), std::int64_t{4}});
  b.ints("one", {1});
  b.ints("zero", {0});
  b.ints("end", {2});
  b.node("Shape", {"x"}, {"s"});
  b.node("Slice", {"s", "one", "end"}, {"tail"});
  b.node("Slice", {"s", "zero", "one"}, {"head"});
  b.node("Concat", {"tail", "head"}, {"shape"})->add_attribute()->CopyFrom([] {
    ::onnx::AttributeProto a;
    a.set_name("axis");
    a.set_type(::onnx::AttributeProto::INT);
    a.set_i(0);
    return a;
  }());
  b.node("Reshape", {"x", "shape"}, {"y"}, "the_reshape");
  b.output("y", {std::int64_t{4}, std::string("batch")});
  return b;
}

TEST(OnnxOptions, NamedDimensionBoundAtImportFoldsTheShapeArithmetic) {
  auto model = transposing_reshape().bytes();
  kiln::onnx::import_options opt;
  opt.dims["batch"] = 3;
  auto m = kiln::onnx::import_bytes(model, opt);
  EXPECT_EQ(m.info.folded_nodes, 4);  // Shape, both Slices and Concat
  EXPECT_TRUE(m.info.symbolic_dims.empty());
  auto exe = kiln::compile(std::move(m.graph));
  std::vector<float> x(12), y(12, -1);
  for (int i = 0; i < 12; ++i) x[static_cast<std::size_t>(i)] = static_cast<float>(i);
  exe.run({kiln::tensor_ref(x.data(), kiln::dtype::f32, {3, 4})},
          {kiln::tensor_ref(y.data(), kiln::dtype::f32, {4, 3})});
  EXPECT_EQ(y, x);  // a reshape keeps the row-major order
  // Left to the call, the shape arithmetic is carried as run-time sizes: one import, any batch.
  auto any = kiln::compile(kiln::onnx::import_bytes(model).graph);
  for (std::int64_t n : {1, 3, 7}) {
    std::vector<float> xs(static_cast<std::size_t>(4 * n)), ys(xs.size(), -1);
    for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i) * 0.5f;
    any.run({kiln::tensor_ref(xs.data(), kiln::dtype::f32, {n, 4})},
            {kiln::tensor_ref(ys.data(), kiln::dtype::f32, {4, n})});
    EXPECT_EQ(ys, xs) << "batch " << n;
  }
}

// An attention block as exporters write it, batch and sequence left to the call: heads split and
// merged by Reshapes whose shapes come from Shape -> Gather -> Unsqueeze -> Concat, the tokens
// flattened for a MatMul by a shape that multiplies the two sizes (Mul) and unflattened by one
// that divides them again (Div). Imported once, run at several sizes against a double loop.
TEST(OnnxOptions, ShapesOfRunTimeSizesImportOnceAndRunAtAnySize) {
  model_builder b;
  b.input("x", {std::string("batch"), std::string("seq"), std::int64_t{8}});
  auto ints_attr = [](::onnx::NodeProto* n, const char* name, std::vector<std::int64_t> v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INTS);
    for (auto x : v) a->add_ints(x);
  };
  std::vector<float> w(24);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(std::sin(0.7 * double(i)));
  b.floats("w", w, {8, 3});
  b.ints("axis0", {0});
  b.ints("heads", {2, 4});
  b.ints("width", {8});
  b.ints("three", {3});
  b.scalar_int("i0", 0);  // scalar indices
  b.scalar_int("i1", 1);
  b.node("Shape", {"x"}, {"s"});
  b.node("Gather", {"s", "i0"}, {"bsz"});
  b.node("Gather", {"s", "i1"}, {"seqlen"});
  b.node("Unsqueeze", {"bsz", "axis0"}, {"b1"});
  b.node("Unsqueeze", {"seqlen", "axis0"}, {"s1"});
  int_attr(b.node("Concat", {"b1", "s1", "heads"}, {"split_shape"}), "axis", 0);
  b.node("Reshape", {"x", "split_shape"}, {"split"});
  ints_attr(b.node("Transpose", {"split"}, {"h"}), "perm", {0, 2, 1, 3});
  ints_attr(b.node("Transpose", {"h"}, {"ht"}), "perm", {0, 1, 3, 2});
  b.node("MatMul", {"h", "ht"}, {"scores"});
  int_attr(b.node("Softmax", {"scores"}, {"p"}), "axis", -1);
  b.node("MatMul", {"p", "h"}, {"ctx"});
  ints_attr(b.node("Transpose", {"ctx"}, {"ctx_t"}), "perm", {0, 2, 1, 3});
  int_attr(b.node("Concat", {"b1", "s1", "width"}, {"merge_shape"}), "axis", 0);
  b.node("Reshape", {"ctx_t", "merge_shape"}, {"merged"});
  b.node("Mul", {"bsz", "seqlen"}, {"tokens"});
  b.node("Unsqueeze", {"tokens", "axis0"}, {"t1"});
  int_attr(b.node("Concat", {"t1", "width"}, {"flat_shape"}), "axis", 0);
  b.node("Reshape", {"merged", "flat_shape"}, {"flat"});
  b.node("MatMul", {"flat", "w"}, {"dense"});
  b.node("Div", {"tokens", "seqlen"}, {"bsz_again"});
  b.node("Unsqueeze", {"bsz_again", "axis0"}, {"b2"});
  int_attr(b.node("Concat", {"b2", "s1", "three"}, {"out_shape"}), "axis", 0);
  b.node("Reshape", {"dense", "out_shape"}, {"y"});
  b.output("y", {std::string("batch"), std::string("seq"), std::int64_t{3}});
  auto m = kiln::onnx::import_bytes(b.bytes());
  EXPECT_EQ(m.info.symbolic_dims, (std::vector<std::string>{"batch", "seq"}));
  auto exe = kiln::compile(std::move(m.graph));
  for (auto [n, t] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {2, 5}, {3, 12}}) {
    SCOPED_TRACE("batch " + std::to_string(n) + ", seq " + std::to_string(t));
    std::vector<float> x(static_cast<std::size_t>(n * t * 8)),
        y(static_cast<std::size_t>(n * t * 3));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::cos(0.3 * double(i)));
    exe.run({kiln::tensor_ref(x.data(), kiln::dtype::f32, {n, t, 8})},
            {kiln::tensor_ref(y.data(), kiln::dtype::f32, {n, t, 3})});
    // Per batch and head: softmax(h h^T) h, heads side by side again, times w.
    for (std::int64_t bi = 0; bi < n; ++bi)
      for (std::int64_t q = 0; q < t; ++q) {
        double merged[8];
        for (int head = 0; head < 2; ++head) {
          auto at = [&](std::int64_t token, int k) {
            return double(x[static_cast<std::size_t>((bi * t + token) * 8 + head * 4 + k)]);
          };
          std::vector<double> score(static_cast<std::size_t>(t));
          double top = -1e300, total = 0;
          for (std::int64_t r = 0; r < t; ++r) {
            double d = 0;
            for (int k = 0; k < 4; ++k) d += at(q, k) * at(r, k);
            score[static_cast<std::size_t>(r)] = d;
            top = std::max(top, d);
          }
          for (double& d : score) total += (d = std::exp(d - top));
          for (int k = 0; k < 4; ++k) {
            double v = 0;
            for (std::int64_t r = 0; r < t; ++r)
              v += score[static_cast<std::size_t>(r)] / total * at(r, k);
            merged[head * 4 + k] = v;
          }
        }
        for (int j = 0; j < 3; ++j) {
          double want = 0;
          for (int k = 0; k < 8; ++k) want += merged[k] * w[static_cast<std::size_t>(k * 3 + j)];
          ASSERT_NEAR(y[static_cast<std::size_t>((bi * t + q) * 3 + j)], want, 2e-5)
              << "token " << q << " of batch " << bi;
        }
      }
  }
  // A sum of run-time sizes is carried: Shape(x) + 1 is [batch + 1, 5] at every batch.
  model_builder sum;
  sum.input("x", {std::string("batch"), std::int64_t{4}});
  sum.ints("one", {1});
  sum.node("Shape", {"x"}, {"s"});
  sum.node("Add", {"s", "one"}, {"grown"}, "grow");
  sum.node("ConstantOfShape", {"grown"}, {"y"});
  sum.output("y", {std::string("n"), std::int64_t{5}});
  auto grown = kiln::compile(kiln::onnx::import_bytes(sum.bytes()).graph);
  const std::vector<kiln::shape> three = {kiln::shape{3, 4}};
  EXPECT_EQ(grown.result_dims(three)[0], (kiln::shape{4, 5}));
  // Div (rounded down, as ONNX divides integers), Min and Max of a run-time size.
  model_builder bounds;
  bounds.input("x", {std::string("n")});
  bounds.ints("two", {2});
  bounds.ints("three", {3});
  bounds.ints("five", {5});
  bounds.node("Shape", {"x"}, {"s"});
  bounds.node("Div", {"s", "two"}, {"half"});
  bounds.node("Min", {"s", "three"}, {"low"});
  bounds.node("Max", {"s", "five"}, {"high"});
  auto* along = bounds.node("Concat", {"half", "low", "high"}, {"shape"})->add_attribute();
  along->set_name("axis");
  along->set_type(::onnx::AttributeProto::INT);
  along->set_i(0);
  bounds.node("ConstantOfShape", {"shape"}, {"y"});
  bounds.output("y", {std::string("a"), std::string("b"), std::string("c")});
  auto bounded = kiln::compile(kiln::onnx::import_bytes(bounds.bytes()).graph);
  for (std::int64_t n : {7, 2}) {
    const std::vector<kiln::shape> x = {kiln::shape{n}};
    EXPECT_EQ(bounded.result_dims(x)[0],
              (kiln::shape{n / 2, std::min<std::int64_t>(n, 3), std::max<std::int64_t>(n, 5)}))
        << "n " << n;
  }
  // A Range to a run-time size counts at the call (a decoder's position ids [past, past + new),
  // delta 2 as i32); a size read as a number (Cast to float) is data, counted at the call too.
  model_builder range;
  range.input("x", {std::string("batch"), std::int64_t{4}});
  range.input("past", {std::string("p")});
  range.scalar_int("i0", 0);
  range.scalar_int("step", 1);
  range.node("Shape", {"x"}, {"s"});
  range.node("Gather", {"s", "i0"}, {"n"});
  range.node("Shape", {"past"}, {"ps"});
  range.node("Gather", {"ps", "i0"}, {"p"});
  range.node("Add", {"p", "n"}, {"end"});
  range.node("Range", {"p", "end", "step"}, {"ids"}, "count");
  int_attr(range.node("Cast", {"n"}, {"n32"}), "to", ::onnx::TensorProto::INT32);
  int_attr(range.node("Cast", {"n"}, {"nf"}), "to", ::onnx::TensorProto::FLOAT);
  auto* two = range.node("Constant", {}, {"two"})->add_attribute();
  two->set_name("value");
  two->set_type(::onnx::AttributeProto::TENSOR);
  two->mutable_t()->set_data_type(::onnx::TensorProto::INT32);
  two->mutable_t()->add_int32_data(2);
  auto* zero = range.node("Constant", {}, {"zero"})->add_attribute();
  zero->set_name("value");
  zero->set_type(::onnx::AttributeProto::TENSOR);
  zero->mutable_t()->set_data_type(::onnx::TensorProto::INT32);
  zero->mutable_t()->add_int32_data(0);
  range.node("Range", {"zero", "n32", "two"}, {"evens"});
  range.node("Mul", {"x", "nf"}, {"scaled"});
  range.output("ids", {std::string("batch")}, ::onnx::TensorProto::INT64);
  range.output("evens", {std::string("half")}, ::onnx::TensorProto::INT32);
  range.output("scaled", {std::string("batch"), std::int64_t{4}});
  auto counted = kiln::compile(kiln::onnx::import_bytes(range.bytes()).graph);
  for (auto [n, p] : {std::pair<std::int64_t, std::int64_t>{3, 0}, {5, 9}}) {
    SCOPED_TRACE("batch " + std::to_string(n) + ", past " + std::to_string(p));
    std::vector<float> x(static_cast<std::size_t>(n * 4), 1.5f), past(static_cast<std::size_t>(p)),
        scaled(x.size());
    std::vector<std::int64_t> ids(static_cast<std::size_t>(n));
    std::vector<std::int32_t> evens(static_cast<std::size_t>((n + 1) / 2));
    counted.run({kiln::tensor_ref(x.data(), kiln::dtype::f32, {n, 4}),
                 kiln::tensor_ref(past.data(), kiln::dtype::f32, {p})},
                {kiln::tensor_ref(ids.data(), kiln::dtype::i64, {n}),
                 kiln::tensor_ref(evens.data(), kiln::dtype::i32, {(n + 1) / 2}),
                 kiln::tensor_ref(scaled.data(), kiln::dtype::f32, {n, 4})});
    for (std::int64_t i = 0; i < n; ++i) EXPECT_EQ(ids[i], p + i) << i;
    for (std::size_t i = 0; i < evens.size(); ++i) EXPECT_EQ(evens[i], 2 * std::int32_t(i)) << i;
    for (float v : scaled) ASSERT_EQ(v, 1.5f * static_cast<float>(n));
  }
  // A Slice of data at run-time positions, as a GPT-2 export cuts its causal mask: rows
  // [past, past + seq) and columns [0, past + seq) of a static lower triangle.
  model_builder causal;
  causal.input("x", {std::string("seq"), std::int64_t{2}});
  causal.input("past", {std::string("p")});
  std::vector<float> triangle(8 * 8);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j <= i; ++j) triangle[static_cast<std::size_t>(i * 8 + j)] = 1.0f;
  causal.floats("bias", triangle, {1, 1, 8, 8});
  causal.ints("i0", {0});
  causal.ints("two", {2});
  causal.ints("three", {3});
  causal.node("Shape", {"x"}, {"xs"});
  causal.node("Gather", {"xs", "i0"}, {"seq"});
  causal.node("Shape", {"past"}, {"ps"});
  causal.node("Gather", {"ps", "i0"}, {"p"});
  causal.node("Add", {"p", "seq"}, {"keys"});
  causal.node("Sub", {"keys", "seq"}, {"first"});
  causal.node("Slice", {"bias", "first", "keys", "two"}, {"rows"}, "rows");
  causal.node("Slice", {"rows", "i0", "keys", "three"}, {"mask"}, "columns");
  causal.output("mask", {std::int64_t{1}, std::int64_t{1}, std::string("seq"), std::string("k")});
  auto masks = kiln::compile(kiln::onnx::import_bytes(causal.bytes()).graph);
  for (auto [seq, p] : {std::pair<std::int64_t, std::int64_t>{1, 4}, {3, 0}, {2, 6}}) {
    SCOPED_TRACE("seq " + std::to_string(seq) + ", past " + std::to_string(p));
    std::vector<float> x(static_cast<std::size_t>(seq * 2)), past(static_cast<std::size_t>(p)),
        mask(static_cast<std::size_t>(seq * (p + seq)));
    masks.run({kiln::tensor_ref(x.data(), kiln::dtype::f32, {seq, 2}),
               kiln::tensor_ref(past.data(), kiln::dtype::f32, {p})},
              {kiln::tensor_ref(mask.data(), kiln::dtype::f32, {1, 1, seq, p + seq})});
    for (std::int64_t i = 0; i < seq; ++i)
      for (std::int64_t j = 0; j < p + seq; ++j)
        ASSERT_EQ(mask[static_cast<std::size_t>(i * (p + seq) + j)], j <= p + i ? 1.0f : 0.0f)
            << "row " << i << ", column " << j;
  }
}

// Sequence and optional graph inputs: refused until the options say what the calls give, then
// parameters of their own ('s.0', 's.1', the second with extents given); an optional input's
// presence known at import (OptionalHasElement a constant); options naming no input refused.
TEST(OnnxOptions, SequenceAndOptionalInputsAsTheCallsGiveThem) {
  model_builder b;
  auto* s = b.g->add_input();
  s->set_name("s");
  auto* item =
      s->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type();
  item->set_elem_type(::onnx::TensorProto::FLOAT);
  item->mutable_shape()->add_dim()->set_dim_param("n");
  auto* o = b.g->add_input();
  o->set_name("o");
  auto* held =
      o->mutable_type()->mutable_optional_type()->mutable_elem_type()->mutable_tensor_type();
  held->set_elem_type(::onnx::TensorProto::FLOAT);
  held->mutable_shape()->add_dim()->set_dim_value(1);
  int_attr(b.node("ConcatFromSequence", {"s"}, {"y"}), "axis", 0);
  b.node("OptionalHasElement", {"o"}, {"has"});
  b.output("y", {std::string("m")});
  b.output("has", {}, ::onnx::TensorProto::BOOL);
  std::string why = refusal(b.bytes(), {}, kiln::errc::unsupported);
  EXPECT_NE(why.find("import_options::sequence_lengths"), std::string::npos) << why;
  kiln::onnx::import_options opt;
  opt.sequence_lengths["s"] = 2;
  why = refusal(b.bytes(), opt, kiln::errc::unsupported);
  EXPECT_NE(why.find("import_options::optionals_present"), std::string::npos) << why;
  opt.optionals_present["o"] = false;
  opt.input_dims["s.1"] = kiln::shape{3};
  auto exe = kiln::compile(kiln::onnx::import_bytes(b.bytes(), opt).graph);
  EXPECT_EQ(exe.input_names(), (std::vector<std::string>{"s.0", "s.1"}));
  std::vector<float> first = {1, 2}, second = {3, 4, 5}, y(5);
  bool has = true;
  exe.run({kiln::tensor_ref(first.data(), kiln::dtype::f32, {2}),
           kiln::tensor_ref(second.data(), kiln::dtype::f32, {3})},
          {kiln::tensor_ref(y.data(), kiln::dtype::f32, {5}),
           kiln::tensor_ref(&has, kiln::dtype::boolean, {})});
  EXPECT_EQ(y, (std::vector<float>{1, 2, 3, 4, 5}));
  EXPECT_FALSE(has);
  opt.optionals_present["o"] = true;
  auto present = kiln::onnx::import_bytes(b.bytes(), opt);
  EXPECT_EQ(present.graph.input_names(), (std::vector<std::string>{"s.0", "s.1", "o"}));
  opt.sequence_lengths["none"] = 1;
  why = refusal(b.bytes(), opt, kiln::errc::invalid_argument);
  EXPECT_NE(why.find("'none'"), std::string::npos) << why;
}

// A mask or a fill shaped like a value of run-time sizes: Expand and ConstantOfShape to its
// Shape (an exporter's attention mask, a zero state).
TEST(OnnxOptions, ExpandAndConstantOfShapeToRunTimeSizes) {
  model_builder b;
  b.input("x", {std::string("batch"), std::string("seq"), std::int64_t{4}});
  b.input("mask", {std::string("batch"), std::int64_t{1}, std::int64_t{1}});
  b.node("Shape", {"x"}, {"s"});
  auto* fill = b.node("ConstantOfShape", {"s"}, {"half"})->add_attribute();
  fill->set_name("value");
  fill->set_type(::onnx::AttributeProto::TENSOR);
  fill->mutable_t()->set_data_type(::onnx::TensorProto::FLOAT);
  fill->mutable_t()->add_dims(1);
  fill->mutable_t()->add_float_data(0.5f);
  b.node("Expand", {"mask", "s"}, {"wide"});
  b.node("Add", {"x", "half"}, {"shifted"});
  b.node("Mul", {"shifted", "wide"}, {"y"});
  b.output("y", {std::string("batch"), std::string("seq"), std::int64_t{4}});
  auto exe = kiln::compile(kiln::onnx::import_bytes(b.bytes()).graph);
  for (auto [n, t] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {3, 6}}) {
    std::vector<float> x(static_cast<std::size_t>(n * t * 4)), mask(static_cast<std::size_t>(n)),
        y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.25f;
    for (std::size_t i = 0; i < mask.size(); ++i) mask[i] = i % 2 ? 0.0f : 2.0f;
    exe.run({kiln::tensor_ref(x.data(), kiln::dtype::f32, {n, t, 4}),
             kiln::tensor_ref(mask.data(), kiln::dtype::f32, {n, 1, 1})},
            {kiln::tensor_ref(y.data(), kiln::dtype::f32, {n, t, 4})});
    for (std::size_t i = 0; i < x.size(); ++i)
      ASSERT_EQ(y[i], (x[i] + 0.5f) * mask[i / static_cast<std::size_t>(t * 4)])
          << "element " << i << " at batch " << n << ", seq " << t;
  }
}

// A decoder step's attention over a cache, as exporters write it: past [past, 4] and the new
// token x [1, 4] joined (Concat) into present [past + 1, 4]; the additive mask [1, total]
// expanded to [1, Shape(past)[0] + 1] (an Add of a run-time size); scores x present', masked,
// softmax, times present. Imported once, run at several cache lengths against a double loop.
TEST(OnnxOptions, ACacheOfRunTimeLengthImportsOnceAndRunsAtAnyLength) {
  model_builder b;
  b.input("past", {std::string("past"), std::int64_t{4}});
  b.input("x", {std::int64_t{1}, std::int64_t{4}});
  b.input("mask", {std::int64_t{1}, std::string("total")});
  b.ints("one", {1});
  b.ints("axis0", {0});
  b.scalar_int("i0", 0);
  int_attr(b.node("Concat", {"past", "x"}, {"present"}), "axis", 0);
  b.node("Shape", {"past"}, {"s"});
  b.node("Gather", {"s", "i0"}, {"len"});
  b.node("Unsqueeze", {"len", "axis0"}, {"len1"});
  b.node("Add", {"len1", "one"}, {"total"});
  int_attr(b.node("Concat", {"one", "total"}, {"mask_shape"}), "axis", 0);
  b.node("Expand", {"mask", "mask_shape"}, {"wide_mask"});
  auto* perm = b.node("Transpose", {"present"}, {"keys"})->add_attribute();
  perm->set_name("perm");
  perm->set_type(::onnx::AttributeProto::INTS);
  perm->add_ints(1);
  perm->add_ints(0);
  b.node("MatMul", {"x", "keys"}, {"scores"});
  b.node("Add", {"scores", "wide_mask"}, {"masked"});
  int_attr(b.node("Softmax", {"masked"}, {"p"}), "axis", -1);
  b.node("MatMul", {"p", "present"}, {"y"});
  b.output("present", {std::string("past + 1"), std::int64_t{4}});
  b.output("y", {std::int64_t{1}, std::int64_t{4}});
  auto m = kiln::onnx::import_bytes(b.bytes());
  EXPECT_EQ(m.info.symbolic_dims, (std::vector<std::string>{"past", "total"}));
  auto exe = kiln::compile(std::move(m.graph));
  for (std::int64_t past : {0, 1, 5, 12}) {
    const std::size_t n = static_cast<std::size_t>(past) + 1;
    std::vector<float> cache(4 * (n - 1)), x(4), mask(n), present(4 * n, -1), y(4, -1);
    for (std::size_t i = 0; i < cache.size(); ++i) cache[i] = std::sin(0.3f * float(i));
    for (std::size_t i = 0; i < 4; ++i) x[i] = std::cos(0.7f * float(i));
    for (std::size_t i = 0; i < n; ++i) mask[i] = i % 3 == 1 ? -1e4f : 0.0f;
    exe.run({kiln::tensor_ref(cache.data(), kiln::dtype::f32, {past, 4}),
             kiln::tensor_ref(x.data(), kiln::dtype::f32, {1, 4}),
             kiln::tensor_ref(mask.data(), kiln::dtype::f32, {1, past + 1})},
            {kiln::tensor_ref(present.data(), kiln::dtype::f32, {past + 1, 4}),
             kiln::tensor_ref(y.data(), kiln::dtype::f32, {1, 4})});
    std::vector<float> joined = cache;
    joined.insert(joined.end(), x.begin(), x.end());
    ASSERT_EQ(present, joined) << "past " << past;
    std::vector<double> p(n);
    double top = -1e300, total = 0;
    for (std::size_t j = 0; j < n; ++j) {
      for (std::size_t k = 0; k < 4; ++k) p[j] += double(x[k]) * joined[j * 4 + k];
      p[j] += mask[j];
      top = std::max(top, p[j]);
    }
    for (double& v : p) total += v = std::exp(v - top);
    for (std::size_t k = 0; k < 4; ++k) {
      double want = 0;
      for (std::size_t j = 0; j < n; ++j) want += p[j] / total * joined[j * 4 + k];
      ASSERT_NEAR(y[k], want, 1e-5) << "past " << past << ", feature " << k;
    }
  }
}

// Tile by repeats computed from a run-time size: x [n, 2] repeated n times along axis 0.
TEST(OnnxOptions, TileByRunTimeRepeats) {
  model_builder b;
  b.input("x", {std::string("n"), std::int64_t{2}});
  b.ints("zero", {0});
  b.ints("one", {1});
  b.node("Shape", {"x"}, {"s"});
  b.node("Slice", {"s", "zero", "one"}, {"n"});
  auto* axis = b.node("Concat", {"n", "one"}, {"repeats"})->add_attribute();
  axis->set_name("axis");
  axis->set_type(::onnx::AttributeProto::INT);
  axis->set_i(0);
  b.node("Tile", {"x", "repeats"}, {"y"});
  b.output("y", {std::string("m"), std::int64_t{2}});
  auto exe = kiln::compile(kiln::onnx::import_bytes(b.bytes()).graph);
  for (std::int64_t n : {1, 3}) {
    std::vector<float> x(static_cast<std::size_t>(2 * n)), y(static_cast<std::size_t>(2 * n * n));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) + 0.5f;
    exe.run({kiln::tensor_ref(x.data(), kiln::dtype::f32, {n, 2})},
            {kiln::tensor_ref(y.data(), kiln::dtype::f32, {n * n, 2})});
    for (std::size_t i = 0; i < y.size(); ++i)
      ASSERT_EQ(y[i], x[i % x.size()]) << "element " << i << ", n " << n;
  }
}

TEST(OnnxOptions, NamedDimensionLeftToTheCallRunsAtAnySize) {
  model_builder b;
  b.input("x", {std::string("batch"), std::int64_t{3}});
  b.node("Relu", {"x"}, {"r"});
  b.node("Flatten", {"r"}, {"y"});
  b.output("y", {std::string("batch"), std::int64_t{3}});
  auto m = kiln::onnx::import_bytes(b.bytes());
  ASSERT_EQ(m.info.symbolic_dims, std::vector<std::string>{"batch"});
  EXPECT_EQ(m.graph.name(), "test");  // the model's graph's name
  auto exe = kiln::compile(std::move(m.graph));
  for (std::int64_t n : {1, 2, 5}) {
    std::vector<float> x(static_cast<std::size_t>(3 * n)), y(x.size(), 7);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 2 ? -1.5 * i : i);
    exe.run({kiln::tensor_ref(x.data(), kiln::dtype::f32, {n, 3})},
            {kiln::tensor_ref(y.data(), kiln::dtype::f32, {n, 3})});
    for (std::size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], x[i] > 0 ? x[i] : 0.0f) << n;
  }
}

// An input whose dimension has neither a size nor a name (as some exporters leave it) gets its
// extents from import_options::input_dims: a reflect Pad, which needs its axis's size at import,
// then imports. Extents that contradict a declared size, or name no input, are refused.
TEST(OnnxOptions, InputDimsGiveExtentsThatHaveNoName) {
  model_builder b;
  b.input("x", {std::int64_t{1}, std::int64_t{1}});
  b.g->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(1)
      ->Clear();
  b.ints("pads", {0, 2, 0, 2});
  auto* mode = b.node("Pad", {"x", "pads"}, {"y"})->add_attribute();
  mode->set_name("mode");
  mode->set_type(::onnx::AttributeProto::STRING);
  mode->set_s("reflect");
  b.output("y", {std::int64_t{1}, std::int64_t{10}});
  const std::string why = refusal(b.bytes(), {}, kiln::errc::unsupported);
  EXPECT_NE(why.find("run-time size"), std::string::npos) << why;
  kiln::onnx::import_options opt;
  opt.input_dims["x"] = kiln::shape{1, 6};
  kiln::executable e = kiln::compile(kiln::onnx::import_bytes(b.bytes(), opt).graph);
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};
  std::vector<float> y(10);
  e.run({x}, {y}, kiln::device::cpu());
  EXPECT_EQ(y, (std::vector<float>{3, 2, 1, 2, 3, 4, 5, 6, 5, 4}));
  opt.input_dims["x"] = kiln::shape{2, 6};
  EXPECT_NE(refusal(b.bytes(), opt, kiln::errc::shape_mismatch)
                .find("import_options::input_dims['x'] is [2, 6], which the model's graph value "
                      "'x' does not allow"),
            std::string::npos);
  opt.input_dims.clear();
  opt.input_dims["nothing"] = kiln::shape{1};
  refusal(b.bytes(), opt, kiln::errc::invalid_argument);
}

TEST(OnnxOptions, InputValuesGivenAtImportAreConstants) {
  model_builder b;
  b.input("x", {std::int64_t{2}, std::int64_t{3}});
  b.input("shape", {std::int64_t{2}}, ::onnx::TensorProto::INT64);
  b.node("Reshape", {"x", "shape"}, {"y"});
  b.output("y", {std::int64_t{3}, std::int64_t{2}});
  std::string why = refusal(b.bytes(), {}, kiln::errc::unsupported);
  EXPECT_NE(why.find("shape (input 1 'shape') is computed at run time"), std::string::npos) << why;
  kiln::onnx::import_options opt;
  std::int64_t dims[] = {3, 2};
  opt.input_values["shape"] = {
      kiln::dtype::i64, kiln::shape{2},
      std::vector<unsigned char>(reinterpret_cast<unsigned char*>(dims),
                                 reinterpret_cast<unsigned char*>(dims) + 16)};
  auto m = kiln::onnx::import_bytes(b.bytes(), opt);
  EXPECT_EQ(m.graph.input_names(), std::vector<std::string>{"x"});
  // A value for a name that is not an input, or of the wrong type, is refused.
  opt.input_values["nothing"] = opt.input_values["shape"];
  refusal(b.bytes(), opt, kiln::errc::invalid_argument);
  opt.input_values.erase("nothing");
  opt.input_values["shape"].type = kiln::dtype::i32;
  refusal(b.bytes(), opt, kiln::errc::dtype_mismatch);
}

// An initializer read by two nodes, once directly and once through the Identity exporters write
// for a shared weight, becomes one tensor constant of the graph: the importer's known tensor, the
// graph's constant and the executable's argument are one buffer, so the weights are held once.
TEST(OnnxOptions, AnInitializerReadTwiceIsOneConstant) {
  model_builder b;
  b.input("x", {std::int64_t{2}, std::int64_t{3}});
  const std::vector<float> w = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  b.floats("W", w, {3, 4});
  b.node("Identity", {"W"}, {"W2"});
  b.node("MatMul", {"x", "W"}, {"a"});
  b.node("MatMul", {"x", "W2"}, {"b"});
  b.node("Sub", {"a", "b"}, {"d"});
  b.node("Add", {"a", "d"}, {"y"});
  b.output("y", {std::int64_t{2}, std::int64_t{4}});
  auto m = kiln::onnx::import_bytes(b.bytes());
  ASSERT_EQ(m.graph.constants().size(), 1u);
  EXPECT_EQ(m.graph.constants()[0].bytes.size(), w.size() * 4);
  kiln::executable e = kiln::compile(std::move(m.graph));
  const std::vector<float> x = {1, 0, -1, 0.5f, 2, 0.25f};
  std::vector<float> y(8);
  e.run({x}, {y}, kiln::device::cpu());
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) {
      float want = 0;
      for (int k = 0; k < 3; ++k) want += x[i * 3 + k] * w[k * 4 + j];
      EXPECT_FLOAT_EQ(y[i * 4 + j], want) << i << "," << j;
    }
}

// Gradient (ai.onnx.preview.training) through MatMul, a broadcast Add, Sigmoid and Mul, with
// respect to the input, the weight and the bias; y is not a scalar, so the gradient is its sum's.
// Checked against the derivatives worked out by hand in double; an op kiln does not
// differentiate on the path is refused naming the node.
TEST(OnnxOptions, GradientOfAMatMulSigmoidBlock) {
  auto build = [](const std::string& activation) {
    model_builder b;
    auto* training = b.m.add_opset_import();
    training->set_domain("ai.onnx.preview.training");
    training->set_version(1);
    b.input("x", {std::int64_t{2}, std::int64_t{3}});
    b.floats("W", {0.5f, -1, 0.25f, 2, 1, 0.75f, -0.5f, 0.1f, -2, 0.3f, 1.5f, -0.25f}, {3, 4});
    b.floats("bias", {0.1f, -0.2f, 0.3f, 0}, {4});
    b.node("MatMul", {"x", "W"}, {"h"});
    b.node("Add", {"h", "bias"}, {"z"});
    b.node(activation, {"z"}, {"s"});
    b.node("Mul", {"s", "s"}, {"y"});
    auto* grad = b.node("Gradient", {"x", "W", "bias"}, {"dx", "dW", "dbias"}, "grad");
    grad->set_domain("ai.onnx.preview.training");
    auto* xs = grad->add_attribute();
    xs->set_name("xs");
    xs->set_type(::onnx::AttributeProto::STRINGS);
    for (const char* n : {"x", "W", "bias"}) xs->add_strings(n);
    auto* y = grad->add_attribute();
    y->set_name("y");
    y->set_type(::onnx::AttributeProto::STRING);
    y->set_s("y");
    b.output("dx", {std::int64_t{2}, std::int64_t{3}});
    b.output("dW", {std::int64_t{3}, std::int64_t{4}});
    b.output("dbias", {std::int64_t{4}});
    return b;
  };
  kiln::executable e = kiln::compile(kiln::onnx::import_bytes(build("Sigmoid").bytes()).graph);
  const std::vector<float> x = {1, -0.5f, 2, 0.25f, 0, -1};
  const std::vector<float> w = {0.5f, -1, 0.25f, 2, 1, 0.75f, -0.5f, 0.1f, -2, 0.3f, 1.5f, -0.25f};
  const std::vector<float> bias = {0.1f, -0.2f, 0.3f, 0};
  std::vector<float> dx(6), dw(12), db(4);
  e.run({x}, {dx, dw, db}, kiln::device::cpu());
  double gz[2][4];  // dy/dz = 2 s * s (1 - s)
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) {
      double z = bias[j];
      for (int k = 0; k < 3; ++k) z += double(x[i * 3 + k]) * w[k * 4 + j];
      const double s = 1 / (1 + std::exp(-z));
      gz[i][j] = 2 * s * s * (1 - s);
    }
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 3; ++k) {
      double want = 0;
      for (int j = 0; j < 4; ++j) want += gz[i][j] * w[k * 4 + j];
      EXPECT_NEAR(dx[i * 3 + k], want, 1e-5) << "dx " << i << "," << k;
    }
  for (int k = 0; k < 3; ++k)
    for (int j = 0; j < 4; ++j)
      EXPECT_NEAR(dw[k * 4 + j], x[k] * gz[0][j] + x[3 + k] * gz[1][j], 1e-5) << "dW " << k;
  for (int j = 0; j < 4; ++j) EXPECT_NEAR(db[j], gz[0][j] + gz[1][j], 1e-5) << "dbias " << j;

  const std::string why = refusal(build("Softmax").bytes(), {}, kiln::errc::unsupported);
  EXPECT_NE(why.find("node 4 'grad' (Gradient): node 2 (Softmax) is on the path from xs to y; "
                     "kiln differentiates Add, Sub, Mul"),
            std::string::npos)
      << why;
}

// y = MatMul(x, W) + B with W a variable on request: the executable reads W as its variable
// (loaded with the initializer's value by load_variables, compile() and kiln-import-onnx's module)
// and a new value changes the result without compiling again; B stays a constant. A name that is
// no initializer, and a variable whose value a node needs at import, are refused.
TEST(OnnxOptions, InitializersBecomeVariablesOnRequest) {
  model_builder b;
  b.input("x", {std::int64_t{2}, std::int64_t{3}});
  b.floats("W", {1, 2, 3, 4, 5, 6}, {3, 2});
  b.floats("B", {0.5f, -1}, {2});
  b.node("MatMul", {"x", "W"}, {"xw"});
  b.node("Add", {"xw", "B"}, {"y"});
  b.output("y", {std::int64_t{2}, std::int64_t{2}});
  const std::vector<float> x{1, 0, -1, 2, 1, 0};
  // x W + B worked out by hand: [1 - 5, 2 - 6] + B and [2 + 3, 4 + 4] + B.
  const std::vector<float> with_w{-3.5f, -5, 5.5f, 7};
  auto run = [&](kiln::executable& exe) {
    std::vector<float> y(4, 99);
    exe.run({kiln::tensor_ref(x.data(), kiln::dtype::f32, {2, 3})},
            {kiln::tensor_ref(y.data(), kiln::dtype::f32, {2, 2})});
    return y;
  };
  kiln::onnx::import_options opt;
  opt.variables = {"W"};
  auto m = kiln::onnx::import_bytes(b.bytes(), opt);
  ASSERT_EQ(m.variable_values.size(), 1u);
  EXPECT_EQ(m.variable_values["W"].dims, kiln::shape({3, 2}));
  EXPECT_EQ(m.graph.input_names(), std::vector<std::string>{"x"});
  auto exe = kiln::compile(std::move(m.graph));
  EXPECT_EQ(exe.variable_names(), std::vector<std::string>{"W"});
  kiln::onnx::load_variables(exe, m);
  EXPECT_EQ(run(exe), with_w);
  // W = 0 everywhere but W[0][0] = 2: y = [2 x0, 0] + B.
  exe.variable("W").load(std::vector<float>{2, 0, 0, 0, 0, 0});
  EXPECT_EQ(run(exe), (std::vector<float>{2.5f, -1, 4.5f, -1}));

  // compile(path) and the import tool's module start from the initializer's value.
  const fs::path dir = fs::temp_directory_path() / ("kiln_vars_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "m.onnx", std::ios::binary) << b.m.SerializeAsString();
  auto compiled = kiln::onnx::compile(dir / "m.onnx", opt);
  EXPECT_EQ(run(compiled), with_w);
#ifdef KILN_IMPORT_ONNX_PATH
  std::string cmd = std::string(KILN_IMPORT_ONNX_PATH) + " " + (dir / "m.onnx").string() + " -o " +
                    (dir / "m.kiln").string() + " --variable W > /dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  kiln::executable loaded = kiln::module::load((dir / "m.kiln").string());
  EXPECT_EQ(loaded.variable_names(), std::vector<std::string>{"W"});
  EXPECT_EQ(run(loaded), with_w);
#endif
  fs::remove_all(dir);

  opt.variables = {"W", "nothing"};
  std::string why = refusal(b.bytes(), opt, kiln::errc::invalid_argument);
  EXPECT_NE(why.find("'nothing', which is not an initializer"), std::string::npos) << why;
  // A Reshape's shape must be known at import: as a variable it is not.
  model_builder r;
  r.input("x", {std::int64_t{2}, std::int64_t{3}});
  r.ints("shape", {3, 2});
  r.node("Reshape", {"x", "shape"}, {"y"}, "reshaping");
  r.output("y", {std::int64_t{3}, std::int64_t{2}});
  opt.variables = {"shape"};
  why = refusal(r.bytes(), opt, kiln::errc::unsupported);
  EXPECT_NE(why.find("'reshaping'"), std::string::npos) << why;
  EXPECT_NE(why.find("input 1 'shape'"), std::string::npos) << why;
}

TEST(OnnxOptions, ExternalDataIsReadFromTheModelsFolderOnly) {
  const fs::path dir =
      fs::temp_directory_path() / ("kiln_onnx_external_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  // w: [2, 2] = {1, 2, 3, 4} at offset 8 of weights.bin.
  std::vector<float> w = {1, 2, 3, 4};
  {
    std::ofstream f(dir / "weights.bin", std::ios::binary);
    f.write("padding!", 8);
    f.write(reinterpret_cast<const char*>(w.data()), 16);
  }
  auto write_model = [&](const std::string& location) {
    model_builder b;
    b.input("x", {std::int64_t{1}, std::int64_t{2}});
    auto* t = b.floats("w", {}, {2, 2});
    t->clear_raw_data();
    t->set_data_location(::onnx::TensorProto::EXTERNAL);
    for (auto [k, v] : {std::pair{"location", location}, {"offset", "8"}, {"length", "16"}}) {
      auto* e = t->add_external_data();
      e->set_key(k);
      e->set_value(v);
    }
    b.node("MatMul", {"x", "w"}, {"y"});
    b.output("y", {std::int64_t{1}, std::int64_t{2}});
    std::ofstream(dir / "model.onnx", std::ios::binary) << b.m.SerializeAsString();
    return b.bytes();
  };
  write_model("weights.bin");
  auto exe = kiln::onnx::compile(dir / "model.onnx");
  float x[2] = {10, 100}, y[2] = {};
  exe.run({kiln::tensor_ref(x, kiln::dtype::f32, {1, 2})},
          {kiln::tensor_ref(y, kiln::dtype::f32, {1, 2})});
  EXPECT_EQ(y[0], 10 * 1 + 100 * 3);
  EXPECT_EQ(y[1], 10 * 2 + 100 * 4);
  // Given as bytes, the model needs the folder named.
  auto bytes = write_model("weights.bin");
  refusal(bytes, {}, kiln::errc::invalid_argument);
  kiln::onnx::import_options opt;
  opt.external_data_folder = dir;
  EXPECT_NO_THROW(kiln::onnx::import_bytes(bytes, opt));
  // Locations outside the folder, and data beyond the file's end, are refused.
  for (const char* bad : {"../weights.bin", "/etc/passwd", "missing.bin"})
    refusal(write_model(bad), opt, kiln::errc::invalid_argument);
  {
    std::ofstream f(dir / "weights.bin", std::ios::binary);
    f.write("short", 5);
  }
  std::string why = refusal(write_model("weights.bin"), opt, kiln::errc::invalid_argument);
  EXPECT_NE(why.find("lies outside"), std::string::npos) << why;
  fs::remove_all(dir);
}

TEST(OnnxOptions, RefusalsNameTheNodeAndWhatIsMissing) {
  {
    model_builder b;
    b.input("x", {std::int64_t{4}});
    b.node("Relu", {"x"}, {"r"});
    b.node("Multinomial", {"r"}, {"y"}, "draw");
    b.output("y", {std::int64_t{4}});
    std::string why = refusal(b.bytes(), {}, kiln::errc::unsupported);
    EXPECT_NE(why.find("node 1 'draw' (Multinomial): kiln has no lowering for Multinomial"),
              std::string::npos)
        << why;
  }
  {  // an output whose size depends on data known only at the call
    model_builder b;
    b.input("x", {std::int64_t{4}});
    b.node("Relu", {"x"}, {"r"});
    b.node("Unique", {"r"}, {"y"}, "dedupe");
    b.output("y", {std::int64_t{4}});
    // imports as a model cut there (test_onnx_model.cpp runs such models), which one
    // executable cannot run
    kiln::onnx::imported m = kiln::onnx::import_bytes(b.bytes());
    EXPECT_TRUE(m.rest);
    try {
      kiln::onnx::compile(std::move(m));
      ADD_FAILURE() << "compiled a cut model";
    } catch (const kiln::error& e) {
      EXPECT_EQ(e.code(), kiln::errc::unsupported);
      EXPECT_NE(std::string(e.what()).find("cut at node 1 (Unique)"), std::string::npos)
          << e.what();
    }
  }
  {  // an attribute kiln does not read is refused, never ignored
    model_builder b;
    b.input("x", {std::int64_t{4}});
    auto* n = b.node("LayerNormalization", {"x", "x"}, {"y"});
    auto* a = n->add_attribute();
    a->set_name("stash_type");
    a->set_type(::onnx::AttributeProto::INT);
    a->set_i(11);
    b.output("y", {std::int64_t{4}});
    std::string why = refusal(b.bytes(), {}, kiln::errc::unsupported);
    EXPECT_NE(why.find("node 0 (LayerNormalization): stash_type"), std::string::npos) << why;
  }
  {  // a graph method's refusal (indices wider than data off the axis) names the node too
    model_builder b;
    b.input("x", {std::int64_t{2}, std::int64_t{2}});
    b.input("i", {std::int64_t{2}, std::int64_t{3}}, ::onnx::TensorProto::INT64);
    b.input("u", {std::int64_t{2}, std::int64_t{3}});
    b.node("ScatterElements", {"x", "i", "u"}, {"y"}, "writes");
    b.output("y", {std::int64_t{2}, std::int64_t{2}});
    std::string why = refusal(b.bytes(), {}, kiln::errc::shape_mismatch);
    EXPECT_NE(why.find("node 0 'writes' (ScatterElements): scatter_elements: indices [2, 3] are "
                       "larger than data [2, 2] along axis 1"),
              std::string::npos)
        << why;
  }
  {  // a recurrent layer unrolls at most 4096 steps: a declared length is untrusted
    model_builder b;
    b.input("x", {std::int64_t{5000}, std::int64_t{1}, std::int64_t{2}});
    b.input("w", {std::int64_t{1}, std::int64_t{3}, std::int64_t{2}});
    b.input("r", {std::int64_t{1}, std::int64_t{3}, std::int64_t{3}});
    b.node("RNN", {"x", "w", "r"}, {"y"}, "recurrent");
    b.output("y", {std::int64_t{5000}, std::int64_t{1}, std::int64_t{1}, std::int64_t{3}});
    std::string why = refusal(b.bytes(), {}, kiln::errc::unsupported);
    EXPECT_NE(why.find("'recurrent' (RNN): a sequence of 5000 steps (kiln unrolls 1 to 4096)"),
              std::string::npos)
        << why;
  }
  {  // a sequence position outside the sequence (known at import) names the node and the length
    model_builder b;
    b.input("x", {std::int64_t{4}});
    b.ints("at", {5})->clear_dims();  // a scalar
    b.node("SequenceConstruct", {"x", "x"}, {"s"});
    b.node("SequenceAt", {"s", "at"}, {"y"}, "pick");
    b.output("y", {std::int64_t{4}});
    std::string why = refusal(b.bytes(), {}, kiln::errc::invalid_argument);
    EXPECT_NE(why.find("node 1 'pick' (SequenceAt): position 5 in a sequence of 2 tensors"),
              std::string::npos)
        << why;
  }
  {  // a tensor op given a sequence
    model_builder b;
    b.input("x", {std::int64_t{4}});
    b.node("SplitToSequence", {"x"}, {"s"});
    b.node("Relu", {"s"}, {"y"}, "rectify");
    b.output("y", {std::int64_t{4}});
    std::string why = refusal(b.bytes(), {}, kiln::errc::invalid_argument);
    EXPECT_NE(why.find("node 1 'rectify' (Relu): input 0 's' is a sequence, not a tensor"),
              std::string::npos)
        << why;
  }
  {  // ONNX's checker: Add takes two inputs
    model_builder b;
    b.input("x", {std::int64_t{4}});
    b.node("Add", {"x"}, {"y"});
    b.output("y", {std::int64_t{4}});
    std::string why = refusal(b.bytes(), {}, kiln::errc::invalid_argument);
    EXPECT_NE(why.find("ONNX's checker refuses the model"), std::string::npos) << why;
  }
  {  // an opset beyond the ONNX kiln was built with
    model_builder b(19);
    b.input("x", {std::int64_t{4}});
    b.node("Relu", {"x"}, {"y"});
    b.output("y", {std::int64_t{4}});
    kiln::onnx::import_options unchecked;
    unchecked.check = false;
    std::string why = refusal(b.bytes(), unchecked, kiln::errc::unsupported);
    EXPECT_NE(why.find("opset 19 is newer"), std::string::npos) << why;
  }
  {  // the model's declared output against what kiln computes
    model_builder b;
    b.input("x", {std::int64_t{4}});
    b.node("Relu", {"x"}, {"y"});
    b.output("y", {std::int64_t{5}});
    std::string why = refusal(b.bytes(), {}, kiln::errc::shape_mismatch);
    EXPECT_NE(why.find("graph output 'y' has dims [4] in kiln, [5] in the model"),
              std::string::npos)
        << why;
  }
  {  // a cycle: node 0 reads what node 1 computes from it
    model_builder b;
    b.input("x", {std::int64_t{4}});
    b.node("Add", {"x", "b"}, {"a"});
    b.node("Relu", {"a"}, {"b"});
    b.output("b", {std::int64_t{4}});
    kiln::onnx::import_options unchecked;
    unchecked.check = false;  // (the checker refuses it too)
    std::string why = refusal(b.bytes(), unchecked, kiln::errc::invalid_argument);
    EXPECT_NE(why.find("node 0 (Add): input 'b' is not computed before it"), std::string::npos)
        << why;
    refusal(b.bytes(), {}, kiln::errc::invalid_argument);
  }
  {  // before opset 7, Dropout without is_test = 1 is training (each element 0 or scaled by
     // 1 / (1 - 0.5)); with it, the identity
    model_builder b(6);
    b.input("x", {std::int64_t{64}});
    b.node("Dropout", {"x"}, {"y"});
    b.output("y", {std::int64_t{64}});
    std::vector<float> x(64), y(64);
    for (int i = 0; i < 64; ++i) x[static_cast<std::size_t>(i)] = 0.25f * float(i + 1);
    auto run = [&] {
      auto exe = kiln::compile(kiln::onnx::import_bytes(b.bytes()).graph);
      exe.run({kiln::tensor_ref(static_cast<const void*>(x.data()), kiln::dtype::f32, {64})},
              {kiln::tensor_ref(static_cast<void*>(y.data()), kiln::dtype::f32, {64})});
    };
    run();
    int dropped = 0;
    for (std::size_t i = 0; i < 64; ++i) {
      EXPECT_TRUE(y[i] == 0 || y[i] == 2 * x[i]) << i << ": " << y[i];
      dropped += y[i] == 0;
    }
    EXPECT_GT(dropped, 0);
    EXPECT_LT(dropped, 64);
    auto* is_test = b.g->mutable_node(0)->add_attribute();
    is_test->set_name("is_test");
    is_test->set_type(::onnx::AttributeProto::INT);
    is_test->set_i(1);
    run();
    EXPECT_EQ(y, x);
  }
  {  // an element type kiln does not have, named by an attribute
    model_builder b;
    b.input("x", {std::int64_t{4}});
    auto* to = b.node("Cast", {"x"}, {"y"})->add_attribute();
    to->set_name("to");
    to->set_type(::onnx::AttributeProto::INT);
    to->set_i(::onnx::TensorProto::COMPLEX64);
    b.output("y", {std::int64_t{4}}, ::onnx::TensorProto::COMPLEX64);
    std::string why = refusal(b.bytes(), {}, kiln::errc::unsupported);
    EXPECT_NE(why.find("element type COMPLEX64 is not kiln's"), std::string::npos) << why;
  }
  {  // not a model at all
    std::vector<std::uint8_t> junk = {0xFF, 0xFF, 0xFF, 0x01, 0x02};
    refusal(junk, {}, kiln::errc::invalid_argument);
  }
}

// If with a condition known only at the call (both branches computed, one selected), and a Loop
// unrolled at import whose body reads a value of the graph around it and emits a scan output;
// results worked out by hand (test_onnx_model.cpp runs Loops at the call).
TEST(OnnxOptions, ControlFlowResolvedAtImport) {
  {
    model_builder b;
    b.input("x", {std::int64_t{3}});
    b.input("c", {}, ::onnx::TensorProto::BOOL);
    b.floats("one", {1}, {});
    auto* n = b.node("If", {"c"}, {"y"}, "choose");
    subgraph(b, n, "then_branch", [&] {
      b.node("Add", {"x", "one"}, {"plus"});  // x and one from the graph around it
      b.output("plus", {std::int64_t{3}});
    });
    subgraph(b, n, "else_branch", [&] {
      b.node("Mul", {"x", "x"}, {"square"});
      b.output("square", {std::int64_t{3}});
    });
    b.output("y", {std::int64_t{3}});
    auto exe = kiln::compile(kiln::onnx::import_bytes(b.bytes()).graph);
    const std::vector<float> x{1, -2, 3};
    for (bool c : {true, false}) {
      std::vector<float> y(3);
      exe.run({kiln::tensor_ref(x.data(), kiln::dtype::f32, {3}),
               kiln::tensor_ref(&c, kiln::dtype::boolean, {})},
              {kiln::tensor_ref(y.data(), kiln::dtype::f32, {3})});
      EXPECT_EQ(y, c ? std::vector<float>({2, -1, 4}) : std::vector<float>({1, 4, 9})) << c;
    }
  }
  {
    model_builder b(13);
    b.input("x", {std::int64_t{2}});
    b.ints("trips", {3})->clear_dims();
    b.floats("zero", {0, 0}, {2});
    auto* n = b.node("Loop", {"trips", "", "zero"}, {"total", "steps"}, "accumulate");
    subgraph(b, n, "body", [&] {
      b.input("i", {}, ::onnx::TensorProto::INT64);
      b.input("cond_in", {}, ::onnx::TensorProto::BOOL);
      b.input("v", {std::int64_t{2}});
      b.node("Identity", {"cond_in"}, {"cond_out"});
      b.node("Add", {"v", "x"}, {"next"});
      auto* cast = b.node("Cast", {"i"}, {"fi"});
      auto* to = cast->add_attribute();
      to->set_name("to");
      to->set_type(::onnx::AttributeProto::INT);
      to->set_i(::onnx::TensorProto::FLOAT);
      b.node("Mul", {"next", "fi"}, {"scaled"});
      b.output("cond_out", {}, ::onnx::TensorProto::BOOL);
      b.output("next", {std::int64_t{2}});
      b.output("scaled", {std::int64_t{2}});
    });
    b.output("total", {std::int64_t{2}});
    b.output("steps", {std::int64_t{3}, std::int64_t{2}});
    auto exe = kiln::compile(kiln::onnx::import_bytes(b.bytes()).graph);
    const std::vector<float> x{1.5f, -2};
    std::vector<float> total(2), steps(6);
    exe.run({kiln::tensor_ref(x.data(), kiln::dtype::f32, {2})},
            {kiln::tensor_ref(total.data(), kiln::dtype::f32, {2}),
             kiln::tensor_ref(steps.data(), kiln::dtype::f32, {3, 2})});
    // v after step i is (i + 1) x; the scan output (i + 1) x i.
    EXPECT_EQ(total, (std::vector<float>{4.5f, -6}));
    EXPECT_EQ(steps, (std::vector<float>{0, 0, 3, -4, 9, -12}));
  }
}

// TfIdfVectorizer's IDF and TFIDF modes with weights (ONNX's node tests have TF only): unigrams
// and bigrams with one skip over [1, 2, 1, 3], counted by hand: 1 twice, 3 once, 9 never, (1, 2)
// once (adjacent), (1, 3) once (adjacent; the skip finds (1, 1) and (2, 3)).
TEST(OnnxOptions, TfIdfModesWeighTheCounts) {
  const std::vector<std::int64_t> x{1, 2, 1, 3};
  const std::vector<std::pair<std::string, std::vector<float>>> modes = {
      {"TF", {2, 1, 0, 1, 1}}, {"IDF", {0.5f, 2, 0, 1.5f, 3}}, {"TFIDF", {1, 2, 0, 1.5f, 3}}};
  for (const auto& [mode, want] : modes) {
    model_builder b(9);
    b.input("x", {std::int64_t{4}}, ::onnx::TensorProto::INT64);
    auto* n = b.node("TfIdfVectorizer", {"x"}, {"y"});
    auto ints = [&](const char* name, std::vector<std::int64_t> v) {
      auto* a = n->add_attribute();
      a->set_name(name);
      a->set_type(::onnx::AttributeProto::INTS);
      for (auto i : v) a->add_ints(i);
    };
    auto one = [&](const char* name, std::int64_t v) {
      auto* a = n->add_attribute();
      a->set_name(name);
      a->set_type(::onnx::AttributeProto::INT);
      a->set_i(v);
    };
    auto* m = n->add_attribute();
    m->set_name("mode");
    m->set_type(::onnx::AttributeProto::STRING);
    m->set_s(mode);
    one("min_gram_length", 1);
    one("max_gram_length", 2);
    one("max_skip_count", 1);
    ints("ngram_counts", {0, 3});
    ints("ngram_indexes", {0, 1, 2, 3, 4});
    ints("pool_int64s", {1, 3, 9, 1, 2, 1, 3});
    auto* w = n->add_attribute();
    w->set_name("weights");
    w->set_type(::onnx::AttributeProto::FLOATS);
    for (float f : {0.5f, 2.f, 4.f, 1.5f, 3.f}) w->add_floats(f);
    b.output("y", {std::int64_t{5}});
    auto exe = kiln::compile(kiln::onnx::import_bytes(b.bytes()).graph);
    std::vector<float> y(5);
    exe.run({kiln::tensor_ref(x.data(), kiln::dtype::i64, {4})},
            {kiln::tensor_ref(y.data(), kiln::dtype::f32, {5})});
    EXPECT_EQ(y, want) << mode;
  }
}

// Opsets before 7 are read with their ops' older semantics: opset 6's Add broadcasts only with
// broadcast = 1, B lined up with A from `axis`.
TEST(OnnxOptions, OpsetsBeforeSevenAreReadAsTheyWere) {
  model_builder b(6);  // Add with opset 6's broadcast attribute
  b.input("x", {std::int64_t{2}, std::int64_t{3}});
  b.floats("bias", {1, 2, 3}, {3});
  auto* n = b.node("Add", {"x", "bias"}, {"y"});
  auto* a = n->add_attribute();
  a->set_name("broadcast");
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(1);
  b.output("y", {std::int64_t{2}, std::int64_t{3}});
  auto m = kiln::onnx::import_bytes(b.bytes());
  EXPECT_EQ(m.info.opset, 6);
  auto exe = kiln::compile(std::move(m.graph));
  float x[6] = {0, 0, 0, 10, 10, 10}, y[6] = {};
  exe.run({kiln::tensor_ref(x, kiln::dtype::f32, {2, 3})},
          {kiln::tensor_ref(y, kiln::dtype::f32, {2, 3})});
  EXPECT_EQ(std::vector<float>(y, y + 6), (std::vector<float>{1, 2, 3, 11, 12, 13}));
  // With axis 0, B [2] lines up with A's first axis.
  model_builder c(6);
  c.input("x", {std::int64_t{2}, std::int64_t{3}});
  c.floats("rows", {100, 200}, {2});
  auto* add = c.node("Add", {"x", "rows"}, {"y"});
  for (auto [name, v] : {std::pair{"broadcast", 1}, {"axis", 0}}) {
    auto* at = add->add_attribute();
    at->set_name(name);
    at->set_type(::onnx::AttributeProto::INT);
    at->set_i(v);
  }
  c.output("y", {std::int64_t{2}, std::int64_t{3}});
  auto rows = kiln::compile(kiln::onnx::import_bytes(c.bytes()).graph);
  rows.run({kiln::tensor_ref(x, kiln::dtype::f32, {2, 3})},
           {kiln::tensor_ref(y, kiln::dtype::f32, {2, 3})});
  EXPECT_EQ(std::vector<float>(y, y + 6), (std::vector<float>{100, 100, 100, 210, 210, 210}));
}

}  // namespace

// A chain of 10,000 nodes imports, compiles and computes what it says (no recursion on depth).
TEST(OnnxOptions, DeepChainsImportAndRun) {
  model_builder b;
  b.input("x", {std::int64_t{8}});
  b.floats("one", {1}, {});
  std::string at = "x";
  for (int k = 0; k < 10000; ++k) {
    std::string next = std::to_string(k);
    next += 'v';  // (appended: "v" + … trips GCC 12's -Wrestrict at -O3)
    b.node(k % 2 ? "Add" : "Sub", {at, "one"}, {next});
    at = next;
  }
  b.node("Identity", {at}, {"y"});
  b.output("y", {std::int64_t{8}});
  auto exe = kiln::compile(kiln::onnx::import_bytes(b.bytes()).graph);
  float x[8] = {0, 1, 2, 3, -4, 5.5f, 6, 7}, y[8] = {};
  exe.run({kiln::tensor_ref(x, kiln::dtype::f32, {8})},
          {kiln::tensor_ref(y, kiln::dtype::f32, {8})}, kiln::device::cpu());
  for (int i = 0; i < 8; ++i) EXPECT_EQ(y[i], x[i]) << i;  // 5,000 subtractions, 5,000 additions
}

#if defined(KILN_IMPORT_ONNX_PATH) && defined(KILN_RUN_PATH)
// kiln-import-onnx writes a module that kiln-run and executable::load run without ONNX's library;
// kiln-run given the model runs it through the importer.
// kiln-run on a model with a sequence input: --sequence gives its length (the importer's
// import_options::sequence_lengths), its tensors are inputs NAME.0, NAME.1, ... and the output
// sequence's tensors results NAME.0, ... (ONNX's SequenceInsert at the back).
TEST(OnnxOptions, KilnRunTakesASequencesLength) {
  const fs::path model =
      fs::path(KILN_ONNX_DATA_DIR) / "node" / "test_sequence_insert_at_back" / "model.onnx";
  const fs::path folder = fs::temp_directory_path() / ("kiln_seq_" + std::to_string(::getpid()));
  fs::create_directories(folder);
  // (The model declares its sequence's tensors without a shape: --shape gives each its extents.)
  std::string cmd = std::string(KILN_RUN_PATH) + " " + model.string() +
                    " --sequence sequence=2 --shape sequence.0=3 --shape sequence.1=3";
  const std::vector<std::vector<std::int64_t>> given = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}};
  for (std::size_t k = 0; k < given.size(); ++k) {
    const std::string name = k < 2 ? "sequence." + std::to_string(k) : "tensor";
    const fs::path npy = folder / (name + ".npy");
    kiln::runtime::write_npy(npy.string(), kiln::dtype::i64, kiln::shape{3}, given[k].data());
    cmd += " --input " + name + "=" + npy.string();
  }
  cmd += " --output output_sequence.2=" + (folder / "last.npy").string() + " > /dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  kiln::runtime::npy_array last = kiln::runtime::read_npy((folder / "last.npy").string());
  ASSERT_EQ(last.type, kiln::dtype::i64);
  ASSERT_EQ(last.dims, kiln::shape{3});
  std::vector<std::int64_t> got(3);
  std::memcpy(got.data(), last.bytes.data(), 24);
  EXPECT_EQ(got, given[2]);
  // Without --sequence the importer names the option it needs; kiln-run ends with 1.
  EXPECT_EQ(WEXITSTATUS(std::system(
                (std::string(KILN_RUN_PATH) + " " + model.string() + " > /dev/null 2>&1").c_str())),
            1);
  fs::remove_all(folder);
}

TEST(OnnxOptions, ImportToolWritesAModuleThatRunsAnywhere) {
  const char* root = KILN_ONNX_DATA_DIR;
  const fs::path test = fs::path(root) / "node" / "test_gemm_all_attributes";
  const fs::path module =
      fs::temp_directory_path() / ("kiln_gemm_" + std::to_string(::getpid()) + ".kiln");
  std::string cmd = std::string(KILN_IMPORT_ONNX_PATH) + " " + (test / "model.onnx").string() +
                    " -o " + module.string() + " > /dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::string run = std::string(KILN_RUN_PATH) + " " + module.string() + " --signature > /dev/null";
  EXPECT_EQ(std::system(run.c_str()), 0) << run;
  kiln::executable exe = kiln::module::load(module.string());
  std::vector<kiln::onnx::tensor_data> in;
  for (int i = 0; i < 3; ++i)
    in.push_back(
        kiln::onnx::read_tensor(test / "test_data_set_0" / ("input_" + std::to_string(i) + ".pb")));
  auto want = kiln::onnx::read_tensor(test / "test_data_set_0" / "output_0.pb");
  std::vector<float> got(want.bytes.size() / 4);
  std::vector<kiln::tensor_ref> args;
  for (auto& t : in) args.emplace_back(static_cast<const void*>(t.bytes.data()), t.type, t.dims);
  std::vector<kiln::tensor_ref> results = {kiln::tensor_ref(got.data(), want.type, want.dims)};
  exe.run(args, results);
  const auto* w = reinterpret_cast<const float*>(want.bytes.data());
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], w[i], 1e-7 + 1e-3 * std::fabs(w[i])) << i;
  // kiln-run takes the model itself (through kiln-import-onnx), its inputs as .npy files.
  const fs::path folder = fs::temp_directory_path() / ("kiln_gemm_" + std::to_string(::getpid()));
  fs::create_directories(folder);
  std::string direct = std::string(KILN_RUN_PATH) + " " + (test / "model.onnx").string();
  for (int i = 0; i < 3; ++i) {
    const fs::path npy = folder / ("in" + std::to_string(i) + ".npy");
    kiln::runtime::write_npy(npy.string(), in[i].type, in[i].dims, in[i].bytes.data());
    direct += " --input " + std::string(1, "abc"[i]) + "=" + npy.string();
  }
  direct += " --output y=" + (folder / "y.npy").string() + " > /dev/null 2>&1";
  ASSERT_EQ(std::system(direct.c_str()), 0) << direct;
  kiln::runtime::npy_array y = kiln::runtime::read_npy((folder / "y.npy").string());
  ASSERT_EQ(y.dims, want.dims);
  const auto* yv = reinterpret_cast<const float*>(y.bytes.data());
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(yv[i], w[i], 1e-7 + 1e-3 * std::fabs(w[i])) << i;
  // --save keeps the module it imported (with no inputs given, it only saves); it runs alone.
  const fs::path saved = folder / "saved.kiln";
  const std::string save = std::string(KILN_RUN_PATH) + " " + (test / "model.onnx").string() +
                           " --save " + saved.string() + " > /dev/null 2>&1";
  ASSERT_EQ(std::system(save.c_str()), 0) << save;
  std::vector<float> again(got.size());
  const std::vector<kiln::tensor_ref> into = {kiln::tensor_ref(again.data(), want.type, want.dims)};
  kiln::module::load(saved.string()).run(args, into);
  EXPECT_EQ(again, got);
  // --dim applies to ONNX models only; a model the importer refuses ends kiln-run with 1.
  EXPECT_EQ(
      WEXITSTATUS(std::system(
          (std::string(KILN_RUN_PATH) + " " + module.string() + " --dim n=1 2>/dev/null").c_str())),
      2);
  EXPECT_EQ(WEXITSTATUS(std::system(
                (std::string(KILN_RUN_PATH) + " " +
                 (fs::path(root) / "node" / "test_unique_not_sorted_without_axis" / "model.onnx")
                     .string() +
                 " > /dev/null 2>&1")
                    .c_str())),
            1);
  // --value gives that model's input at import, where kiln computes Unique: kiln-run then runs
  // the module with no input.
  {
    const fs::path unique = fs::path(root) / "node" / "test_unique_not_sorted_without_axis";
    const auto x = kiln::onnx::read_tensor(unique / "test_data_set_0" / "input_0.pb");
    const auto y_want = kiln::onnx::read_tensor(unique / "test_data_set_0" / "output_0.pb");
    const fs::path x_npy = folder / "x.npy", y_npy = folder / "unique_y.npy";
    kiln::runtime::write_npy(x_npy.string(), x.type, x.dims, x.bytes.data());
    const std::string with_value =
        std::string(KILN_RUN_PATH) + " " + (unique / "model.onnx").string() +
        " --value X=" + x_npy.string() + " --output Y=" + y_npy.string() + " > /dev/null 2>&1";
    ASSERT_EQ(std::system(with_value.c_str()), 0) << with_value;
    kiln::runtime::npy_array y = kiln::runtime::read_npy(y_npy.string());
    EXPECT_EQ(y.dims, y_want.dims);
    EXPECT_EQ(y.bytes, y_want.bytes);
  }
  fs::remove_all(folder);
  // A usage mistake exits 2 (an extent that is not a number among them), a model kiln refuses 1.
  EXPECT_EQ(WEXITSTATUS(std::system((std::string(KILN_IMPORT_ONNX_PATH) + " " +
                                     (test / "model.onnx").string() + " -o " + module.string() +
                                     " --shape a=2xq 2>/dev/null")
                                        .c_str())),
            2);
  EXPECT_EQ(WEXITSTATUS(std::system((std::string(KILN_IMPORT_ONNX_PATH) + " 2>/dev/null").c_str())),
            2);
  std::string refused =
      std::string(KILN_IMPORT_ONNX_PATH) + " " +
      (fs::path(root) / "node" / "test_unique_not_sorted_without_axis" / "model.onnx").string() +
      " -o " + module.string() + " 2>/dev/null";
  EXPECT_EQ(WEXITSTATUS(std::system(refused.c_str())), 1);
  fs::remove(module);
}
#endif

#ifdef KILN_ONNX_DATA_DIR
// NonZero and Unique (with an axis too) on tensors given at import: ONNX's own node models with
// every input bound through input_values, their outputs compared exactly with ONNX's data.
TEST(OnnxOptions, DataSizedOpsOnValuesKnownAtImport) {
  for (const char* name :
       {"test_nonzero_example", "test_unique_sorted_with_axis", "test_unique_sorted_with_axis_3d",
        "test_unique_sorted_with_negative_axis"}) {
    SCOPED_TRACE(name);
    const fs::path test = fs::path(KILN_ONNX_DATA_DIR) / "node" / name;
    ::onnx::ModelProto model;
    std::ifstream in(test / "model.onnx", std::ios::binary);
    ASSERT_TRUE(model.ParseFromIstream(&in));
    kiln::onnx::import_options opt;
    for (int i = 0; i < model.graph().input_size(); ++i)
      opt.input_values[model.graph().input(i).name()] = kiln::onnx::read_tensor(
          test / "test_data_set_0" / ("input_" + std::to_string(i) + ".pb"));
    auto m = kiln::onnx::import(test / "model.onnx", opt);
    EXPECT_TRUE(m.graph.input_names().empty());
    auto exe = kiln::compile(std::move(m.graph));
    std::vector<kiln::onnx::tensor_data> want, got;
    std::vector<kiln::tensor_ref> results;
    for (int o = 0; o < model.graph().output_size(); ++o) {
      want.push_back(kiln::onnx::read_tensor(test / "test_data_set_0" /
                                             ("output_" + std::to_string(o) + ".pb")));
      got.push_back({want.back().type, want.back().dims,
                     std::vector<unsigned char>(want.back().bytes.size(), 0xCD)});
    }
    for (auto& t : got) results.emplace_back(static_cast<void*>(t.bytes.data()), t.type, t.dims);
    exe.run({}, results);
    for (std::size_t o = 0; o < got.size(); ++o) EXPECT_EQ(got[o].bytes, want[o].bytes) << o;
  }
}

TEST(OnnxOptions, TrainingDropoutKeepsWhereTheSeedsDrawReachesTheRatio) {
  // ONNX's own model (seed 0, an int; ratio and training_mode given at import); its expected
  // values are numpy's draws, so the mask is checked against kiln's generator's reference.
  const fs::path test = fs::path(KILN_ONNX_DATA_DIR) / "node" / "test_training_dropout_mask";
  kiln::onnx::import_options opt;
  const auto r = kiln::onnx::read_tensor(test / "test_data_set_0" / "input_1.pb");
  opt.input_values["r"] = r;
  opt.input_values["t"] = kiln::onnx::read_tensor(test / "test_data_set_0" / "input_2.pb");
  auto m = kiln::onnx::import(test / "model.onnx", opt);
  auto exe = kiln::compile(std::move(m.graph));
  auto x = kiln::onnx::read_tensor(test / "test_data_set_0" / "input_0.pb");
  float ratio;
  std::memcpy(&ratio, r.bytes.data(), sizeof ratio);
  const std::size_t n = x.bytes.size() / sizeof(float);
  std::vector<float> xs(n), y(n, -1.f);
  std::memcpy(xs.data(), x.bytes.data(), x.bytes.size());
  std::unique_ptr<bool[]> z(new bool[n]);
  exe.run({kiln::tensor_ref(static_cast<const void*>(xs.data()), kiln::dtype::f32, x.dims)},
          {kiln::tensor_ref(static_cast<void*>(y.data()), kiln::dtype::f32, x.dims),
           kiln::tensor_ref(static_cast<void*>(z.get()), kiln::dtype::boolean, x.dims)});
  const float scale = static_cast<float>(1.0 / (1.0 - double(ratio)));
  std::size_t kept = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const bool keep = ref::uniform(0, static_cast<std::uint32_t>(i)) >= ratio;
    kept += keep;
    ASSERT_EQ(z[i], keep) << i;
    ASSERT_EQ(y[i], keep ? xs[i] * scale : 0.f) << i;
  }
  EXPECT_GT(kept, 0u);
  EXPECT_LT(kept, n);
}
#endif
