// The function signature string (IREE's raw function ABI grammar) and the buffer-description
// oracle: strings worked out by hand, round trips through parse_signature for every dtype and
// rank, every malformed string named at its byte, both doors giving the same signature, and the
// oracle's three answers, a conversion it asks for giving the call's result.
#include <gtest/gtest.h>

#include <random>

#include <kiln/executable.hpp>
#include <kiln/kiln.hpp>

using namespace kiln;

namespace {

// a: f32 [2, n], b: i8 [3] -> (a * 2: f32 [2, n], sum(cast(b)): f32 [])
executable two_results() {
  graph g;
  auto a = g.input("a", dtype::f32, {2, dyn});
  auto b = g.input("b", dtype::i8, {3});
  g.output("twice", g.mul(a, g.constant(2.0, dtype::f32)));
  g.output("total", g.reduce_sum(g.cast(b, dtype::f32), {0}, false));
  return compile(g);
}

std::string error_of(std::string_view text) {
  try {
    parse_signature(text);
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument) << text;
    return e.what();
  }
  ADD_FAILURE() << "parsed: " << text;
  return "";
}

}  // namespace

TEST(Signature, StringWorkedOutByHand) {
  executable e = two_results();
  // a: "t0d2d-1" is 7 bytes -> "B8!t0d2d-1" (10); b: "t4d3" -> "B5!t4d3" (7); inputs 17 bytes.
  // twice: "B8!t0d2d-1" (10); total: "t0" -> "B3!t0" (5); results 15 bytes.
  EXPECT_EQ(to_string(e.signature()), "I18!B8!t0d2d-1B5!t4d3R16!B8!t0d2d-1B3!t0");
  signature s = e.signature();
  ASSERT_EQ(s.inputs.size(), 2u);
  EXPECT_EQ(s.inputs[1].type, dtype::i8);
  EXPECT_EQ(s.inputs[1].dims, std::vector<std::int64_t>{3});
  EXPECT_EQ(s.results[1].dims, std::vector<std::int64_t>{});
  // The header's example.
  EXPECT_EQ(to_string(signature{{{dtype::f32, {2, -1}}}, {{dtype::f32, {2}}}}),
            "I11!B8!t0d2d-1R8!B5!t0d2");
}

TEST(Signature, EveryDtypeAndRankRoundTrips) {
  std::mt19937 rng(7);
  for (int t = 0; t < dtype_count; ++t)
    for (int rank = 0; rank <= 5; ++rank) {
      signature s;
      for (int k = 0; k < 3; ++k) {
        signature_buffer b{static_cast<dtype>((t + k) % dtype_count), {}};
        for (int a = 0; a < rank; ++a)
          b.dims.push_back(rng() % 4 == 0 ? -1 : static_cast<std::int64_t>(rng() % 100000));
        (k < 2 ? s.inputs : s.results).push_back(b);
      }
      const std::string text = to_string(s);
      EXPECT_EQ(parse_signature(text), s) << text;
    }
  EXPECT_EQ(parse_signature("I1!R1!"), signature{});  // nothing in, nothing out
}

TEST(Signature, TheGrammarsDefaultsAndScalarsParse) {
  // A buffer without an element type is f32; 'S' is a scalar, a rank-0 tensor in kiln.
  signature s = parse_signature("I11!B3!d5S3!t6R1!");
  ASSERT_EQ(s.inputs.size(), 2u);
  EXPECT_EQ(s.inputs[0], (signature_buffer{dtype::f32, {5}}));
  EXPECT_EQ(s.inputs[1], (signature_buffer{dtype::i32, {}}));
  EXPECT_EQ(parse_signature("I12!B9!t12d1d-1R1!").inputs[0].type, dtype::boolean);
}

