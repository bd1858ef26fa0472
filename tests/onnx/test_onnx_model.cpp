// kiln::onnx::model on models cut where a node's result size depends on values known only at the
// call (NonZero, Unique, Compress, NonMaxSuppression of computed values): graphs before and after
// each cut, values carried across it, the counts as run-time sizes of what follows, and the
// call's errors. Results are checked against values worked out here.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <vector>

#include <kiln/onnx.hpp>

#include "model_builder.hpp"

namespace {

using kiln::onnx::tensor_data;
using kiln_test::int_attr;
using kiln_test::model_builder;
using kiln_test::subgraph;

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
  // Equal scores go by index (box 1 before box 2), a NaN score after every number: box 0 comes
  // last and is suppressed under box 1.
  out = run(m, {f32(kiln::shape{1, 3, 4}, boxes),
                f32(kiln::shape{1, 1, 3}, {std::numeric_limits<float>::quiet_NaN(), 1, 1})});
  EXPECT_EQ(elements<std::int64_t>(out[0]), (std::vector<std::int64_t>{0, 0, 1, 0, 0, 2}));
}

// Doubles x until its sum reaches `limit` (a model input the body reads around it): the first
// condition computed before the Loop, the body's by the body; the scan outputs' run-time length
// summed after it. Iterations worked out by hand.
TEST(CutModels, WhileLoopOfComputedConditionsRunsAtTheCall) {
  model_builder b(13);
  b.input("x", {std::int64_t{4}});
  b.input("limit", {});
  b.floats("two", {2}, {});
  b.floats("one", {1}, {});
  int_attr(b.node("ReduceSum", {"x"}, {"s0"}), "keepdims", 0);
  b.node("Less", {"s0", "limit"}, {"go"});
  auto* loop = b.node("Loop", {"", "go", "x"}, {"final", "sums", "iterations"}, "doubling");
  subgraph(b, loop, "body", [&] {
    b.input("i", {}, ::onnx::TensorProto::INT64);
    b.input("cond_in", {}, ::onnx::TensorProto::BOOL);
    b.input("v", {std::int64_t{4}});
    b.node("Mul", {"v", "two"}, {"y"});
    int_attr(b.node("ReduceSum", {"y"}, {"s"}), "keepdims", 0);
    b.node("Less", {"s", "limit"}, {"cond_out"});
    b.node("Identity", {"i"}, {"i_out"});
    b.output("cond_out", {}, ::onnx::TensorProto::BOOL);
    b.output("y", {std::int64_t{4}});
    b.output("s", {});
    b.output("i_out", {}, ::onnx::TensorProto::INT64);
  });
  int_attr(b.node("ReduceSum", {"sums"}, {"total"}), "keepdims", 0);
  b.node("Add", {"final", "one"}, {"shifted"});
  b.output("shifted", {std::int64_t{4}});
  b.output("total", {});
  b.output("iterations", {std::string("k")}, ::onnx::TensorProto::INT64);
  const kiln::onnx::model m = load(b);
  struct call {
    float limit;
    std::vector<float> shifted;
    float total;
    std::vector<std::int64_t> iterations;
  };
  // x sums to 10; each iteration doubles it and goes on while the new sum is below the limit.
  for (const call& c : {call{100, {17, 33, 49, 65}, 20 + 40 + 80 + 160, {0, 1, 2, 3}},
                        call{30, {5, 9, 13, 17}, 20 + 40, {0, 1}}, call{5, {2, 3, 4, 5}, 0, {}}}) {
    SCOPED_TRACE(c.limit);
    auto out = run(m, {f32(kiln::shape{4}, {1, 2, 3, 4}), f32(kiln::shape{}, {c.limit})});
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(elements<float>(out[0]), c.shifted);
    EXPECT_EQ(elements<float>(out[1]), std::vector<float>{c.total});
    EXPECT_EQ(out[2].dims, kiln::shape{static_cast<std::int64_t>(c.iterations.size())});
    EXPECT_EQ(elements<std::int64_t>(out[2]), c.iterations);
  }
}

