// ONNX's TfIdfVectorizer over integer tokens: each pool n-gram's occurrences in each row counted
// with every skip, by comparisons of shifted slices of the row against the pool (a [rows,
// positions, grams] mask summed over positions), then placed at its output index by a product
// with a 0/1 matrix. Strings are not kiln's. Internal to kiln::onnx.
#include <algorithm>
#include <string>
#include <vector>

#include "node_context.hpp"

namespace kiln::onnx_import {

namespace {

using value = graph::value;
using ints = std::vector<std::int64_t>;

void lower_tfidf(node_context& c) {
  c.only_attrs({"mode", "min_gram_length", "max_gram_length", "max_skip_count", "ngram_counts",
                "ngram_indexes", "pool_int64s", "pool_strings", "weights"});
  graph& g = c.g;
  if (c.has_attr("pool_strings"))
    c.fail(errc::unsupported, "pool_strings (string tensors are not kiln's)");
  const std::string mode = c.attr_string("mode", "");
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF")
    c.fail(errc::invalid_argument, "mode '" + mode + "', expected TF, IDF or TFIDF");
  const std::int64_t min_n = c.attr_int("min_gram_length", 0),
                     max_n = c.attr_int("max_gram_length", 0),
                     skips = c.attr_int("max_skip_count", 0);
  const ints counts = c.attr_ints("ngram_counts"), indexes = c.attr_ints("ngram_indexes"),
             pool = c.attr_ints("pool_int64s");
  const std::vector<double> weights = c.attr_floats("weights");
  const auto levels = static_cast<std::int64_t>(counts.size());
  if (min_n < 1 || max_n < min_n || max_n > levels || skips < 0)
    c.fail(errc::invalid_argument, "gram lengths " + std::to_string(min_n) + " to " +
                                       std::to_string(max_n) + " with ngram_counts of " +
                                       std::to_string(levels) + " levels, max_skip_count " +
                                       std::to_string(skips));
  if (!weights.empty() && weights.size() != indexes.size())
    c.fail(errc::invalid_argument, "weights has " + std::to_string(weights.size()) +
                                       " values for " + std::to_string(indexes.size()) +
                                       " n-grams");
  const shape d = c.dims_of(0);
  if ((d.rank != 1 && d.rank != 2) || !d.is_static())
    c.fail(errc::unsupported, "X dims " + to_string(d) + " (kiln: [C] or [N, C], static)");
  const dtype t = c.type_of(0);
  if (t != dtype::i32 && t != dtype::i64)
    c.fail(errc::unsupported,
           std::string("X of ") + std::string(kiln::name(t)) + " (kiln: i32 or i64 tokens)");
  std::int64_t outputs = 0;
  for (auto i : indexes) {
    if (i < 0) c.fail(errc::invalid_argument, "a negative ngram_indexes value");
    outputs = std::max(outputs, i + 1);
  }
  const std::int64_t rows = d.rank == 1 ? 1 : d.dims[0], length = d.dims[d.rank - 1];
  const value x = g.reshape(g.cast(c.in(0), dtype::i64), {rows, length});
  // Grams of each length: pool[counts[n - 1], counts[n]) holds those of length n, each gram the
  // next one in ngram_indexes.
  std::int64_t gram = 0;
  value total{};
  bool any = false;
  for (std::int64_t n = 1; n <= levels; ++n) {
    const std::int64_t begin = counts[static_cast<std::size_t>(n - 1)];
    const std::int64_t end =
        n < levels ? counts[static_cast<std::size_t>(n)] : static_cast<std::int64_t>(pool.size());
    if (begin < 0 || end < begin || end > static_cast<std::int64_t>(pool.size()) ||
        (end - begin) % n != 0)
      c.fail(errc::invalid_argument, "ngram_counts do not split the pool into n-grams");
    const std::int64_t grams = (end - begin) / n;
    if (gram + grams > static_cast<std::int64_t>(indexes.size()))
      c.fail(errc::invalid_argument, "ngram_indexes has fewer values than the pool has n-grams");
    const std::int64_t first = gram;
    gram += grams;
    if (n < min_n || n > max_n || grams == 0) continue;
    // counts[row, gram]: for each skip, every start whose n tokens, skip + 1 apart, match.
    value found{};
    bool counted = false;
    for (std::int64_t skip = 0; skip <= (n == 1 ? 0 : skips); ++skip) {
      const std::int64_t step = skip + 1, starts = length - (n - 1) * step;
      if (starts <= 0) break;
      value match{};
      for (std::int64_t j = 0; j < n; ++j) {
        ints token(static_cast<std::size_t>(grams));
        for (std::int64_t m = 0; m < grams; ++m)
          token[static_cast<std::size_t>(m)] = pool[static_cast<std::size_t>(begin + m * n + j)];
        const std::int64_t from[] = {j * step}, to[] = {j * step + starts}, along[] = {1};
        const value tokens = g.unsqueeze(g.slice(x, from, to, along), {2});  // [rows, starts, 1]
        const value same =
            g.eq(tokens, g.constant(token.data(), dtype::i64, token.size(), shape{1, 1, grams}));
        match = j == 0 ? same : g.logical_and(match, same);
      }
      const value here = g.reduce(ir::op::reduce_sum, g.cast(match, dtype::f32), {1}, false);
      found = counted ? g.add(found, here) : here;
      counted = true;
    }
    if (!counted) continue;
    // Each gram's value (TF: its count; IDF: its weight where it occurs; TFIDF: both), then its
    // output column.
    std::vector<double> w(static_cast<std::size_t>(grams), 1.0);
    if (!weights.empty())
      for (std::int64_t m = 0; m < grams; ++m)
        w[static_cast<std::size_t>(m)] = weights[static_cast<std::size_t>(first + m)];
    const value wv = g.cast(g.constant(w.data(), dtype::f64, w.size(), shape{grams}), dtype::f32);
    if (mode == "IDF")
      found = g.select(g.gt(found, g.constant(0.0, dtype::f32)), g.expand(wv, {rows, grams}),
                       g.constant(0.0, dtype::f32));
    else if (mode == "TFIDF")
      found = g.mul(found, wv);
    std::vector<double> place(static_cast<std::size_t>(grams * outputs), 0.0);
    for (std::int64_t m = 0; m < grams; ++m)
      place[static_cast<std::size_t>(m * outputs + indexes[static_cast<std::size_t>(first + m)])] =
          1;
    const value placed = g.matmul(
        found, g.cast(g.constant(place.data(), dtype::f64, place.size(), shape{grams, outputs}),
                      dtype::f32));
    total = any ? g.add(total, placed) : placed;
    any = true;
  }
  if (!any) total = g.expand(g.constant(0.0, dtype::f32), {rows, outputs});
  c.out(0, d.rank == 1 ? g.reshape(total, {outputs}) : total);
}

}  // namespace

void add_ngram_lowerings(lowering_table& t) { t["TfIdfVectorizer"] = lower_tfidf; }

}  // namespace kiln::onnx_import