TEST(Signature, MalformedStringsNameTheirByte) {
  EXPECT_EQ(error_of(""), "kiln: parse_signature: at byte 0: expected 'I', found the end");
  EXPECT_EQ(error_of("X1!R1!"), "kiln: parse_signature: at byte 0: expected 'I', found 'X'");
  EXPECT_EQ(error_of("I20!B3!t0R1!"),
            "kiln: parse_signature: at byte 4: a length of 20 runs past the end of its span");
  EXPECT_EQ(error_of("I1R1!"), "kiln: parse_signature: at byte 2: expected '!', found 'R'");
  EXPECT_EQ(error_of("I4!Q1!R1!"),
            "kiln: parse_signature: at byte 3: 'Q' is not a buffer ('B') or scalar ('S'): kiln's "
            "functions take and give tensors only");
  EXPECT_EQ(error_of("I7!B4!t15R1!"),  // 15: no dtype's code
            "kiln: parse_signature: at byte 7: element type 15 is not a kiln dtype");
  EXPECT_EQ(error_of("I7!B4!x2R1!"), "kiln: parse_signature: at byte 6: expected 'd', found 'x'");
  EXPECT_EQ(error_of("I7!B4!d-2R1!"), "kiln: parse_signature: at byte 7: an extent of -2");
  EXPECT_EQ(error_of("I6!S3!d2R1!"), "kiln: parse_signature: at byte 6: a scalar has no extents");
  EXPECT_EQ(error_of("I1!R1!B"), "kiln: parse_signature: at byte 6: text after the results");
  EXPECT_EQ(error_of("I1!R99999999999999999999!"),
            "kiln: parse_signature: at byte 4: the number does not fit in 64 bits");
  // Every int64 is a number: the largest extents and lengths are read (and refused only for what
  // they are), one past them is not.
  EXPECT_EQ(error_of("I1!R9223372036854775807!"),
            "kiln: parse_signature: at byte 24: a length of 9223372036854775807 runs past the end "
            "of its span");
  EXPECT_EQ(error_of("I1!R9223372036854775808!"),
            "kiln: parse_signature: at byte 4: the number does not fit in 64 bits");
  for (const char* extent : {"922337203685477580", "922337203685477587", "9223372036854775807"}) {
    const std::string body = std::string("t1d") + extent;
    const std::string buffer = "B" + std::to_string(body.size() + 1) + "!" + body;
    const std::string text = "I" + std::to_string(buffer.size() + 1) + "!" + buffer + "R1!";
    signature s = parse_signature(text);
    ASSERT_EQ(s.inputs.size(), 1u) << text;
    EXPECT_EQ(std::to_string(s.inputs[0].dims[0]), extent);
    EXPECT_EQ(to_string(s), text);
  }
}

// The oracle refuses what the call refuses: extents whose bytes do not fit in 64 bits.
TEST(Signature, TheOracleRefusesWhatTheCallRefuses) {
  graph g;
  g.output("y", g.relu(g.input("x", dtype::f32, {dyn, dyn})));
  executable e = compile(g);
  const std::int64_t big = std::int64_t{1} << 40;
  acceptance a = e.accepts(0, {dtype::f32, {big, big}, {}});
  EXPECT_EQ(a.answer, acceptance::verdict::unsupported);
  EXPECT_NE(a.why.find("fit in 64 bits"), std::string::npos) << a.why;
  EXPECT_EQ(e.accepts(0, {dtype::f32, {big, 1}, {}}).answer, acceptance::verdict::as_is);
  // Strides that reach past the address space: refused as the call refuses them, before the
  // aliasing test multiplies them.
  acceptance far = e.accepts_result(0, {dtype::f32, {4, 4}, {std::int64_t{1} << 62, 1}});
  EXPECT_EQ(far.answer, acceptance::verdict::unsupported);
  EXPECT_NE(far.why.find("reaches beyond the address space"), std::string::npos) << far.why;
}

// The DSL door gives the signature the graph door gives for the same function.
TEST(Signature, BothDoorsAgree) {
  constexpr auto f = fn<tensor<f32, 2, dyn>, tensor<i8, 3>>([](auto a, auto b) {
    return std::tuple{a * 2.0f, reduce_sum<0>(cast<f32>(b))};
  });
  EXPECT_EQ(f.signature().inputs, two_results().signature().inputs);
  EXPECT_EQ(to_string(f.signature()), to_string(two_results().signature()));
  EXPECT_EQ(f.accepts(1, {dtype::i8, {3}, {}}).answer, acceptance::verdict::as_is);
  EXPECT_EQ(f.accepts(0, {dtype::f32, {2, 4}, {1, 2}}).answer, acceptance::verdict::as_is);
  try {
    f.accepts(5, {});
    ADD_FAILURE() << "argument 6 of 2";
  } catch (const error& e) {
    EXPECT_EQ(std::string(e.what()),
              "kiln: kiln::fn: accepts: argument index 5 (the function has 2)");
  }
}