// A trip count given at the call, and one known at import beyond what kiln unrolls (4,096):
// both loops run their bodies at the call; acc + i after each step, stacked.
TEST(CutModels, LoopsOfRunTimeOrLongTripCountsRunAtTheCall) {
  auto counting = [](bool given) {
    model_builder b(13);
    if (given)
      b.input("trips", {}, ::onnx::TensorProto::INT64);
    else
      b.scalar_int("trips", 5000);
    b.input("start", {std::int64_t{1}});
    auto* loop = b.node("Loop", {"trips", "", "start"}, {"acc", "steps"});
    subgraph(b, loop, "body", [&] {
      b.input("i", {}, ::onnx::TensorProto::INT64);
      b.input("cond_in", {}, ::onnx::TensorProto::BOOL);
      b.input("a", {std::int64_t{1}});
      int_attr(b.node("Cast", {"i"}, {"fi"}), "to", ::onnx::TensorProto::FLOAT);
      b.node("Add", {"a", "fi"}, {"next"});
      b.node("Identity", {"cond_in"}, {"cond_out"});
      b.node("Identity", {"next"}, {"row"});
      b.output("cond_out", {}, ::onnx::TensorProto::BOOL);
      b.output("next", {std::int64_t{1}});
      b.output("row", {std::int64_t{1}});
    });
    b.output("acc", {std::int64_t{1}});
    b.output("steps", {std::string("k"), std::int64_t{1}});
    return load(b);
  };
  const kiln::onnx::model given = counting(true);
  auto out = run(given, {tensor<std::int64_t>(kiln::dtype::i64, kiln::shape{}, {5}),
                         f32(kiln::shape{1}, {2})});
  EXPECT_EQ(elements<float>(out[0]), std::vector<float>{12});
  EXPECT_EQ(out[1].dims, (kiln::shape{5, 1}));
  EXPECT_EQ(elements<float>(out[1]), (std::vector<float>{2, 3, 5, 8, 12}));
  out = run(given,
            {tensor<std::int64_t>(kiln::dtype::i64, kiln::shape{}, {0}), f32(kiln::shape{1}, {2})});
  EXPECT_EQ(elements<float>(out[0]), std::vector<float>{2});
  EXPECT_EQ(out[1].dims, (kiln::shape{0, 1}));
  const kiln::onnx::model long_loop = counting(false);
  out = run(long_loop, {f32(kiln::shape{1}, {0})});
  EXPECT_EQ(elements<float>(out[0]), std::vector<float>{4999.0f * 5000 / 2});
  ASSERT_EQ(out[1].dims, (kiln::shape{5000, 1}));
  EXPECT_EQ(elements<float>(out[1])[4], 10);
}

// A running sum over a sequence of run-time length: a Scan whose body reads the model's input w
// around it, its per-step output stacked along axis 1, summed after it. Worked out by hand.
TEST(CutModels, ScanOfARunTimeLengthRunsAtTheCall) {
  model_builder b(13);
  b.input("x", {std::string("seq"), std::int64_t{2}});
  b.input("w", {std::int64_t{2}});
  b.floats("zero", {0, 0}, {2});
  auto* scan = b.node("Scan", {"zero", "x"}, {"last", "ys"}, "running_sum");
  int_attr(scan, "num_scan_inputs", 1);
  auto* axes = scan->add_attribute();
  axes->set_name("scan_output_axes");
  axes->set_type(::onnx::AttributeProto::INTS);
  axes->add_ints(1);
  subgraph(b, scan, "body", [&] {
    b.input("sum_in", {std::int64_t{2}});
    b.input("x_t", {std::int64_t{2}});
    b.node("Add", {"sum_in", "x_t"}, {"sum_out"});
    b.node("Mul", {"sum_out", "w"}, {"y_t"});
    b.output("sum_out", {std::int64_t{2}});
    b.output("y_t", {std::int64_t{2}});
  });
  int_attr(b.node("ReduceSum", {"ys"}, {"total"}), "keepdims", 0);
  b.output("last", {std::int64_t{2}});
  b.output("ys", {std::int64_t{2}, std::string("seq")});
  b.output("total", {});
  const kiln::onnx::model m = load(b);
  // Running sums (1, 2), (4, 6), (9, 12); times w = (1, 10) and stacked along axis 1.
  auto out = run(m, {f32(kiln::shape{3, 2}, {1, 2, 3, 4, 5, 6}), f32(kiln::shape{2}, {1, 10})});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(elements<float>(out[0]), (std::vector<float>{9, 12}));
  EXPECT_EQ(out[1].dims, (kiln::shape{2, 3}));
  EXPECT_EQ(elements<float>(out[1]), (std::vector<float>{1, 4, 9, 20, 60, 120}));
  EXPECT_EQ(elements<float>(out[2]), std::vector<float>{214});
  out = run(m, {f32(kiln::shape{0, 2}, {}), f32(kiln::shape{2}, {1, 10})});
  EXPECT_EQ(elements<float>(out[0]), (std::vector<float>{0, 0}));
  EXPECT_EQ(out[1].dims, (kiln::shape{2, 0}));
  EXPECT_EQ(elements<float>(out[2]), std::vector<float>{0});
}

