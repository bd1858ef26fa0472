// kiln::onnx::model on models cut where a node's result size depends on values known only at the
// call (NonZero, Unique, Compress, NonMaxSuppression of computed values): graphs before and after
// each cut, values carried across it, the counts as run-time sizes of what follows, and the
// call's errors. Results are checked against values worked out here.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include <kiln/onnx.hpp>

#include "model_builder.hpp"

namespace {

using kiln::onnx::tensor_data;
using kiln_test::int_attr;
using kiln_test::model_builder;

template <class T>
tensor_data tensor(kiln::dtype t, kiln::shape dims, const std::vector<T>& v) {
  tensor_data d{t, dims, std::vector<unsigned char>(v.size() * sizeof(T))};
  if (!v.empty()) std::memcpy(d.bytes.data(), v.data(), d.bytes.size());
  return d;
}
tensor_data f32(kiln::shape dims, const std::vector<float>& v) {
  return tensor(kiln::dtype::f32, dims, v);
}

template <class T>
std::vector<T> elements(const tensor_data& t) {
  std::vector<T> v(t.bytes.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  return v;
}

std::vector<tensor_data> run(const kiln::onnx::model& m, const std::vector<tensor_data>& args) {
  std::vector<kiln::tensor_ref> refs;
  for (const auto& a : args)
    refs.emplace_back(static_cast<const void*>(a.bytes.data()), a.type, a.dims);
  return m.run(refs);
}

kiln::onnx::model load(const model_builder& b) {
  return kiln::onnx::model(kiln::onnx::import_bytes(b.bytes()));
}

// y = x[i] + relu(x)[i] for each i where relu(x) is not 0: a graph, NonZero on the host, a graph
// reading the model's input and a value of the first graph.
TEST(CutModels, NonZeroOfAComputedValueFeedsTheGraphAfterIt) {
  model_builder b;
  b.input("x", {std::string("n")});
  b.ints("first_axis", {0});
  b.node("Relu", {"x"}, {"r"});
  b.node("NonZero", {"r"}, {"nz"});
  b.node("Squeeze", {"nz", "first_axis"}, {"at"});
  b.node("Gather", {"x", "at"}, {"picked"});
  b.node("Gather", {"r", "at"}, {"again"});
  b.node("Add", {"picked", "again"}, {"y"});
  b.output("y", {std::string("k")});
  b.output("nz", {std::int64_t{1}, std::string("k")}, ::onnx::TensorProto::INT64);
  b.output("r", {std::string("n")});
  const kiln::onnx::model m = load(b);
  EXPECT_EQ(m.executables().size(), 2u);
  EXPECT_EQ(m.input_names(), std::vector<std::string>{"x"});
  EXPECT_EQ(m.output_names(), (std::vector<std::string>{"y", "nz", "r"}));
  struct call {
    std::vector<float> x, y;
    std::vector<std::int64_t> at;
  };
  for (const call& c : {call{{-1, 2, 0, 3.5f, -4, 1}, {4, 7, 2}, {1, 3, 5}}, call{{-1, -2}, {}, {}},
                        call{{5}, {10}, {0}}}) {
    const auto n = static_cast<std::int64_t>(c.x.size()), k = static_cast<std::int64_t>(c.y.size());
    auto out = run(m, {f32(kiln::shape{n}, c.x)});
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(out[0].dims, kiln::shape{k});
    EXPECT_EQ(elements<float>(out[0]), c.y);
    EXPECT_EQ(out[1].type, kiln::dtype::i64);
    EXPECT_EQ(out[1].dims, (kiln::shape{1, k}));
    EXPECT_EQ(elements<std::int64_t>(out[1]), c.at);
    std::vector<float> r;
    for (float v : c.x) r.push_back(v > 0 ? v : 0);
    EXPECT_EQ(elements<float>(out[2]), r);
  }
}

// Unique's values and counts share one run-time size (their product needs no broadcast); its
// inverse indices gather the input back.
TEST(CutModels, UniqueResultsShareTheirCount) {
  model_builder b;
  b.input("x", {std::int64_t{6}});
  b.node("Abs", {"x"}, {"a"});
  b.node("Unique", {"a"}, {"u", "first", "inverse", "counts"});
  int_attr(b.node("Cast", {"counts"}, {"counts_f"}), "to", ::onnx::TensorProto::FLOAT);
  b.node("Mul", {"u", "counts_f"}, {"weighted"});
  b.node("Gather", {"u", "inverse"}, {"back"});
  b.output("weighted", {std::string("u")});
  b.output("back", {std::int64_t{6}});
  b.output("first", {std::string("u")}, ::onnx::TensorProto::INT64);
  const kiln::onnx::model m = load(b);
  auto out = run(m, {f32(kiln::shape{6}, {3, -1, 1, 2, -3, 3})});
  ASSERT_EQ(out.size(), 3u);
  // |x| = 3 1 1 2 3 3: sorted distinct values 1 2 3, counted 2 1 3, first at 1 3 0.
  EXPECT_EQ(elements<float>(out[0]), (std::vector<float>{2, 2, 9}));
  EXPECT_EQ(elements<float>(out[1]), (std::vector<float>{3, 1, 1, 2, 3, 3}));
  EXPECT_EQ(elements<std::int64_t>(out[2]), (std::vector<std::int64_t>{1, 3, 0}));
}

// Rows whose sum is positive, kept by a condition computed in the graph before the cut.
TEST(CutModels, CompressByAComputedCondition) {
  model_builder b;
  b.input("x", {std::string("rows"), std::int64_t{2}});
  b.ints("second_axis", {1});
  b.floats("zero", {0}, {});
  b.floats("two", {2}, {});
  int_attr(b.node("ReduceSum", {"x", "second_axis"}, {"sums"}), "keepdims", 0);
  b.node("Greater", {"sums", "zero"}, {"positive"});
  int_attr(b.node("Compress", {"x", "positive"}, {"kept"}), "axis", 0);
  b.node("Mul", {"kept", "two"}, {"y"});
  b.output("y", {std::string("k"), std::int64_t{2}});
  const kiln::onnx::model m = load(b);
  auto out = run(m, {f32(kiln::shape{4, 2}, {1, 2, -3, 1, 0, 0, 4, -1})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].dims, (kiln::shape{2, 2}));
  EXPECT_EQ(elements<float>(out[0]), (std::vector<float>{2, 4, 8, -2}));
  out = run(m, {f32(kiln::shape{1, 2}, {-1, 0})});
  EXPECT_EQ(out[0].dims, (kiln::shape{0, 2}));
}

// Scores computed by the graph before NonMaxSuppression; the boxes it keeps gathered after it.
// Box 1 overlaps box 0 (IoU 0.9 / 1.1 = 0.82 > 0.5) and scores lower: it is suppressed.
TEST(CutModels, NonMaxSuppressionBetweenTwoGraphs) {
  model_builder b;
  b.input("boxes", {std::int64_t{1}, std::int64_t{3}, std::int64_t{4}});
  b.input("logits", {std::int64_t{1}, std::int64_t{1}, std::int64_t{3}});
  b.scalar_int("limit", 3);
  b.floats("iou", {0.5f}, {});
  b.scalar_int("box_column", 2);
  b.ints("first_axis", {0});
  b.node("Sigmoid", {"logits"}, {"scores"});
  b.node("NonMaxSuppression", {"boxes", "scores", "limit", "iou"}, {"selected"});
  int_attr(b.node("Gather", {"selected", "box_column"}, {"which"}), "axis", 1);
  b.node("Squeeze", {"boxes", "first_axis"}, {"all"});
  b.node("Gather", {"all", "which"}, {"picked"});
  b.output("selected", {std::string("k"), std::int64_t{3}}, ::onnx::TensorProto::INT64);
  b.output("picked", {std::string("k"), std::int64_t{4}});
  const kiln::onnx::model m = load(b);
  const std::vector<float> boxes{0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 2, 1, 3};
  auto out = run(m, {f32(kiln::shape{1, 3, 4}, boxes), f32(kiln::shape{1, 1, 3}, {2, 1, 0})});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(elements<std::int64_t>(out[0]), (std::vector<std::int64_t>{0, 0, 0, 0, 0, 2}));
  EXPECT_EQ(elements<float>(out[1]), (std::vector<float>{0, 0, 1, 1, 0, 2, 1, 3}));
  // Box 2 scoring highest comes first and overlaps neither; box 1 is still under box 0.
  out = run(m, {f32(kiln::shape{1, 3, 4}, boxes), f32(kiln::shape{1, 1, 3}, {0, -1, 3})});
  EXPECT_EQ(elements<std::int64_t>(out[0]), (std::vector<std::int64_t>{0, 0, 2, 0, 0, 0}));
}

TEST(CutModels, CallErrorsNameTheArgument) {
  model_builder b;
  b.input("x", {std::int64_t{4}}, ::onnx::TensorProto::INT32);
  b.node("NonZero", {"x"}, {"nz"});
  b.output("nz", {std::int64_t{1}, std::string("k")}, ::onnx::TensorProto::INT64);
  const kiln::onnx::model m = load(b);
  EXPECT_TRUE(m.executables().empty());  // NonZero alone: nothing for a graph to compute
  auto out = run(m, {tensor<std::int32_t>(kiln::dtype::i32, kiln::shape{4}, {0, 7, 0, -2})});
  EXPECT_EQ(elements<std::int64_t>(out[0]), (std::vector<std::int64_t>{1, 3}));
  try {
    run(m, {f32(kiln::shape{4}, {0, 1, 0, 1})});
    ADD_FAILURE() << "an f32 argument for an i32 input ran";
  } catch (const kiln::error& e) {
    EXPECT_EQ(e.code(), kiln::errc::shape_mismatch);
    EXPECT_NE(std::string(e.what()).find("argument 0 'x' is f32 [4], the model takes i32 [4]"),
              std::string::npos)
        << e.what();
  }
  try {
    run(m, {});
    ADD_FAILURE() << "a call without its argument ran";
  } catch (const kiln::error& e) {
    EXPECT_NE(std::string(e.what()).find("takes 1 arguments, given 0"), std::string::npos)
        << e.what();
  }
}

}  // namespace