TEST(BufferOracle, AsIsNeedsAConversionOrUnsupported) {
  executable e = two_results();
  using verdict = acceptance::verdict;
  // Row-major, strides given or not, any extent for the run-time size: as is.
  EXPECT_EQ(e.accepts(0, {dtype::f32, {2, 9}, {}}).answer, verdict::as_is);
  EXPECT_EQ(e.accepts(0, {dtype::f32, {2, 9}, {9, 1}}).answer, verdict::as_is);
  EXPECT_EQ(e.accepts(1, {dtype::i8, {3}, {1}}).answer, verdict::as_is);
  EXPECT_EQ(e.accepts(0, {dtype::f32, {2, 1}, {1, 17}}).answer, verdict::as_is);  // size-1 axis
  // A transposed view: read in place at its strides.
  acceptance t = e.accepts(0, {dtype::f32, {2, 5}, {1, 2}});
  EXPECT_EQ(t.answer, verdict::as_is);
  EXPECT_EQ(t.wanted.strides, (std::vector<std::int64_t>{1, 2}));
  // A function that reshapes its argument reads it row-major: the same elements, copied first.
  graph g;
  g.output("flat", g.reshape(g.input("m", dtype::f32, {2, 5}), {10}));
  executable reshaping = compile(g);
  acceptance c = reshaping.accepts(0, {dtype::f32, {2, 5}, {1, 2}});
  EXPECT_EQ(c.answer, verdict::needs_conversion);
  EXPECT_EQ(c.wanted.shape, (std::vector<std::int64_t>{2, 5}));
  EXPECT_EQ(c.wanted.strides, (std::vector<std::int64_t>{5, 1}));
  EXPECT_EQ(c.why,
            "argument 1 ('m'): strides [1, 2] (elements); the function reads it row-major "
            "(strides [5, 1]) through a reshape or a gather, so a call copies it into that "
            "layout: pass it so to save the copy");
  // What no layout fixes.
  acceptance wrong_type = e.accepts(1, {dtype::u8, {3}, {}});
  EXPECT_EQ(wrong_type.answer, verdict::unsupported);
  EXPECT_EQ(wrong_type.why,
            "argument 2 ('b'): its elements are u8, the function takes i8 (a call does not "
            "convert element types)");
  EXPECT_EQ(e.accepts(1, {dtype::i8, {4}, {}}).why,
            "argument 2 ('b'): axis 0 has 4, the function takes i8 [3]");
  EXPECT_EQ(e.accepts(0, {dtype::f32, {2}, {}}).why,
            "argument 1 ('a'): rank 1 [2], the function takes f32 [2, ?]");
  EXPECT_EQ(e.accepts(0, {dtype::f32, {2, 3}, {1}}).answer, verdict::unsupported);
  EXPECT_EQ(e.accepts_result(1, {dtype::f32, {}, {}}).answer, verdict::as_is);
  EXPECT_EQ(e.accepts_result(0, {dtype::f32, {2, 4}, {1, 2}}).answer, verdict::as_is);
  EXPECT_EQ(e.accepts_result(0, {dtype::f32, {2, 4}, {1, 0}}).answer, verdict::unsupported);
  try {
    e.accepts(2, {});
    ADD_FAILURE() << "argument 3 of 2";
  } catch (const error& err) {
    EXPECT_NE(std::string(err.what()).find("accepts: argument index 2 (the function has 2)"),
              std::string::npos)
        << err.what();
  }
  try {
    e.accepts_result(-1, {});
    ADD_FAILURE() << "result 0";
  } catch (const error& err) {
    EXPECT_NE(std::string(err.what()).find("accepts: result index -1 (the function has 2)"),
              std::string::npos)
        << err.what();
  }
}

// Doing what the oracle says: a column-major matrix, copied into the layout it asks for, gives
// the result of the row-major data.
TEST(BufferOracle, TheConversionItAsksForGivesTheCallsResult) {
  // a: f32 [2, n] reshaped to [n, 2] (read row-major), scaled.
  const std::int64_t n = 6;
  graph g;
  g.output("y", g.mul(g.reshape(g.input("a", dtype::f32, {2, n}), {n, 2}), g.constant(2.0)));
  executable e = compile(g);
  std::vector<float> column_major(2 * n);  // element (i, j) at j * 2 + i
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < n; ++j) column_major[j * 2 + i] = float(i * 10 + j);
  acceptance a = e.accepts(0, {dtype::f32, {2, n}, {1, 2}});
  ASSERT_EQ(a.answer, acceptance::verdict::needs_conversion);
  std::vector<float> copied(2 * n);
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      copied[i * a.wanted.strides[0] + j * a.wanted.strides[1]] = column_major[j * 2 + i];
  std::vector<float> from_copy(2 * n), from_strided(2 * n);
  e.run({tensor_ref(copied.data(), dtype::f32, {2, n})},
        {tensor_ref(from_copy.data(), dtype::f32, {n, 2})});
  // Row-major element k of a is (k / n, k % n): the reshape keeps that order.
  for (std::int64_t k = 0; k < 2 * n; ++k)
    EXPECT_EQ(from_copy[k], 2.0f * float(k / n * 10 + k % n));
  // Passed strided, the call makes that copy itself.
  e.run({tensor_ref(column_major.data(), dtype::f32, shape{2, n}, stride_list{1, 2})},
        {tensor_ref(from_strided.data(), dtype::f32, {n, 2})});
  EXPECT_EQ(from_strided, from_copy);
}