// An If on a condition given at the call whose branches differ in extents (x's first half, or x
// twice): only the branch taken runs, and the graph after it takes its extents.
TEST(CutModels, IfWhoseBranchesDifferInExtentsRunsAtTheCall) {
  model_builder b(13);
  b.input("x", {std::int64_t{4}});
  b.input("c", {}, ::onnx::TensorProto::BOOL);
  b.ints("start", {0});
  b.ints("half", {2});
  b.floats("two", {2}, {});
  auto* choice = b.node("If", {"c"}, {"picked"}, "choose");
  subgraph(b, choice, "then_branch", [&] {
    b.node("Slice", {"x", "start", "half"}, {"front"});
    b.output("front", {std::int64_t{2}});
  });
  subgraph(b, choice, "else_branch", [&] {
    int_attr(b.node("Concat", {"x", "x"}, {"twice"}), "axis", 0);
    b.output("twice", {std::int64_t{8}});
  });
  b.node("Mul", {"picked", "two"}, {"y"});
  int_attr(b.node("ReduceSum", {"y"}, {"total"}), "keepdims", 0);
  b.output("y", {std::string("k")});
  b.output("total", {});
  const kiln::onnx::model m = load(b);
  const tensor_data x = f32(kiln::shape{4}, {1, 2, 3, 4});
  for (bool c : {true, false}) {
    SCOPED_TRACE(c);
    auto out = run(m, {x, tensor<std::uint8_t>(kiln::dtype::boolean, kiln::shape{}, {c})});
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(elements<float>(out[0]),
              (c ? std::vector<float>{2, 4} : std::vector<float>{2, 4, 6, 8, 2, 4, 6, 8}));
    EXPECT_EQ(elements<float>(out[1]), std::vector<float>{c ? 6.0f : 40.0f});
  }
}

// A list built by a Loop at the call as exporters write one (SequenceEmpty, SequenceInsert in the
// body), read after it by ConcatFromSequence, SequenceLength and SequenceAt: x doubled n times,
// each step's value appended. Worked out by hand.
TEST(CutModels, SequenceOfRunTimeLengthBuiltByALoop) {
  model_builder b(13);
  b.input("n", {}, ::onnx::TensorProto::INT64);
  b.input("x", {std::int64_t{3}});
  b.floats("two", {2}, {});
  b.scalar_int("last", -1);
  b.node("SequenceEmpty", {}, {"empty"});
  auto* loop = b.node("Loop", {"n", "", "x", "empty"}, {"v", "steps"}, "collect");
  subgraph(b, loop, "body", [&] {
    b.input("i", {}, ::onnx::TensorProto::INT64);
    b.input("cond_in", {}, ::onnx::TensorProto::BOOL);
    b.input("v_in", {std::int64_t{3}});
    auto* seq = b.g->add_input();
    seq->set_name("seq_in");
    seq->mutable_type()
        ->mutable_sequence_type()
        ->mutable_elem_type()
        ->mutable_tensor_type()
        ->set_elem_type(::onnx::TensorProto::FLOAT);
    b.node("Identity", {"cond_in"}, {"cond_out"});
    b.node("Mul", {"v_in", "two"}, {"v_out"});
    b.node("SequenceInsert", {"seq_in", "v_out"}, {"seq_out"});
    b.output("cond_out", {}, ::onnx::TensorProto::BOOL);
    b.output("v_out", {std::int64_t{3}});
    auto* out = b.g->add_output();
    out->set_name("seq_out");
    out->mutable_type()->CopyFrom(seq->type());
  });
  auto* stack = b.node("ConcatFromSequence", {"steps"}, {"stacked"});
  int_attr(stack, "axis", 0);
  int_attr(stack, "new_axis", 1);
  b.node("SequenceLength", {"steps"}, {"count"});
  b.node("SequenceAt", {"steps", "last"}, {"latest"});
  b.output("stacked", {std::string("k"), std::int64_t{3}});
  b.output("count", {}, ::onnx::TensorProto::INT64);
  b.output("latest", {std::int64_t{3}});
  b.output("v", {std::int64_t{3}});
  const kiln::onnx::model m = load(b);
  auto out = run(m, {tensor<std::int64_t>(kiln::dtype::i64, kiln::shape{}, {3}),
                     f32(kiln::shape{3}, {1, -2, 0.5f})});
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].dims, (kiln::shape{3, 3}));
  EXPECT_EQ(elements<float>(out[0]), (std::vector<float>{2, -4, 1, 4, -8, 2, 8, -16, 4}));
  EXPECT_EQ(elements<std::int64_t>(out[1]), std::vector<std::int64_t>{3});
  EXPECT_EQ(elements<float>(out[2]), (std::vector<float>{8, -16, 4}));
  EXPECT_EQ(elements<float>(out[3]), (std::vector<float>{8, -16, 4}));
  // No steps: an empty sequence, which ConcatFromSequence refuses at the call, naming the node.
  try {
    run(m, {tensor<std::int64_t>(kiln::dtype::i64, kiln::shape{}, {0}),
            f32(kiln::shape{3}, {1, 2, 3})});
    ADD_FAILURE() << "ConcatFromSequence of an empty sequence ran";
  } catch (const kiln::error& e) {
    EXPECT_NE(std::string(e.what()).find("(ConcatFromSequence): the sequence is empty"),
              std::string::npos)
        << e.what();
  }
}

// SplitToSequence of a run-time length, and by split sizes given at the call: lists split at the
// call, read back by SequenceLength, SequenceAt and ConcatFromSequence, changed by SequenceInsert
// and SequenceErase and renamed by Identity.
TEST(CutModels, SplitToSequenceAtTheCall) {
  model_builder b(13);
  b.input("x", {std::string("n"), std::int64_t{2}});
  b.input("sizes", {std::int64_t{2}}, ::onnx::TensorProto::INT64);
  b.scalar_int("second", 1);
  auto* rows = b.node("SplitToSequence", {"x"}, {"rows"});
  int_attr(rows, "keepdims", 0);
  b.node("SequenceLength", {"rows"}, {"count"});
  b.node("SequenceAt", {"rows", "second"}, {"row"});
  auto* columns = b.node("ConcatFromSequence", {"rows"}, {"transposed"});
  int_attr(columns, "axis", 1);
  int_attr(columns, "new_axis", 1);
  b.node("SplitToSequence", {"x", "sizes"}, {"parts"});
  int_attr(b.node("ConcatFromSequence", {"parts"}, {"joined"}), "axis", 0);
  // A row computed from the list appended to it, its first erased, under another name.
  b.floats("ten", {10}, {});
  b.node("Mul", {"row", "ten"}, {"tenfold"});
  b.node("SequenceInsert", {"rows", "tenfold"}, {"more"});
  b.scalar_int("zero", 0);
  b.node("SequenceErase", {"more", "zero"}, {"fewer"});
  b.node("Identity", {"fewer"}, {"renamed"});
  auto* restacked = b.node("ConcatFromSequence", {"renamed"}, {"restacked"});
  int_attr(restacked, "axis", 0);
  int_attr(restacked, "new_axis", 1);
  b.output("count", {}, ::onnx::TensorProto::INT64);
  b.output("row", {std::int64_t{2}});
  b.output("transposed", {std::int64_t{2}, std::string("n")});
  b.output("joined", {std::string("n"), std::int64_t{2}});
  b.output("restacked", {std::string("n"), std::int64_t{2}});
  const kiln::onnx::model m = load(b);
  const std::vector<float> x{1, 2, 3, 4, 5, 6};
  auto out = run(m, {f32(kiln::shape{3, 2}, x),
                     tensor<std::int64_t>(kiln::dtype::i64, kiln::shape{2}, {1, 2})});
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(elements<std::int64_t>(out[0]), std::vector<std::int64_t>{3});
  EXPECT_EQ(elements<float>(out[1]), (std::vector<float>{3, 4}));
  EXPECT_EQ(out[2].dims, (kiln::shape{2, 3}));
  EXPECT_EQ(elements<float>(out[2]), (std::vector<float>{1, 3, 5, 2, 4, 6}));
  EXPECT_EQ(out[3].dims, (kiln::shape{3, 2}));
  EXPECT_EQ(elements<float>(out[3]), x);
  EXPECT_EQ(elements<float>(out[4]), (std::vector<float>{3, 4, 5, 6, 30, 40}));
}

// Nodes sized by values inside bodies run at the call: an If whose taken branch gathers x's
// nonzero elements, and a Loop of a run-time trip count whose body sums the elements of x above
// its iteration number (NonZero, then a gather): each body is cut itself. Worked out by hand.
TEST(CutModels, BodiesAtTheCallAreCutThemselves) {
  {
    model_builder b(13);
    b.input("x", {std::int64_t{4}});
    b.input("c", {}, ::onnx::TensorProto::BOOL);
    b.ints("first_axis", {0});
    auto* choice = b.node("If", {"c"}, {"picked"});
    subgraph(b, choice, "then_branch", [&] {
      b.node("NonZero", {"x"}, {"nz"});
      b.node("Squeeze", {"nz", "first_axis"}, {"at"});
      b.node("Gather", {"x", "at"}, {"nonzero"});
      b.output("nonzero", {std::string("k")});
    });
    subgraph(b, choice, "else_branch", [&] {
      int_attr(b.node("Concat", {"x", "x"}, {"twice"}), "axis", 0);
      b.output("twice", {std::int64_t{8}});
    });
    b.output("picked", {std::string("k")});
    const kiln::onnx::model m = load(b);
    const tensor_data x = f32(kiln::shape{4}, {0, 2, 0, 3});
    auto out = run(m, {x, tensor<std::uint8_t>(kiln::dtype::boolean, kiln::shape{}, {1})});
    EXPECT_EQ(elements<float>(out[0]), (std::vector<float>{2, 3}));
    out = run(m, {x, tensor<std::uint8_t>(kiln::dtype::boolean, kiln::shape{}, {0})});
    EXPECT_EQ(elements<float>(out[0]), (std::vector<float>{0, 2, 0, 3, 0, 2, 0, 3}));
  }
  model_builder b(13);
  b.input("n", {}, ::onnx::TensorProto::INT64);
  b.input("x", {std::int64_t{4}});
  b.floats("zero", {0}, {});
  b.ints("first_axis", {0});
  auto* loop = b.node("Loop", {"n", "", "zero"}, {"total", "sums"});
  subgraph(b, loop, "body", [&] {
    b.input("i", {}, ::onnx::TensorProto::INT64);
    b.input("cond_in", {}, ::onnx::TensorProto::BOOL);
    b.input("acc", {});
    int_attr(b.node("Cast", {"i"}, {"fi"}), "to", ::onnx::TensorProto::FLOAT);
    b.node("Greater", {"x", "fi"}, {"above"});
    b.node("NonZero", {"above"}, {"nz"});
    b.node("Squeeze", {"nz", "first_axis"}, {"at"});
    b.node("Gather", {"x", "at"}, {"kept"});
    int_attr(b.node("ReduceSum", {"kept"}, {"s"}), "keepdims", 0);
    b.node("Add", {"acc", "s"}, {"acc_out"});
    b.node("Identity", {"cond_in"}, {"cond_out"});
    b.output("cond_out", {}, ::onnx::TensorProto::BOOL);
    b.output("acc_out", {});
    b.output("s", {});
  });
  b.output("total", {});
  b.output("sums", {std::string("n")});
  const kiln::onnx::model m = load(b);
  // x = 0.5 1.5 2.5 3.5: above 0 all (8), above 1 the last three (7.5), above 2 two (6).
  auto out = run(m, {tensor<std::int64_t>(kiln::dtype::i64, kiln::shape{}, {3}),
                     f32(kiln::shape{4}, {0.5f, 1.5f, 2.5f, 3.5f})});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(elements<float>(out[0]), std::vector<float>{21.5f});
  EXPECT_EQ(elements<float>(out[1]), (std::vector<float>{8, 7.5f, 6}));
}

// A Shape of run-time sizes taken before a cut and read after it: its sizes cross the cut (as
// the lengths of ranges the first graph counts), so that ones expanded to x's shape after the
// NonZero count x's elements.
TEST(CutModels, ShapesOfRunTimeSizesCrossACut) {
  model_builder b(13);
  b.input("x", {std::string("n"), std::int64_t{4}});
  b.floats("one", {1}, {});
  b.node("Shape", {"x"}, {"s"});
  b.node("NonZero", {"x"}, {"nz"});
  b.node("Expand", {"one", "s"}, {"ones"});
  int_attr(b.node("ReduceSum", {"ones"}, {"count"}), "keepdims", 0);
  b.output("count", {});
  b.output("nz", {std::int64_t{2}, std::string("k")}, ::onnx::TensorProto::INT64);
  const kiln::onnx::model m = load(b);
  for (std::int64_t n : {3, 1}) {
    std::vector<float> x(static_cast<std::size_t>(n * 4), 0);
    x[1] = 5;
    auto out = run(m, {f32(kiln::shape{n, 4}, x)});
    EXPECT_EQ(elements<float>(out[0]), std::vector<float>{static_cast<float>(n * 4)});
    EXPECT_EQ(elements<std::int64_t>(out[1]), (std::vector<std::int64_t>{0, 1}));
  }
}

TEST(CutModels, ArgumentsAreCheckedAndDeviceBuffersReadBack) {
  model_builder b;
  b.input("x", {std::int64_t{4}}, ::onnx::TensorProto::INT32);
  b.node("NonZero", {"x"}, {"nz"});
  b.output("nz", {std::int64_t{1}, std::string("k")}, ::onnx::TensorProto::INT64);
  const kiln::onnx::model m = load(b);
  EXPECT_TRUE(m.executables().empty());  // NonZero alone: nothing for a graph to compute
  auto out = run(m, {tensor<std::int32_t>(kiln::dtype::i32, kiln::shape{4}, {0, 7, 0, -2})});
  EXPECT_EQ(elements<std::int64_t>(out[0]), (std::vector<std::int64_t>{1, 3}));
  // A device buffer (a framework's tensor on the device) is read back for the host step.
  const kiln::device dev = kiln::device::default_device();
  const kiln::buffer<std::int32_t> on_device = dev.upload(std::vector<std::int32_t>{5, 0, 0, 9});
  out = m.run({kiln::tensor_ref(on_device)}, dev);
  EXPECT_EQ(elements<std::int64_t>(out[0]), (std::vector<std::int64_t>{0, 3}));
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
