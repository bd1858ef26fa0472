// kiln::graph, the run-time front end for frameworks: named inputs and outputs, one method per
// op, each checked as it is added (the same ir::builder as the DSL, so the same rules and errors).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <ranges>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/core/runtime_boundary.hpp"
#include "kiln/core/shared_bytes.hpp"
#include "kiln/core/text.hpp"
#include "kiln/ir/builder.hpp"
#include "kiln/ir/composites.hpp"
#include "kiln/ir/contractions.hpp"
#include "kiln/ir/convolutions.hpp"
#include "kiln/ir/moves.hpp"
#include "kiln/ir/pooling.hpp"

namespace kiln {

class graph {
 public:
  // A node of the graph that made it. Cheap to copy; meaningless in another graph.
  struct value {
    std::int32_t id = -1;
    std::uint64_t owner = 0;
  };

  graph() : id_(next_id()) {}

  // A parameter: its name, element type and extents (static sizes or kiln::dyn).
  value input(std::string_view name, dtype t, std::initializer_list<std::int64_t> dims);
  value input(std::string_view name, dtype t, const shape& dims);

  // A rank-0 constant of element type t (broadcast against whatever it meets), converted with
  // kiln's cast rules; beside narrow floats a literal keeps f32 precision (they compute in f32).
  // Integers keep every bit (an i64 constant of 2^60 + 1 is exact); a double
  // for an integer dtype must hold an integer value that the dtype can hold.
  value constant(double v, dtype t = dtype::f32);
  template <std::integral I>
  value constant(I v, dtype t) {
    if (is_valid(t) && is_integer(t) &&
        (std::cmp_less(v, integer_min(t)) || std::cmp_greater(v, unsigned_max(t))))
      throw error(errc::invalid_argument, "constant",
                  std::to_string(v) + " is outside the range of " + std::string(kiln::name(t)));
    if (std::cmp_greater(v, integer_max(dtype::i64)) && !is_integer(t))  // beyond i64, as a float
      return constant(scalar::of_float(t, static_cast<double>(v)));
    return constant(scalar::of_integer(t, static_cast<std::int64_t>(v)));
  }
  value constant(const scalar& v);

  // A tensor constant (weights, a lookup table): host data of static extents `dims`, copied into
  // the graph now. The executable keeps it, uploads it once per device, and reads it as it reads
  // an argument; it is never folded into a kernel. Not an input of the compiled function.
  struct tensor_constant {
    std::int32_t arg = 0;  // the IR input it is
    shared_bytes bytes;    // its elements, row-major
  };
  template <std::ranges::contiguous_range R>
  requires element_type<std::ranges::range_value_t<R>> value
  constant(const R& data, std::initializer_list<std::int64_t> dims) {
    using T = std::ranges::range_value_t<R>;
    return constant(std::ranges::data(data), dtype_of<T>, std::ranges::size(data),
                    shape_of(dims, "constant", "the tensor constant"));
  }
  // The same from untyped data: `count` elements of dtype t.
  value constant(const void* data, dtype t, std::size_t count, const shape& dims);
  // The same from a buffer moved in (its elements of dtype t, row-major): no copy. With
  // compile(std::move(g)) the executable takes it over in turn, so an importer's weights are
  // held once.
  value constant(std::vector<unsigned char>&& bytes, dtype t, const shape& dims);
  // The same from bytes held elsewhere, not copied: shared (kept alive by their owner) or
  // borrowed (shared_bytes::borrow: read where they are, so the caller keeps them alive and
  // unchanged while the graph or any executable compiled from it lives; a module saved from one
  // holds its own copy). Their address must be aligned to the element size.
  value constant(shared_bytes bytes, dtype t, const shape& dims);

  // Any op of the op table by its ir::op, with its operands (for importers that map op names).
  value apply(ir::op o, std::initializer_list<value> operands);

  value cast(value a, dtype to);

  // Reduction o of x over `axes` (negative ones count from the end; none: every axis), keeping
  // the reduced axes with size 1 unless keepdims is false: ONNX's Reduce* (opset 18), where
  // keepdims also defaults to true.
  value reduce(ir::op o, value x, std::span<const std::int64_t> axes, bool keepdims = true);
  // argmax / argmin of x along `axis` (negative: from the end): the i64 index of the first
  // extreme element, or of the last with select_last_index; ONNX's ArgMax/ArgMin (opset 13+),
  // whose defaults these are.
  value index_reduce(ir::op o, value x, std::int64_t axis = 0, bool keepdims = true,
                     bool select_last_index = false);
  value reduce(ir::op o, value x, std::initializer_list<std::int64_t> axes = {},
               bool keepdims = true);
  value select(value cond, value a, value b);

  // Index maps, ONNX's Transpose, Reshape, Expand, Slice, Flatten, Squeeze and Unsqueeze: views
  // that move no data where a region can read the operand in place. Sizes of the operand known
  // only at the call pass through transposes and reshapes (a reshape may join them into products
  // and split such products again: see extent) but are not sliced.
  using sizes = std::span<const std::int64_t>;
  using size_list = std::initializer_list<std::int64_t>;
  // Result axis i is x's axis perm[i]; no perm reverses the axes.
  value transpose(value x, sizes perm);
  value transpose(value x, size_list perm = {});
  // ONNX Reshape: 0 copies x's size at that position (unless allow_zero), one -1 is inferred.
  value reshape(value x, sizes shape, bool allow_zero = false);
  value reshape(value x, size_list shape, bool allow_zero = false);

  // A size of a value for shapes computed from it (an exporter's Shape -> Gather -> Mul -> Concat
  // -> Reshape): a static size, or one known at the call (an input's run-time size, or a sum,
  // difference, product or exact quotient of such sizes). A graph built from extents runs at any
  // run-time sizes: they are computed at each call, and a quotient that does not divide or a
  // difference below 0 is an error then.
  class extent {
   public:
    constexpr extent(std::int64_t static_size = 0) : d_(static_size) {}  // NOLINT: a size is one
    constexpr bool is_static() const { return !run_time_; }
    // The size, where it is static.
    constexpr std::int64_t size() const { return run_time_ ? dyn : d_; }
    friend constexpr bool operator==(const extent&, const extent&) = default;

   private:
    friend class graph;
    std::int64_t d_ = 0;     // the static size, or the IR's run-time size (a symbol)
    bool run_time_ = false;  // set by the graph only
  };
  // Axis `axis` (negative counts from the end) of v.
  extent extent_of(value v, int axis) const;
  // A parameter whose extents are static sizes, kiln::dyn (a run-time size of its own) or an
  // earlier parameter's run-time size (extent_of(x, 0): ONNX inputs that name one dimension
  // "batch"), which the call checks, so that values of both have one size there.
  value input(std::string_view name, dtype t, std::span<const extent> dims);
  extent product(extent a, extent b);
  // a / b: b static, or b's run-time sizes among a's (a product b x c divided by b is c).
  extent quotient(extent a, extent b);
  // a + b (a cache's past length plus the new tokens); a - b where b's run-time sizes are among
  // a's (a sum's size minus one of its pieces); a result below 0 is an error, at the call where
  // it is a run-time size.
  extent sum(extent a, extent b);
  extent difference(extent a, extent b);
  // a / b rounded down (b static, or b's run-time sizes among a's); the smaller or larger of a
  // and b, one of them static: shape arithmetic as an exporter's Div, Min and Max compute it.
  extent floor_quotient(extent a, extent b);
  extent minimum(extent a, extent b);
  extent maximum(extent a, extent b);
  // ONNX Reshape to extents: a static 0 copies x's size there (unless allow_zero), a static -1 is
  // inferred. The element counts must agree as products of the same run-time sizes.
  value reshape(value x, std::span<const extent> shape, bool allow_zero = false);
  // ONNX Expand to extents (an attention mask to the scores' run-time shape).
  value expand(value x, std::span<const extent> shape);
  value expand(value x, sizes shape);
  value expand(value x, size_list shape);
  value slice(value x, sizes starts, sizes ends, sizes axes = {}, sizes steps = {});
  value slice(value x, size_list starts, size_list ends, size_list axes = {}, size_list steps = {});
  // x's positions [start, end) along `axis`, where start or end is a size known only at the call
  // (a causal mask's rows [past, past + new) of a static table), read in place. Not clamped as
  // ONNX's Slice clamps: an end past x's size or a start past the end is an error (at the call
  // where it is a run-time size).
  value slice(value x, int axis, extent start, extent end);
  // ONNX Gather and GatherElements: positions along `axis` read from `indices` (i32 or i64,
  // negative from the end; outside the axis they are clamped to it, where ONNX leaves it
  // undefined). Computed indices are materialized first; data is read in place.
  value gather(value data, value indices, std::int64_t axis = 0);
  value gather_elements(value data, value indices, std::int64_t axis = 0);
  // ONNX Pad (mode "constant", "edge", "reflect" or "wrap"): pads holds every axis's begin, then
  // every end; negative pads crop. `value`: the constant mode's value (a scalar of x's type).
  value pad(value x, sizes pads, std::string_view mode = "constant");
  value pad(value x, size_list pads, std::string_view mode = "constant");
  value pad(value x, sizes pads, value constant_value);
  value pad(value x, size_list pads, value constant_value);
  // ONNX MaxPool and AveragePool over x [N, C, spatial...] (spatial sizes static): one strided
  // view of x per window offset, joined; the window as kiln::pool_params (2-D) or
  // ir::pool_window (any number of spatial axes). GlobalMaxPool / GlobalAveragePool reduce every
  // spatial axis, kept with size 1.
  value max_pool(value x, const ir::pool_window& w);
  value max_pool(value x, const pool_params& p);
  value average_pool(value x, const ir::pool_window& w);
  value average_pool(value x, const pool_params& p);
  value global_max_pool(value x);
  value global_average_pool(value x);
  // ONNX MatMul: a [..., M, K] x b [..., K, N] -> [..., M, N], batch dims broadcast, a 1-D
  // operand promoted (and its axis dropped again). Its elementwise consumers run on each finished
  // tile of the product (one dispatch: gelu(matmul(x, w) + bias)).
  value matmul(value a, value b);
  // ONNX Gemm: alpha x A' x B' + beta x C (A', B': A and B, transposed where asked).
  value gemm(value a, value b, value c, double alpha = 1.0, double beta = 1.0, bool trans_a = false,
             bool trans_b = false);
  value gemm(value a, value b, double alpha = 1.0, bool trans_a = false, bool trans_b = false);
  // ONNX MatMulInteger: (a - a_zero) x (b - b_zero) in i32, a and b u8 or i8, a zero point a
  // scalar or per row of a ([M]) / per column of b ([N]).
  value matmul_integer(value a, value b);
  value matmul_integer(value a, value b, value a_zero, value b_zero);
  // ONNX Conv: x [N, C, spatial...] with w [M, C / groups, kernel...] (plus bias [M]) ->
  // [N, M, outputs...]; the windows as ir::conv_window (any number of spatial axes) or
  // kiln::conv_params (2-D). Its elementwise consumers run on each finished tile (one dispatch:
  // relu(conv(x, w, p, bias))).
  value conv(value x, value w, const ir::conv_window& c);
  value conv(value x, value w, value bias, const ir::conv_window& c);
  value conv(value x, value w, const conv_params& p);
  value conv(value x, value w, value bias, const conv_params& p);
  // ONNX ConvTranspose: x [N, C, spatial...] with w [C, M / groups, kernel...] (plus bias [M]).
  value conv_transpose(value x, value w, const ir::conv_window& c);
  value conv_transpose(value x, value w, value bias, const ir::conv_window& c);
  // ONNX Concat: the pieces joined along `axis`; every other size must be equal.
  value concat(std::span<const value> pieces, std::int64_t axis);
  value concat(std::initializer_list<value> pieces, std::int64_t axis);
  // [product of the sizes before axis, product of the rest] (axis from -rank to rank).
  value flatten(value x, std::int64_t axis = 1);
  // x without the size-1 axes named (none: every size-1 axis).
  value squeeze(value x, sizes axes);
  value squeeze(value x, size_list axes = {});
  // x with size-1 axes inserted at `axes` (positions in the result; negative: from its end).
  value unsqueeze(value x, sizes axes);
  value unsqueeze(value x, size_list axes);

  // Data movement made of the views above (ONNX's Split, Tile, DepthToSpace, SpaceToDepth) and
  // Range as a tensor constant. Where a view of a view cannot be read in place (a reshape of a
  // transpose), the inner one is computed into a transient: depth_to_space is one copy, as in
  // any framework.
  // The parts of x along `axis` with the given sizes (ONNX's Split with its `split` input).
  std::vector<value> split(value x, sizes part_sizes, std::int64_t axis = 0);
  std::vector<value> split(value x, size_list part_sizes, std::int64_t axis = 0);
  // `count` parts of ceil(size / count) elements, the last smaller (ONNX's num_outputs).
  std::vector<value> split_equal(value x, std::int64_t count, std::int64_t axis = 0);
  // x repeated repeats[i] times along each axis i (ONNX's Tile).
  value tile(value x, sizes repeats);
  value tile(value x, size_list repeats);
  // Blocks of `block` x `block` channels moved into space, x [N, C, H, W] (ONNX's DepthToSpace,
  // mode "DCR" or "CRD").
  value depth_to_space(value x, std::int64_t block, std::string_view mode = "DCR");
  // The inverse: blocks of space moved into channels (ONNX's SpaceToDepth).
  value space_to_depth(value x, std::int64_t block);
  // start, start + delta, ... up to limit (exclusive), as a tensor constant of dtype t (ONNX's
  // Range with the bounds known when the graph is built).
  value range(double start, double limit, double delta, dtype t = dtype::f32);
  // The same where start or limit is a size known only at the call (ONNX's Range over Shape's
  // sizes: the position ids [past, past + new) of a decoder step). Its length, ceil((limit -
  // start) / delta), is then a run-time size (an error at the call where it comes out below 0:
  // the run-time difference of sizes does not clamp); the runtime counts the positions
  // (ir::graph::positions) and each value is start + i * delta in t.
  value range(extent start, extent limit, std::int64_t delta = 1, dtype t = dtype::i64);
  // A size as a rank-0 number of dtype t (a run-time size is summed at the call from ones).
  value size_value(extent e, dtype t = dtype::i64);
  // The k largest (largest = false: smallest) elements of x along `axis` and their positions
  // (i64), in order, equal elements by position (ONNX's TopK; a NaN counts as larger than any
  // number, as numpy's sort orders it). Each element's place is counted against every other
  // element of its row (one fused reduction): about n^2 comparisons for an axis of n, meant for
  // axes of up to a few thousand.
  std::pair<value, value> top_k(value x, std::int64_t k, std::int64_t axis = -1,
                                bool largest = true);
  // data with updates written at `indices` along `axis` (ONNX's ScatterElements: indices and
  // updates of one shape, no larger than data's off the axis; negative indices count from the
  // end). reduction "none" (where indices repeat, the last update along the axis wins), "add",
  // "mul", "max" or "min" (repeated indices combine in turn, with data's value first). An index
  // outside the axis updates nothing. Each data position is compared with every index of its row
  // (one fused reduction): meant for rows of up to a few thousand. Static sizes.
  value scatter_elements(value data, value indices, value updates, std::int64_t axis = 0,
                         std::string_view reduction = "none");
  // data with updates written at whole index tuples (ONNX's ScatterND): indices [..., k] address
  // data's first k axes, updates are [..., data's axes after k]; reductions, repeated and
  // outside indices as scatter_elements (which it becomes over data seen as [positions, rest]).
  value scatter_nd(value data, value indices, value updates, std::string_view reduction = "none");
  // The determinant of each matrix of x [..., n, n] (floats; ONNX's Det), by Gaussian elimination
  // with partial pivoting (LAPACK's getrf order) unrolled over the static n: about 15 n graph
  // ops over [..., n, n], so meant for n up to a few dozen.
  value det(value x);
  // x [N, C, H, W] sampled at grid [N, Ho, Wo, 2] (x, then y, each scaled to [-1, 1] across the
  // image) -> [N, C, Ho, Wo]: ONNX's GridSample (opset 16) and PyTorch's grid_sample. mode
  // "bilinear", "nearest" (halves to even) or "bicubic" (a = -0.75); padding_mode "zeros",
  // "border" or "reflection"; align_corners: -1 and 1 are the corner pixels' centres (else their
  // outer edges). x and grid floats; each sample reads its 1, 4 or 16 pixels by gathers.
  value grid_sample(value x, value grid, std::string_view mode = "bilinear",
                    std::string_view padding_mode = "zeros", bool align_corners = false);
  // Each region of interest of x [N, C, H, W] pooled to [R, C, output_height, output_width]
  // (ONNX's RoiAlign): rois [R, 4] as (x1, y1, x2, y2) in x's pixels times spatial_scale,
  // batch_indices [R] (i32 or i64) naming each roi's image; sampling_ratio x sampling_ratio
  // bilinear samples per output cell, averaged (mode "avg") or their largest weighted corner
  // taken (mode "max", as ONNX Runtime does). half_pixel: pixel centres at +0.5 (ONNX's default
  // from opset 16; false is "output_half_pixel"). sampling_ratio must be given (> 0): ONNX's
  // adaptive 0 makes the number of samples depend on the rois' values.
  value roi_align(value x, value rois, value batch_indices, std::int64_t output_height,
                  std::int64_t output_width, std::int64_t sampling_ratio,
                  double spatial_scale = 1.0, std::string_view mode = "avg",
                  bool half_pixel = true);
  // The discrete Fourier transform along `axis` of x [..., n, ..., 1] (real) or [..., n, ..., 2]
  // (real and imaginary parts on the last axis) -> [..., m, ..., 2] (ONNX's DFT; a negative axis
  // counts from the end, -2 being the last signal axis): the
  // signal cut or padded with zeros to `length` (0: n); onesided keeps the first m / 2 + 1
  // frequencies; inverse uses e^(+2 pi i jk / m) / m. Products with cosine and sine matrices of
  // the static length (m^2 each), computed in x's float type.
  value dft(value x, std::int64_t axis = 1, bool inverse = false, bool onesided = false,
            std::int64_t length = 0);

  // Random numbers from a counter-based generator (graph/random.hpp): Threefry-2x32 with 20
  // rounds, each element's row-major position the counter and the seed the key, so an element's
  // numbers depend on the seed and its position alone: the same bits on every device and at
  // every call. threefry applies the generator to u32 counter words c0, c1 (broadcast together)
  // under key (k0, k1), giving both words. The others, keyed by the seed's two 32-bit halves
  // (low, high), draw tensors of static extents `dims`:
  // uniform in [low, high) (24 random bits an element), normal (Box-Muller on two 24-bit
  // uniforms; its log, sqrt and cos are each device's, so devices agree to those functions'
  // bounds), and bernoulli's 1 where a uniform draw falls below p (p's extents, dtype t).
  std::pair<value, value> threefry(value c0, value c1, std::uint32_t k0, std::uint32_t k1);
  value random_uniform(std::span<const std::int64_t> dims, double low, double high,
                       std::uint64_t seed, dtype t = dtype::f32);
  value random_normal(std::span<const std::int64_t> dims, double mean, double scale,
                      std::uint64_t seed, dtype t = dtype::f32);
  value bernoulli(value p, std::uint64_t seed, dtype t);

  // Per-channel normalizations of x [N, C, ...] (scale, bias, mean, var: [C]): ONNX's
  // BatchNormalization for inference (one dispatch), InstanceNormalization (one row group) and
  // GroupNormalization with per-channel scale and bias (opset 21).
  value batch_norm(value x, value scale, value bias, value mean, value var, double epsilon = 1e-5);
  value instance_norm(value x, value scale, value bias, double epsilon = 1e-5);
  value group_norm(value x, value scale, value bias, std::int64_t groups, double epsilon = 1e-5);

  // Normalizations (ir/composites.hpp: graphs of the ops above, fused as one row group).
  // softmax / log_softmax along `axis` (negative: from the end): ONNX's Softmax and LogSoftmax.
  value softmax(value x, std::int64_t axis = -1);
  value log_softmax(value x, std::int64_t axis = -1);
  // log(sum(exp(x))) over `axes` (none: every axis), overflow-free: ONNX's ReduceLogSumExp.
  value reduce_log_sum_exp(value x, std::span<const std::int64_t> axes, bool keepdims = true);
  value reduce_log_sum_exp(value x, std::initializer_list<std::int64_t> axes = {},
                           bool keepdims = true);
  // (x - mean) / sqrt(var + epsilon) * scale + bias over the axes from `axis` to the last: ONNX's
  // LayerNormalization (its Y); the bias may be left out.
  value layer_norm(value x, value scale, value bias, std::int64_t axis = -1, double epsilon = 1e-5);
  value layer_norm(value x, value scale, std::int64_t axis = -1, double epsilon = 1e-5);
  // x / sqrt(mean(x^2) + epsilon) * scale over the axes from `axis` to the last: ONNX's
  // RMSNormalization.
  value rms_norm(value x, value scale, std::int64_t axis = -1, double epsilon = 1e-5);

  // Activations as ONNX defines them (attributes with ONNX's defaults), made of elementwise ops so
  // that they fuse with their neighbours. x is floating.
  value leaky_relu(value x, double alpha = 0.01);
  value prelu(value x, value slope);  // slope broadcasts to x
  value elu(value x, double alpha = 1.0);
  value selu(value x, double alpha = 1.67326319217681884765625,
             double gamma = 1.05070102214813232421875);
  value celu(value x, double alpha = 1.0);
  value hard_sigmoid(value x, double alpha = 0.2, double beta = 0.5);
  value hard_swish(value x);
  value mish(value x);
  value thresholded_relu(value x, double alpha = 1.0);
  value shrink(value x, double bias = 0.0, double lambd = 0.5);
  // approximate "none": x/2 (1 + erf(x / sqrt 2)); "tanh": x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715
  // x^3))).
  value gelu(value x, std::string_view approximate = "none");

  // One method per row of ir/op.hpp's list, by its class and arity (leaves, select and cast are
  // written above).
#define KILN_GRAPH_FORM_unary_1(NAME) \
  value NAME(value a) { return apply(ir::op::NAME, {a}); }
#define KILN_GRAPH_FORM_logical_1 KILN_GRAPH_FORM_unary_1
#define KILN_GRAPH_FORM_test_1 KILN_GRAPH_FORM_unary_1
#define KILN_GRAPH_FORM_binary_2(NAME) \
  value NAME(value a, value b) { return apply(ir::op::NAME, {a, b}); }
#define KILN_GRAPH_FORM_compare_2 KILN_GRAPH_FORM_binary_2
#define KILN_GRAPH_FORM_logical_2 KILN_GRAPH_FORM_binary_2
#define KILN_GRAPH_FORM_leaf_0(NAME)
#define KILN_GRAPH_FORM_select_3(NAME)
#define KILN_GRAPH_FORM_ternary_3(NAME) \
  value NAME(value a, value b, value c) { return apply(ir::op::NAME, {a, b, c}); }
#define KILN_GRAPH_FORM_cast_1(NAME)
#define KILN_GRAPH_FORM_index_reduction_1(NAME)                              \
  value NAME(value a, std::int64_t axis = 0, bool keepdims = true,           \
             bool select_last_index = false) {                               \
    return index_reduce(ir::op::NAME, a, axis, keepdims, select_last_index); \
  }
#define KILN_GRAPH_FORM_reduction_1(NAME)                                                    \
  value NAME(value a, std::span<const std::int64_t> axes, bool keepdims = true) {            \
    return reduce(ir::op::NAME, a, axes, keepdims);                                          \
  }                                                                                          \
  value NAME(value a, std::initializer_list<std::int64_t> axes = {}, bool keepdims = true) { \
    return reduce(ir::op::NAME, a, axes, keepdims);                                          \
  }
#define KILN_GRAPH_FORM_contraction_2(NAME)  // matmul: written above
#define KILN_GRAPH_FORM_view_1(NAME)         // written above: each takes its own index map
#define KILN_GRAPH_FORM_view_2(NAME)         // gather, gather_elements: written above
#define KILN_GRAPH_OP(NAME, ARITY, CLASS, ...) KILN_GRAPH_FORM_##CLASS##_##ARITY(NAME)
  KILN_IR_OPS(KILN_GRAPH_OP)
#undef KILN_GRAPH_OP
#undef KILN_GRAPH_FORM_unary_1
#undef KILN_GRAPH_FORM_logical_1
#undef KILN_GRAPH_FORM_test_1
#undef KILN_GRAPH_FORM_ternary_3
#undef KILN_GRAPH_FORM_binary_2
#undef KILN_GRAPH_FORM_compare_2
#undef KILN_GRAPH_FORM_logical_2
#undef KILN_GRAPH_FORM_leaf_0
#undef KILN_GRAPH_FORM_select_3
#undef KILN_GRAPH_FORM_cast_1
#undef KILN_GRAPH_FORM_reduction_1
#undef KILN_GRAPH_FORM_index_reduction_1
#undef KILN_GRAPH_FORM_contraction_2
#undef KILN_GRAPH_FORM_view_1
#undef KILN_GRAPH_FORM_view_2

  // Marks v as the next result, under a name of its own.
  void output(std::string_view name, value v);

  // A persistent tensor of the compiled function (flow.variable): read like an input, kept by
  // the executable across calls (executable::variable(name) loads, saves or shares it), never an
  // argument. Static extents; names are unique among inputs and variables.
  value variable(std::string_view name, dtype t, std::initializer_list<std::int64_t> dims);
  value variable(std::string_view name, dtype t, const shape& dims);
  // At the end of each call, variable `var` (a value graph::variable gave) takes the value x:
  // written in place where the plan allows (the one region reading var is the elementwise region
  // computing x), else after the call from a temporary. Once per variable; x has its dtype and
  // extents.
  void assign(value var, value x);

  // v itself, recorded under `name` at each call when tracing is on (kiln::set_trace_sink or
  // KILN_TRACE=1 at compile(), runtime/trace.hpp); with tracing off the plan is the one the graph
  // has without the trace. Names are unique, 1 to 63 characters.
  value trace(std::string_view name, value v);

  // The element type and extents of a value (run-time sizes as kiln::dyn).
  dtype type_of(value v) const { return node(v).type; }
  shape dims_of(value v) const {
    shape s = node(v).dims;
    for (int i = 0; i < s.rank; ++i) s.dims[i] = s.dims[i] < 0 ? dyn : s.dims[i];
    return s;
  }

  // The compiled function's name: `name`-<hash of its plan> (default "graph"), in notices,
  // errors, traces and the folders of KILN_DUMP_DIR and KILN_REPRO_DIR. 1 to 63 letters, digits,
  // '_', '-' or '.', not starting with '.' or '-'.
  void set_name(std::string_view name);
  const std::string& name() const { return name_; }

  const ir::graph& ir() const { return b_.get(); }
  // The names of the inputs (the compiled function's parameters: tensor constants are not).
  const std::vector<std::string>& input_names() const { return inputs_; }
  const std::vector<std::string>& output_names() const { return outputs_; }
  const std::vector<tensor_constant>& constants() const { return constants_; }
  // Moves the tensor constants out (compile(std::move(g)) does): the graph then has none.
  std::vector<tensor_constant> take_constants() { return std::move(constants_); }
  // The variables: name, the IR input each is, and the node assigned to it (-1: none).
  struct variable_slot {
    std::string name;
    std::int32_t arg = -1;
    std::int32_t assigned = -1;
  };
  const std::vector<variable_slot>& variables() const { return variables_; }

 private:
  static std::uint64_t next_id() {
    static std::atomic<std::uint64_t> n{0};
    return ++n;
  }

  value wrap(std::int32_t id) const { return {id, id_}; }
  static sizes list(size_list l) { return {l.begin(), l.size()}; }
  // An IR size (static, or a symbol) as an extent; a negative static size refused naming op.
  static extent extent_of_dim(std::int64_t d);
  static void check_extents(const char* op, extent a, extent b);
  // minimum or maximum (kind) of a and b, one of them static.
  extent bound(ir::symbol_kind kind, const char* op, extent a, extent b);
  // C, H and W of an image x [N, C, H, W] for a block rearrangement (static, divisible).
  std::array<std::int64_t, 3> image_sizes(value x, const char* op, std::int64_t block,
                                          bool from_depth) const;
  // Size i of d as a reshape's entry at position `to`: static as it is, a run-time size copied
  // (0) where it keeps its position (elsewhere reshape reports it).
  static std::int64_t moved_size(const shape& d, int i, std::size_t to);
  static shape make_shape(sizes d, const char* who, const char* what);
  static std::int64_t static_dim(const shape& d, int i, const char* op);

  value layer_norm(value x, value scale, std::int32_t bias, std::int64_t axis, double epsilon);
  // Axis `axis` of node id (negative: from the end), checked.
  int axis_of(std::string_view op, std::int32_t id, std::int64_t axis) const;
  // The mask of `axes` of node id (none: every axis), each checked and given once.
  std::uint32_t axes_mask(std::string_view op, std::int32_t id,
                          std::span<const std::int64_t> axes) const;
  static ir::pad_mode pad_mode_of(std::string_view mode);
  KILN_RUNTIME_API double exact_reciprocal_of(std::int32_t id) const;
  std::int32_t id_of(value v, std::string_view op, int position) const {
    if (v.owner != id_ || v.id < 0)
      throw error(errc::invalid_argument, std::string(op),
                  "operand " + std::to_string(position) +
                      (v.owner == 0 ? " is an empty graph::value" : " belongs to another graph"));
    return v.id;
  }

  const ir::node& node(value v) const { return b_.get().nodes[id_of(v, "graph", 1)]; }

  static void check_name(const char* what, std::string_view name,
                         const std::vector<std::string>& taken);

  ir::builder b_;
  std::uint64_t id_;
  std::vector<std::string> inputs_, outputs_;
  std::vector<tensor_constant> constants_;
  std::vector<variable_slot> variables_;
  std::string name_ = "graph";
};

// The methods behind the declarations above, compiled once with the runtime
// (core/runtime_boundary.hpp): inline, they had every file that builds a graph compile the IR
// builder again.
#if KILN_RUNTIME_BODY
KILN_RUNTIME_API graph::value graph::input(std::string_view name, dtype t,
                                           std::initializer_list<std::int64_t> dims) {
  return input(name, t, shape_of(dims, "input", detail::quoted(name)));
}

KILN_RUNTIME_API graph::value graph::input(std::string_view name, dtype t, const shape& dims) {
  std::vector<extent> sizes(dims.dims.begin(), dims.dims.begin() + dims.rank);
  return input(name, t, sizes);
}

KILN_RUNTIME_API graph::value graph::input(std::string_view name, dtype t,
                                           std::span<const extent> dims) {
  if (dims.size() > static_cast<std::size_t>(max_rank))
    throw error(
        errc::invalid_argument, "input",
        detail::quoted(name) + ": " + std::to_string(dims.size()) + " sizes, above kiln::max_rank");
  shape s;
  s.rank = static_cast<int>(dims.size());
  std::array<std::int32_t, max_rank> same_as{};
  for (int i = 0; i < s.rank; ++i) {
    const extent& e = dims[static_cast<std::size_t>(i)];
    s.dims[i] = e.is_static() ? e.d_ : dyn;
    if (e.is_static()) continue;
    const ir::symbol& sym = b_.get().symbols[static_cast<std::size_t>(ir::symbol_of(e.d_))];
    if (sym.kind != ir::symbol_kind::input)
      throw error(errc::invalid_argument, "input",
                  detail::quoted(name) + ": size " + std::to_string(i) +
                      " is computed from run-time sizes; a parameter shares only another "
                      "parameter's own run-time size");
    same_as[i] = ir::same_as_code(sym.a, sym.b);
  }
  check_name("input", name, inputs_);
  if (!is_valid(t))
    throw error(errc::invalid_argument, "input",
                detail::quoted(name) + ": dtype value " + std::to_string(static_cast<int>(t)) +
                    " is not a kiln::dtype");
  checked_element_count(s, size_in_bytes(t), "input", detail::quoted(name), true);
  value v = wrap(b_.input(t, s, same_as));
  inputs_.emplace_back(name);
  return v;
}

KILN_RUNTIME_API graph::value graph::constant(double v, dtype t) {
  if (is_valid(t) && is_integer(t)) {
    if (!(v == std::trunc(v) && v >= static_cast<double>(integer_min(t)) && v < integer_end(t)))
      throw error(errc::invalid_argument, "constant",
                  std::to_string(v) + " is not a value of " + std::string(kiln::name(t)) +
                      " (integer constants: pass an integer, not a double)");
  }
  return constant(scalar::computed(t, v));
}

KILN_RUNTIME_API graph::value graph::constant(const scalar& v) { return wrap(b_.constant(v)); }

namespace detail {
// A tensor constant's element count, its dtype and extents checked.
inline std::int64_t constant_count(dtype t, const shape& dims) {
  if (!is_valid(t))
    throw error(errc::invalid_argument, "constant",
                "dtype value " + std::to_string(static_cast<int>(t)) + " is not a kiln::dtype");
  if (!dims.is_static())
    throw error(errc::invalid_argument, "constant",
                "a tensor constant needs static extents, got " + to_string(dims));
  return checked_element_count(dims, size_in_bytes(t), "constant", "the extents");
}
}  // namespace detail

KILN_RUNTIME_API graph::value graph::constant(const void* data, dtype t, std::size_t count,
                                              const shape& dims) {
  const std::int64_t n = detail::constant_count(t, dims);
  if (static_cast<std::int64_t>(count) != n)
    throw error(errc::shape_mismatch, "constant",
                "the extents " + to_string(dims) + " hold " + std::to_string(n) +
                    " elements but the data has " + std::to_string(count));
  const auto bytes = static_cast<std::size_t>(n) * static_cast<std::size_t>(size_in_bytes(t));
  if (!data && bytes > 0)
    throw error(errc::invalid_argument, "constant",
                "the data pointer is null (" + std::to_string(n) + " elements)");
  return constant(shared_bytes::copy_of(data, bytes), t, dims);
}

KILN_RUNTIME_API graph::value graph::constant(std::vector<unsigned char>&& bytes, dtype t,
                                              const shape& dims) {
  return constant(shared_bytes(std::move(bytes)), t, dims);
}

KILN_RUNTIME_API graph::value graph::constant(shared_bytes bytes, dtype t, const shape& dims) {
  const std::int64_t n = detail::constant_count(t, dims);
  const auto want = static_cast<std::size_t>(n) * static_cast<std::size_t>(size_in_bytes(t));
  if (bytes.size() != want)
    throw error(errc::shape_mismatch, "constant",
                "the extents " + to_string(dims) + " of " + std::string(kiln::name(t)) + " hold " +
                    std::to_string(want) + " bytes but the buffer has " +
                    std::to_string(bytes.size()));
  if (reinterpret_cast<std::uintptr_t>(bytes.data()) % size_in_bytes(t) != 0)
    throw error(
        errc::invalid_argument, "constant",
        "the data of a " + std::string(kiln::name(t)) + " constant must be aligned to " +
            std::to_string(size_in_bytes(t)) + " bytes; it starts at an address " +
            std::to_string(reinterpret_cast<std::uintptr_t>(bytes.data()) % size_in_bytes(t)) +
            " bytes past that");
  // The same bytes as the same type and extents are the same constant (an importer's aliases of
  // one weight): one input of the plan, packed once.
  for (const tensor_constant& c : constants_) {
    const ir::input_decl& d = b_.get().inputs[c.arg];
    if (c.bytes.data() == bytes.data() && c.bytes.size() == bytes.size() && !bytes.empty() &&
        d.type == t && d.dims == dims)
      for (std::size_t id = 0; id < b_.get().nodes.size(); ++id)
        if (b_.get().nodes[id].kind == ir::op::input && b_.get().nodes[id].arg == c.arg)
          return wrap(static_cast<std::int32_t>(id));
  }
  value v = wrap(b_.input(t, dims));
  constants_.push_back({b_.get().nodes[v.id].arg, std::move(bytes)});
  return v;
}

// The reciprocal of node `id` where it is a one-element tensor constant of f32 or f64 and
// dividing by it is multiplying by that exactly (kiln::exact_reciprocal), else 0: exporters
// write attention's scale as a quotient by a scalar initializer (scores / 8). Canonicalization
// does the same for scalar constants, whose values the IR holds; these bytes only the graph has.
KILN_RUNTIME_API double graph::exact_reciprocal_of(std::int32_t id) const {
  const ir::node& n = b_.get().nodes[id];
  if (n.kind != ir::op::input) return 0;
  for (const tensor_constant& c : constants_)
    if (c.arg == n.arg && c.bytes.size() == std::size_t(size_in_bytes(n.type))) {
      float f = 0;
      double d = 0;
      if (n.type == dtype::f32) std::memcpy(&f, c.bytes.data(), sizeof f);
      if (n.type == dtype::f64) std::memcpy(&d, c.bytes.data(), sizeof d);
      return kiln::exact_reciprocal(n.type, n.type == dtype::f32 ? f : d);
    }
  return 0;
}

KILN_RUNTIME_API graph::value graph::apply(ir::op o, std::initializer_list<value> operands) {
  if (!ir::is_valid(o))
    throw error(errc::invalid_argument, "apply",
                "op value " + std::to_string(static_cast<int>(o)) + " is not a kiln::ir::op");
  std::string_view op_name = ir::name(o);
  int arity = ir::info(o).arity;
  if (ir::info(o).cls == ir::op_class::leaf || ir::info(o).cls == ir::op_class::cast)
    throw error(errc::invalid_argument, std::string(op_name),
                "use graph::input, graph::constant or graph::cast");
  if (ir::is_reduction(ir::info(o).cls))
    throw error(errc::invalid_argument, std::string(op_name),
                "takes axes: use graph::reduce (or graph::" + std::string(op_name) + ")");
  if (ir::info(o).cls == ir::op_class::view)
    throw error(errc::invalid_argument, std::string(op_name),
                "takes an index map: use graph::" + std::string(op_name));
  if (static_cast<int>(operands.size()) != arity)
    throw error(
        errc::invalid_argument, std::string(op_name),
        "takes " + std::to_string(arity) + " operands, got " + std::to_string(operands.size()));
  std::int32_t ids[3] = {-1, -1, -1};
  int k = 0;
  for (value v : operands) {
    ids[k] = id_of(v, op_name, k + 1);
    ++k;
  }
  switch (arity) {
    case 1:
      return wrap(b_.unary(o, ids[0]));
    case 2:
      if (o == ir::op::div) {  // by a one-element tensor constant of no more axes: x's shape stays
        const ir::node &x = b_.get().nodes[ids[0]], &y = b_.get().nodes[ids[1]];
        if (const double r = exact_reciprocal_of(ids[1]);
            r != 0 && x.type == y.type && y.dims.rank <= x.dims.rank)
          return wrap(b_.binary(ir::op::mul, ids[0], b_.constant(scalar{y.type, r, 0})));
      }
      return wrap(b_.binary(o, ids[0], ids[1]));
    default:
      if (ir::info(o).cls == ir::op_class::ternary)
        return wrap(b_.ternary(o, ids[0], ids[1], ids[2]));
      return wrap(b_.select(ids[0], ids[1], ids[2]));
  }
}

KILN_RUNTIME_API graph::value graph::cast(value a, dtype to) {
  return wrap(b_.cast(id_of(a, "cast", 1), to));
}

KILN_RUNTIME_API graph::value graph::reduce(ir::op o, value x, std::span<const std::int64_t> axes,
                                            bool keepdims) {
  std::string_view op_name = ir::is_valid(o) ? ir::name(o) : "reduce";
  if (!ir::is_valid(o) || ir::info(o).cls != ir::op_class::reduction)
    throw error(errc::invalid_argument, std::string(op_name), "is not a reduction");
  std::int32_t id = id_of(x, op_name, 1);
  std::uint32_t mask = axes_mask(op_name, id, axes);
  return wrap(b_.reduce(o, id, mask, keepdims));
}

KILN_RUNTIME_API graph::value graph::index_reduce(ir::op o, value x, std::int64_t axis,
                                                  bool keepdims, bool select_last_index) {
  std::string_view op_name = ir::is_valid(o) ? ir::name(o) : "index_reduce";
  if (!ir::is_valid(o) || ir::info(o).cls != ir::op_class::index_reduction)
    throw error(errc::invalid_argument, std::string(op_name), "is not argmax or argmin");
  std::int32_t id = id_of(x, op_name, 1);
  return wrap(b_.index_reduce(o, id, axis_of(op_name, id, axis), keepdims, select_last_index));
}

KILN_RUNTIME_API graph::value graph::reduce(ir::op o, value x,
                                            std::initializer_list<std::int64_t> axes,
                                            bool keepdims) {
  return reduce(o, x, std::span<const std::int64_t>(axes.begin(), axes.size()), keepdims);
}

KILN_RUNTIME_API graph::value graph::select(value cond, value a, value b) {
  return apply(ir::op::select, {cond, a, b});
}

KILN_RUNTIME_API graph::value graph::transpose(value x, sizes perm) {
  return wrap(b_.transpose(id_of(x, "transpose", 1), perm));
}

KILN_RUNTIME_API graph::value graph::transpose(value x, size_list perm) {
  return transpose(x, list(perm));
}

KILN_RUNTIME_API graph::value graph::reshape(value x, sizes shape, bool allow_zero) {
  return wrap(b_.reshape(id_of(x, "reshape", 1), shape, allow_zero));
}

KILN_RUNTIME_API graph::value graph::reshape(value x, size_list shape, bool allow_zero) {
  return reshape(x, list(shape), allow_zero);
}

KILN_RUNTIME_API graph::extent graph::extent_of_dim(std::int64_t d) {
  extent e;
  e.d_ = d;
  e.run_time_ = ir::is_symbol(d);
  return e;
}

KILN_RUNTIME_API void graph::check_extents(const char* op, extent a, extent b) {
  for (const extent& e : {a, b})
    if (e.is_static() && e.d_ < 0)
      throw error(errc::invalid_argument, op, "size " + std::to_string(e.d_));
}

KILN_RUNTIME_API graph::extent graph::extent_of(value v, int axis) const {
  const shape& d = node(v).dims;
  if (axis < -d.rank || axis >= d.rank)
    throw error(errc::invalid_argument, "extent_of",
                "axis " + std::to_string(axis) + " of a value of rank " + std::to_string(d.rank));
  return extent_of_dim(d.dims[axis < 0 ? axis + d.rank : axis]);
}

KILN_RUNTIME_API graph::extent graph::product(extent a, extent b) {
  check_extents("product", a, b);
  return extent_of_dim(b_.size_product(a.d_, b.d_));
}

KILN_RUNTIME_API graph::extent graph::quotient(extent a, extent b) {
  check_extents("quotient", a, b);
  if (b.is_static() && b.d_ == 0) throw error(errc::invalid_argument, "quotient", "divides by 0");
  if (a.is_static() && b.is_static() && a.d_ % b.d_ != 0)
    throw error(errc::shape_mismatch, "quotient",
                std::to_string(a.d_) + " is not a multiple of " + std::to_string(b.d_));
  return extent_of_dim(b_.size_quotient(a.d_, b.d_));
}

KILN_RUNTIME_API graph::extent graph::sum(extent a, extent b) {
  check_extents("sum", a, b);
  return extent_of_dim(b_.size_sum(a.d_, b.d_));
}

KILN_RUNTIME_API graph::extent graph::difference(extent a, extent b) {
  check_extents("difference", a, b);
  return extent_of_dim(b_.size_difference(a.d_, b.d_));
}

KILN_RUNTIME_API graph::extent graph::floor_quotient(extent a, extent b) {
  check_extents("floor_quotient", a, b);
  if (b.is_static() && b.d_ == 0)
    throw error(errc::invalid_argument, "floor_quotient", "divides by 0");
  return extent_of_dim(b_.size_floor_quotient(a.d_, b.d_));
}

KILN_RUNTIME_API graph::extent graph::bound(ir::symbol_kind kind, const char* op, extent a,
                                            extent b) {
  check_extents(op, a, b);
  if (!a.is_static() && !b.is_static())
    throw error(errc::unsupported, op, "of two run-time sizes: one must be static");
  return extent_of_dim(
      b_.size_bound(kind, a.is_static() ? b.d_ : a.d_, a.is_static() ? a.d_ : b.d_));
}

KILN_RUNTIME_API graph::extent graph::minimum(extent a, extent b) {
  return bound(ir::symbol_kind::minimum, "minimum", a, b);
}

KILN_RUNTIME_API graph::extent graph::maximum(extent a, extent b) {
  return bound(ir::symbol_kind::maximum, "maximum", a, b);
}

KILN_RUNTIME_API graph::value graph::reshape(value x, std::span<const extent> shape,
                                             bool allow_zero) {
  // The IR's sizes, the -1's place told apart (an IR size of -1 is a symbol); the builder copies
  // the 0s and infers the -1 as the sizes-of-integers reshape does.
  std::vector<std::int64_t> dims;
  int inferred = -1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const extent& e = shape[i];
    if (e.is_static() && e.d_ == -1) {
      if (inferred >= 0)
        throw error(errc::invalid_argument, "reshape", "has more than one size of -1");
      inferred = static_cast<int>(i);
    } else if (e.is_static() && e.d_ < 0) {
      throw error(errc::invalid_argument, "reshape",
                  "size " + std::to_string(i) + " is " + std::to_string(e.d_));
    }
    dims.push_back(e.d_);
  }
  return wrap(b_.reshape(id_of(x, "reshape", 1), dims, allow_zero, true, inferred));
}

KILN_RUNTIME_API graph::value graph::expand(value x, std::span<const extent> shape) {
  const std::int32_t a = id_of(x, "expand", 1);
  if (static_cast<int>(shape.size()) > max_rank)
    throw error(errc::invalid_argument, "expand",
                "has " + std::to_string(shape.size()) + " sizes, above kiln::max_rank");
  kiln::shape d;
  d.rank = static_cast<int>(shape.size());
  for (int i = 0; i < d.rank; ++i) {
    const extent& e = shape[static_cast<std::size_t>(i)];
    if (e.is_static() && e.d_ < 0)
      throw error(errc::invalid_argument, "expand",
                  "size " + std::to_string(i) + " is " + std::to_string(e.d_));
    d.dims[i] = e.d_;
  }
  return wrap(b_.expand(a, d));
}

KILN_RUNTIME_API graph::value graph::expand(value x, sizes shape) {
  return wrap(b_.expand(id_of(x, "expand", 1), make_shape(shape, "expand", "the shape")));
}

KILN_RUNTIME_API graph::value graph::expand(value x, size_list shape) {
  return expand(x, list(shape));
}

KILN_RUNTIME_API graph::value graph::slice(value x, sizes starts, sizes ends, sizes axes,
                                           sizes steps) {
  return wrap(b_.slice(id_of(x, "slice", 1), starts, ends, axes, steps));
}

KILN_RUNTIME_API graph::value graph::slice(value x, size_list starts, size_list ends,
                                           size_list axes, size_list steps) {
  return slice(x, list(starts), list(ends), list(axes), list(steps));
}

KILN_RUNTIME_API graph::value graph::slice(value x, int axis, extent start, extent end) {
  check_extents("slice", start, end);
  const std::int32_t id = id_of(x, "slice", 1);
  const int rank = node(x).dims.rank;
  if (axis < -rank || axis >= rank)
    throw error(
        errc::invalid_argument, "slice",
        "axis " + std::to_string(axis) + " is out of range for x of rank " + std::to_string(rank));
  const int ax = axis < 0 ? axis + rank : axis;
  const extent size = difference(end, start), have = extent_of(x, ax);
  if (have.is_static() && end.is_static() && end.d_ > have.d_)
    throw error(errc::shape_mismatch, "slice",
                "end " + std::to_string(end.d_) + " passes x's size " + std::to_string(have.d_) +
                    " along axis " + std::to_string(ax));
  if (start.is_static() && end.is_static() && have.is_static()) {
    const std::int64_t starts[] = {start.d_}, ends[] = {end.d_}, axes[] = {ax};
    return slice(x, starts, ends, axes);
  }
  // A window: a shift reading position j + start (a run-time start subtracted from its begin).
  return wrap(b_.shift(id, ax, size.d_, start.is_static() ? -start.d_ : 0, ir::position_fold::clamp,
                       start.is_static() ? -1 : ir::symbol_of(start.d_), true));
}

KILN_RUNTIME_API graph::value graph::gather(value data, value indices, std::int64_t axis) {
  return wrap(b_.gather(id_of(data, "gather", 1), id_of(indices, "gather", 2), axis));
}

KILN_RUNTIME_API graph::value graph::gather_elements(value data, value indices, std::int64_t axis) {
  return wrap(b_.gather_elements(id_of(data, "gather_elements", 1),
                                 id_of(indices, "gather_elements", 2), axis));
}

KILN_RUNTIME_API graph::value graph::pad(value x, sizes pads, std::string_view mode) {
  return wrap(ir::pad(b_, id_of(x, "pad", 1), pads, pad_mode_of(mode)));
}

KILN_RUNTIME_API graph::value graph::pad(value x, size_list pads, std::string_view mode) {
  return pad(x, list(pads), mode);
}

KILN_RUNTIME_API graph::value graph::pad(value x, sizes pads, value constant_value) {
  return wrap(ir::pad(b_, id_of(x, "pad", 1), pads, ir::pad_mode::constant,
                      id_of(constant_value, "pad", 3)));
}

KILN_RUNTIME_API graph::value graph::pad(value x, size_list pads, value constant_value) {
  return pad(x, list(pads), constant_value);
}

KILN_RUNTIME_API graph::value graph::max_pool(value x, const ir::pool_window& w) {
  return wrap(ir::pool(b_, id_of(x, "max_pool", 1), w, false));
}

KILN_RUNTIME_API graph::value graph::max_pool(value x, const pool_params& p) {
  return max_pool(x, ir::window_of(p));
}

KILN_RUNTIME_API graph::value graph::average_pool(value x, const ir::pool_window& w) {
  return wrap(ir::pool(b_, id_of(x, "average_pool", 1), w, true));
}

KILN_RUNTIME_API graph::value graph::average_pool(value x, const pool_params& p) {
  return average_pool(x, ir::window_of(p));
}

KILN_RUNTIME_API graph::value graph::global_max_pool(value x) {
  return wrap(ir::global_pool(b_, id_of(x, "global_max_pool", 1), false));
}

KILN_RUNTIME_API graph::value graph::global_average_pool(value x) {
  return wrap(ir::global_pool(b_, id_of(x, "global_average_pool", 1), true));
}

KILN_RUNTIME_API graph::value graph::matmul(value a, value b) {
  return wrap(b_.matmul(id_of(a, "matmul", 1), id_of(b, "matmul", 2)));
}

KILN_RUNTIME_API graph::value graph::gemm(value a, value b, value c, double alpha, double beta,
                                          bool trans_a, bool trans_b) {
  return wrap(ir::gemm(b_, id_of(a, "gemm", 1), id_of(b, "gemm", 2), id_of(c, "gemm", 3), alpha,
                       beta, trans_a, trans_b));
}

KILN_RUNTIME_API graph::value graph::gemm(value a, value b, double alpha, bool trans_a,
                                          bool trans_b) {
  return wrap(
      ir::gemm(b_, id_of(a, "gemm", 1), id_of(b, "gemm", 2), -1, alpha, 0.0, trans_a, trans_b));
}

KILN_RUNTIME_API graph::value graph::matmul_integer(value a, value b) {
  return wrap(ir::matmul_integer(b_, id_of(a, "matmul_integer", 1), id_of(b, "matmul_integer", 2)));
}

KILN_RUNTIME_API graph::value graph::matmul_integer(value a, value b, value a_zero, value b_zero) {
  return wrap(ir::matmul_integer(b_, id_of(a, "matmul_integer", 1), id_of(b, "matmul_integer", 2),
                                 id_of(a_zero, "matmul_integer", 3),
                                 id_of(b_zero, "matmul_integer", 4)));
}

KILN_RUNTIME_API graph::value graph::conv(value x, value w, const ir::conv_window& c) {
  return wrap(ir::conv(b_, id_of(x, "conv", 1), id_of(w, "conv", 2), c));
}

KILN_RUNTIME_API graph::value graph::conv(value x, value w, value bias, const ir::conv_window& c) {
  return wrap(ir::conv(b_, id_of(x, "conv", 1), id_of(w, "conv", 2), c, id_of(bias, "conv", 3)));
}

KILN_RUNTIME_API graph::value graph::conv(value x, value w, const conv_params& p) {
  return conv(x, w, ir::window_of(p));
}

KILN_RUNTIME_API graph::value graph::conv(value x, value w, value bias, const conv_params& p) {
  return conv(x, w, bias, ir::window_of(p));
}

KILN_RUNTIME_API graph::value graph::conv_transpose(value x, value w, const ir::conv_window& c) {
  return wrap(
      ir::conv_transpose(b_, id_of(x, "conv_transpose", 1), id_of(w, "conv_transpose", 2), c));
}

KILN_RUNTIME_API graph::value graph::conv_transpose(value x, value w, value bias,
                                                    const ir::conv_window& c) {
  return wrap(ir::conv_transpose(b_, id_of(x, "conv_transpose", 1), id_of(w, "conv_transpose", 2),
                                 c, id_of(bias, "conv_transpose", 3)));
}

KILN_RUNTIME_API graph::value graph::concat(std::span<const value> pieces, std::int64_t axis) {
  std::vector<std::int32_t> ids;
  for (std::size_t k = 0; k < pieces.size(); ++k)
    ids.push_back(id_of(pieces[k], "concat", static_cast<int>(k) + 1));
  return wrap(ir::concat(b_, ids, axis));
}

KILN_RUNTIME_API graph::value graph::concat(std::initializer_list<value> pieces,
                                            std::int64_t axis) {
  return concat(std::span<const value>(pieces.begin(), pieces.size()), axis);
}

KILN_RUNTIME_API graph::value graph::flatten(value x, std::int64_t axis) {
  std::int32_t id = id_of(x, "flatten", 1);
  const shape& d = b_.get().nodes[id].dims;
  if (axis < -d.rank || axis > d.rank)
    throw error(errc::invalid_argument, "flatten",
                "axis " + std::to_string(axis) + " is out of range for an operand of rank " +
                    std::to_string(d.rank) + " (expected " + std::to_string(-d.rank) + " to " +
                    std::to_string(d.rank) + ")");
  if (axis < 0) axis += d.rank;
  // [N, C, H, W] -> [N, C H W] with N known only at the call (a classifier's head): N is copied
  // (the 0 of a reshape) where the rest is static.
  if (axis == 1 && d.dims[0] < 0) {
    std::int64_t inner = 1;
    for (int i = 1; i < d.rank; ++i) inner *= static_dim(d, i, "flatten");
    std::int64_t result[2] = {0, inner};
    return wrap(b_.reshape(id, result));
  }
  std::int64_t outer = 1;
  for (int i = 0; i < axis; ++i) outer *= static_dim(d, i, "flatten");
  std::int64_t result[2] = {outer, -1};
  return wrap(b_.reshape(id, result));
}

KILN_RUNTIME_API graph::value graph::squeeze(value x, sizes axes) {
  std::int32_t id = id_of(x, "squeeze", 1);
  const shape& d = b_.get().nodes[id].dims;
  std::uint32_t mask = 0;
  if (axes.empty()) {
    for (int i = 0; i < d.rank; ++i)
      if (d.dims[i] == 1) mask |= 1u << i;
  } else {
    mask = axes_mask("squeeze", id, axes);
    for (int i = 0; i < d.rank; ++i)
      if ((mask >> i) & 1u && d.dims[i] != 1)
        throw error(errc::shape_mismatch, "squeeze",
                    "axis " + std::to_string(i) + " of " + to_string(d) + " is not of size 1");
  }
  std::vector<std::int64_t> result;
  for (int i = 0; i < d.rank; ++i)
    if (!((mask >> i) & 1u)) result.push_back(moved_size(d, i, result.size()));
  return wrap(b_.reshape(id, result));
}

KILN_RUNTIME_API graph::value graph::squeeze(value x, size_list axes) {
  return squeeze(x, list(axes));
}

KILN_RUNTIME_API graph::value graph::unsqueeze(value x, sizes axes) {
  std::int32_t id = id_of(x, "unsqueeze", 1);
  const shape& d = b_.get().nodes[id].dims;
  const int rank = d.rank + static_cast<int>(axes.size());
  std::uint32_t mask = 0;
  for (std::int64_t a : axes) {
    if (a < -rank || a >= rank)
      throw error(errc::invalid_argument, "unsqueeze",
                  "axis " + std::to_string(a) + " is out of range for a result of rank " +
                      std::to_string(rank));
    std::uint32_t bit = 1u << (a < 0 ? a + rank : a);
    if (mask & bit)
      throw error(errc::invalid_argument, "unsqueeze",
                  "axis " + std::to_string(a) + " is given twice");
    mask |= bit;
  }
  std::vector<std::int64_t> result;
  for (int i = 0, from = 0; i < rank; ++i)
    result.push_back((mask >> i) & 1u ? 1 : moved_size(d, from++, result.size()));
  return wrap(b_.reshape(id, result));
}

KILN_RUNTIME_API graph::value graph::unsqueeze(value x, size_list axes) {
  return unsqueeze(x, list(axes));
}

KILN_RUNTIME_API std::vector<graph::value> graph::split(value x, sizes part_sizes,
                                                        std::int64_t axis) {
  std::int32_t id = id_of(x, "split", 1);
  int a = axis_of("split", id, axis);
  std::int64_t n = static_dim(b_.get().nodes[id].dims, a, "split"), at = 0;
  std::vector<value> parts;
  for (std::int64_t size : part_sizes) {
    if (size < 0 || at + size > n)
      throw error(errc::shape_mismatch, "split",
                  "the sizes " + detail::sizes_text(part_sizes) + " do not fit axis " +
                      std::to_string(a) + " of size " + std::to_string(n));
    parts.push_back(slice(x, {at}, {at + size}, {a}));
    at += size;
  }
  if (at != n)
    throw error(errc::shape_mismatch, "split",
                "the sizes " + detail::sizes_text(part_sizes) + " add up to " + std::to_string(at) +
                    ", not the size " + std::to_string(n) + " of axis " + std::to_string(a));
  return parts;
}

KILN_RUNTIME_API std::vector<graph::value> graph::split(value x, size_list part_sizes,
                                                        std::int64_t axis) {
  return split(x, list(part_sizes), axis);
}

KILN_RUNTIME_API std::vector<graph::value> graph::split_equal(value x, std::int64_t count,
                                                              std::int64_t axis) {
  std::int32_t id = id_of(x, "split", 1);
  int a = axis_of("split", id, axis);
  std::int64_t n = static_dim(b_.get().nodes[id].dims, a, "split");
  if (count <= 0 || count > std::max<std::int64_t>(n, 1))
    throw error(
        errc::invalid_argument, "split",
        "cannot make " + std::to_string(count) + " parts of an axis of size " + std::to_string(n));
  std::int64_t each = (n + count - 1) / count;
  std::vector<std::int64_t> part_sizes;
  for (std::int64_t at = 0; at < n || part_sizes.empty(); at += each)
    part_sizes.push_back(std::min(each, n - at));
  return split(x, part_sizes, a);
}

KILN_RUNTIME_API graph::value graph::tile(value x, sizes repeats) {
  std::int32_t id = id_of(x, "tile", 1);
  const shape d = b_.get().nodes[id].dims;
  if (static_cast<int>(repeats.size()) != d.rank)
    throw error(errc::invalid_argument, "tile",
                "repeats has " + std::to_string(repeats.size()) +
                    " entries for an operand of rank " + std::to_string(d.rank));
  if (2 * d.rank > max_rank)
    throw error(errc::unsupported, "tile",
                "rank " + std::to_string(d.rank) + " above kiln::max_rank / 2");
  std::vector<std::int64_t> spread, tiled, result;
  for (int i = 0; i < d.rank; ++i) {
    std::int64_t size = static_dim(d, i, "tile");
    if (repeats[i] < 0)
      throw error(errc::invalid_argument, "tile",
                  "repeats[" + std::to_string(i) + "] is " + std::to_string(repeats[i]));
    spread.insert(spread.end(), {1, size});
    tiled.insert(tiled.end(), {repeats[i], size});
    result.push_back(repeats[i] * size);
  }
  return reshape(expand(reshape(x, spread), tiled), result);
}

KILN_RUNTIME_API graph::value graph::tile(value x, size_list repeats) {
  return tile(x, list(repeats));
}

KILN_RUNTIME_API graph::value graph::depth_to_space(value x, std::int64_t block,
                                                    std::string_view mode) {
  auto [c, h, w] = image_sizes(x, "depth_to_space", block, true);
  if (mode != "DCR" && mode != "CRD")
    throw error(errc::invalid_argument, "depth_to_space",
                "mode is '" + std::string(mode) + "', expected DCR or CRD");
  std::int64_t k = c / (block * block);
  bool dcr = mode == "DCR";
  value t = dcr ? reshape(x, {0, block, block, k, h, w}) : reshape(x, {0, k, block, block, h, w});
  t = dcr ? transpose(t, {0, 3, 4, 1, 5, 2}) : transpose(t, {0, 1, 4, 2, 5, 3});
  return reshape(t, {0, k, h * block, w * block});
}

KILN_RUNTIME_API graph::value graph::space_to_depth(value x, std::int64_t block) {
  auto [c, h, w] = image_sizes(x, "space_to_depth", block, false);
  value t = reshape(x, {0, c, h / block, block, w / block, block});
  t = transpose(t, {0, 3, 5, 1, 2, 4});
  return reshape(t, {0, c * block * block, h / block, w / block});
}

KILN_RUNTIME_API graph::value graph::range(double start, double limit, double delta, dtype t) {
  if (delta == 0 || !std::isfinite(start) || !std::isfinite(limit) || !std::isfinite(delta))
    throw error(errc::invalid_argument, "range",
                "start, limit and delta must be finite and delta nonzero");
  auto n = static_cast<std::int64_t>(std::max(std::ceil((limit - start) / delta), 0.0));
  std::vector<unsigned char> bytes(static_cast<std::size_t>(n) * size_in_bytes(t));
  visit_dtype(t, [&]<dtype D>() {
    using S = storage_t<D>;
    for (std::int64_t i = 0; i < n; ++i) {
      S v;
      if constexpr (std::is_integral_v<S>)
        v = static_cast<S>(static_cast<std::int64_t>(start) + i * static_cast<std::int64_t>(delta));
      else
        v = static_cast<S>(static_cast<float>(start + static_cast<double>(i) * delta));
      std::memcpy(bytes.data() + i * sizeof(S), &v, sizeof(S));
    }
  });
  return constant(bytes.data(), t, n, shape{n});
}

KILN_RUNTIME_API graph::value graph::range(extent start, extent limit, std::int64_t delta,
                                           dtype t) {
  check_extents("range", start, limit);
  if (delta == 0) throw error(errc::invalid_argument, "range", "delta is 0");
  if (start.is_static() && limit.is_static())
    return range(static_cast<double>(start.d_), static_cast<double>(limit.d_),
                 static_cast<double>(delta), t);
  // The count ceil(span / |delta|), span the distance from start toward limit.
  const extent span = delta > 0 ? difference(limit, start) : difference(start, limit);
  const std::int64_t step = delta > 0 ? delta : -delta;
  const extent n = step == 1 ? span : floor_quotient(sum(span, step - 1), step);
  value i = n.is_static() ? range(0.0, static_cast<double>(n.d_), 1.0, dtype::i64)
                          : wrap(b_.positions(n.d_));
  value v = t == dtype::i64 ? i : cast(i, t);
  if (delta != 1) v = mul(v, constant(static_cast<double>(delta), t));
  if (start != extent(0)) v = add(v, size_value(start, t));
  return v;
}

KILN_RUNTIME_API graph::value graph::size_value(extent e, dtype t) {
  if (e.is_static()) return constant(static_cast<double>(e.d_), t);
  const extent dims[] = {e};
  value n = reduce(ir::op::reduce_sum, expand(constant(1.0, dtype::i64), dims), {0}, false);
  return t == dtype::i64 ? n : cast(n, t);
}

KILN_RUNTIME_API graph::value graph::batch_norm(value x, value scale, value bias, value mean,
                                                value var, double epsilon) {
  return wrap(ir::batch_norm(b_, id_of(x, "batch_norm", 1), id_of(scale, "batch_norm", 2),
                             id_of(bias, "batch_norm", 3), id_of(mean, "batch_norm", 4),
                             id_of(var, "batch_norm", 5), epsilon));
}

KILN_RUNTIME_API graph::value graph::instance_norm(value x, value scale, value bias,
                                                   double epsilon) {
  return wrap(ir::instance_norm(b_, id_of(x, "instance_norm", 1), id_of(scale, "instance_norm", 2),
                                id_of(bias, "instance_norm", 3), epsilon));
}

KILN_RUNTIME_API graph::value graph::group_norm(value x, value scale, value bias,
                                                std::int64_t groups, double epsilon) {
  return wrap(ir::group_norm(b_, id_of(x, "group_norm", 1), id_of(scale, "group_norm", 2),
                             id_of(bias, "group_norm", 3), groups, epsilon));
}

KILN_RUNTIME_API graph::value graph::softmax(value x, std::int64_t axis) {
  std::int32_t id = id_of(x, "softmax", 1);
  return wrap(ir::softmax(b_, id, axis_of("softmax", id, axis)));
}

KILN_RUNTIME_API graph::value graph::log_softmax(value x, std::int64_t axis) {
  std::int32_t id = id_of(x, "log_softmax", 1);
  return wrap(ir::log_softmax(b_, id, axis_of("log_softmax", id, axis)));
}

KILN_RUNTIME_API graph::value graph::reduce_log_sum_exp(value x, std::span<const std::int64_t> axes,
                                                        bool keepdims) {
  std::int32_t id = id_of(x, "reduce_log_sum_exp", 1);
  return wrap(ir::reduce_log_sum_exp(b_, id, axes_mask("reduce_log_sum_exp", id, axes), keepdims));
}

KILN_RUNTIME_API graph::value graph::reduce_log_sum_exp(value x,
                                                        std::initializer_list<std::int64_t> axes,
                                                        bool keepdims) {
  return reduce_log_sum_exp(x, std::span<const std::int64_t>(axes.begin(), axes.size()), keepdims);
}

KILN_RUNTIME_API graph::value graph::layer_norm(value x, value scale, value bias, std::int64_t axis,
                                                double epsilon) {
  return layer_norm(x, scale, id_of(bias, "layer_norm", 3), axis, epsilon);
}

KILN_RUNTIME_API graph::value graph::layer_norm(value x, value scale, std::int64_t axis,
                                                double epsilon) {
  return layer_norm(x, scale, std::int32_t{-1}, axis, epsilon);
}

KILN_RUNTIME_API graph::value graph::rms_norm(value x, value scale, std::int64_t axis,
                                              double epsilon) {
  std::int32_t id = id_of(x, "rms_norm", 1);
  std::int32_t s = id_of(scale, "rms_norm", 2);
  return wrap(ir::rms_norm(b_, id, s, axis_of("rms_norm", id, axis), epsilon));
}

KILN_RUNTIME_API graph::value graph::leaky_relu(value x, double alpha) {
  value zero = constant(0.0, type_of(x));
  return select(lt(x, zero), mul(x, constant(alpha, type_of(x))), x);
}

KILN_RUNTIME_API graph::value graph::prelu(value x, value slope) {
  return select(lt(x, constant(0.0, type_of(x))), mul(x, slope), x);
}

KILN_RUNTIME_API graph::value graph::elu(value x, double alpha) {
  return select(lt(x, constant(0.0, type_of(x))), mul(constant(alpha, type_of(x)), expm1(x)), x);
}

KILN_RUNTIME_API graph::value graph::selu(value x, double alpha, double gamma) {
  const dtype t = type_of(x);
  value negative = mul(constant(alpha, t), expm1(x));
  return mul(constant(gamma, t), select(le(x, constant(0.0, t)), negative, x));
}

KILN_RUNTIME_API graph::value graph::celu(value x, double alpha) {
  const dtype t = type_of(x);
  value zero = constant(0.0, t);
  value a = constant(alpha, t);
  return add(max(zero, x), min(zero, mul(a, expm1(div(x, a)))));
}

KILN_RUNTIME_API graph::value graph::hard_sigmoid(value x, double alpha, double beta) {
  const dtype t = type_of(x);
  value y = add(mul(constant(alpha, t), x), constant(beta, t));
  return clip(y, constant(0.0, t), constant(1.0, t));
}

KILN_RUNTIME_API graph::value graph::hard_swish(value x) {
  return mul(x, hard_sigmoid(x, 1.0 / 6.0, 0.5));
}

KILN_RUNTIME_API graph::value graph::mish(value x) { return mul(x, tanh(softplus(x))); }

KILN_RUNTIME_API graph::value graph::thresholded_relu(value x, double alpha) {
  const dtype t = type_of(x);
  return select(gt(x, constant(alpha, t)), x, constant(0.0, t));
}

KILN_RUNTIME_API graph::value graph::shrink(value x, double bias, double lambd) {
  const dtype t = type_of(x);
  value above = select(gt(x, constant(lambd, t)), sub(x, constant(bias, t)), constant(0.0, t));
  return select(lt(x, constant(-lambd, t)), add(x, constant(bias, t)), above);
}

KILN_RUNTIME_API graph::value graph::gelu(value x, std::string_view approximate) {
  const dtype t = type_of(x);
  value half_x = mul(constant(0.5, t), x);
  value one = constant(1.0, t);
  if (approximate == "none")
    return mul(half_x, add(one, erf(mul(x, constant(0.70710678118654752440, t)))));
  if (approximate != "tanh")
    throw error(errc::invalid_argument, "gelu",
                "approximate is '" + std::string(approximate) + "', expected 'none' or 'tanh'");
  value cube = mul(mul(x, x), x);
  value inner = mul(constant(0.79788456080286535588, t), add(x, mul(constant(0.044715, t), cube)));
  return mul(half_x, add(one, tanh(inner)));
}

KILN_RUNTIME_API void graph::set_name(std::string_view name) {
  if (!detail::is_function_name(name))
    throw error(errc::invalid_argument, "graph::set_name",
                "the name " + detail::quoted(name) +
                    " is not 1 to 63 letters, digits, '_', '-' or '.' (not first: '.', '-')");
  name_ = name;
}

KILN_RUNTIME_API void graph::output(std::string_view name, value v) {
  check_name("output", name, outputs_);
  b_.output(id_of(v, "output", 1));
  outputs_.emplace_back(name);
}

KILN_RUNTIME_API graph::value graph::variable(std::string_view name, dtype t,
                                              std::initializer_list<std::int64_t> dims) {
  return variable(name, t, shape_of(dims, "variable", detail::quoted(name)));
}

KILN_RUNTIME_API graph::value graph::variable(std::string_view name, dtype t, const shape& dims) {
  check_name("variable", name, inputs_);
  for (const auto& v : variables_)
    if (v.name == name)
      throw error(errc::invalid_argument, "variable",
                  "the name '" + std::string(name) + "' is used twice");
  if (!is_valid(t))
    throw error(errc::invalid_argument, "variable",
                detail::quoted(name) + ": dtype value " + std::to_string(static_cast<int>(t)) +
                    " is not a kiln::dtype");
  if (!dims.is_static())
    throw error(errc::invalid_argument, "variable",
                detail::quoted(name) + " needs static extents, got " + to_string(dims));
  checked_element_count(dims, size_in_bytes(t), "variable", detail::quoted(name));
  value v = wrap(b_.input(t, dims));
  variables_.push_back({std::string(name), b_.get().nodes[v.id].arg, -1});
  return v;
}

KILN_RUNTIME_API void graph::assign(value var, value x) {
  std::int32_t id = id_of(var, "assign", 1), xid = id_of(x, "assign", 2);
  const ir::node& vn = b_.get().nodes[id];
  variable_slot* slot = nullptr;
  for (auto& v : variables_)
    if (vn.kind == ir::op::input && v.arg == vn.arg) slot = &v;
  if (!slot)
    throw error(errc::invalid_argument, "assign",
                "operand 1 is not a variable (graph::variable gives them)");
  if (slot->assigned >= 0)
    throw error(errc::invalid_argument, "assign",
                "variable '" + slot->name + "' is assigned twice");
  const ir::node& xn = b_.get().nodes[xid];
  if (xn.type != vn.type)
    throw error(errc::dtype_mismatch, "assign",
                "variable '" + slot->name + "' is " + std::string(kiln::name(vn.type)) +
                    " but the value is " + std::string(kiln::name(xn.type)));
  if (!(xn.dims == vn.dims))
    throw error(errc::shape_mismatch, "assign",
                "variable '" + slot->name + "' has extents " + to_string(vn.dims) +
                    " but the value has " + to_string(dims_of(x)));
  slot->assigned = xid;
}

KILN_RUNTIME_API graph::value graph::trace(std::string_view name, value v) {
  return wrap(b_.trace(name, id_of(v, "trace", 1)));
}

KILN_RUNTIME_API std::array<std::int64_t, 3> graph::image_sizes(value x, const char* op,
                                                                std::int64_t block,
                                                                bool from_depth) const {
  const shape& d = b_.get().nodes[id_of(x, op, 1)].dims;
  if (d.rank != 4)
    throw error(errc::shape_mismatch, op, "x has dims " + to_string(d) + ", expected [N, C, H, W]");
  std::array<std::int64_t, 3> chw = {static_dim(d, 1, op), static_dim(d, 2, op),
                                     static_dim(d, 3, op)};
  bool fits = block > 0 && (from_depth ? chw[0] % (block * block) == 0
                                       : chw[1] % block == 0 && chw[2] % block == 0);
  if (!fits)
    throw error(errc::shape_mismatch, op,
                "blocksize " + std::to_string(block) + " does not divide " +
                    (from_depth ? "the channels of " : "the height and width of ") + to_string(d));
  return chw;
}

KILN_RUNTIME_API std::int64_t graph::moved_size(const shape& d, int i, std::size_t to) {
  if (!ir::is_symbol(d.dims[i])) return d.dims[i];
  return static_cast<std::size_t>(i) == to ? 0 : -1;
}

KILN_RUNTIME_API shape graph::make_shape(sizes d, const char* who, const char* what) {
  if (d.size() > static_cast<std::size_t>(max_rank))
    throw error(errc::invalid_argument, who,
                std::string(what) + " has rank " + std::to_string(d.size()) +
                    ", above kiln::max_rank (" + std::to_string(max_rank) + ")");
  shape r;
  for (std::int64_t v : d) {
    if (v < 0)
      throw error(errc::invalid_argument, who,
                  std::string(what) + " has a negative size " + std::to_string(v));
    r.dims[r.rank++] = v;
  }
  return r;
}

KILN_RUNTIME_API std::int64_t graph::static_dim(const shape& d, int i, const char* op) {
  if (ir::is_symbol(d.dims[i]))
    throw error(errc::shape_mismatch, op,
                "axis " + std::to_string(i) + " of the operand has a run-time size");
  return d.dims[i];
}

KILN_RUNTIME_API graph::value graph::layer_norm(value x, value scale, std::int32_t bias,
                                                std::int64_t axis, double epsilon) {
  std::int32_t id = id_of(x, "layer_norm", 1);
  std::int32_t s = id_of(scale, "layer_norm", 2);
  return wrap(ir::layer_norm(b_, id, s, bias, axis_of("layer_norm", id, axis), epsilon));
}

KILN_RUNTIME_API int graph::axis_of(std::string_view op, std::int32_t id, std::int64_t axis) const {
  int rank = b_.get().nodes[id].dims.rank;
  if (axis < -rank || axis >= rank)
    throw error(errc::invalid_argument, std::string(op),
                "axis " + std::to_string(axis) + " is out of range for an operand of rank " +
                    std::to_string(rank) + " (expected " + std::to_string(-rank) + " to " +
                    std::to_string(rank - 1) + ")");
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

KILN_RUNTIME_API std::uint32_t graph::axes_mask(std::string_view op, std::int32_t id,
                                                std::span<const std::int64_t> axes) const {
  int rank = b_.get().nodes[id].dims.rank;
  if (axes.empty()) return rank == 0 ? 0 : static_cast<std::uint32_t>((1ull << rank) - 1);
  std::uint32_t mask = 0;
  for (std::int64_t a : axes) {
    std::uint32_t bit = 1u << axis_of(op, id, a);
    if (mask & bit)
      throw error(errc::invalid_argument, std::string(op),
                  "axis " + std::to_string(a) + " is given twice");
    mask |= bit;
  }
  return mask;
}

KILN_RUNTIME_API ir::pad_mode graph::pad_mode_of(std::string_view mode) {
  if (mode == "constant") return ir::pad_mode::constant;
  if (mode == "edge") return ir::pad_mode::edge;
  if (mode == "reflect") return ir::pad_mode::reflect;
  if (mode == "wrap") return ir::pad_mode::wrap;
  throw error(errc::invalid_argument, "pad",
              "mode is '" + std::string(mode) + "', expected constant, edge, reflect or wrap");
}

KILN_RUNTIME_API void graph::check_name(const char* what, std::string_view name,
                                        const std::vector<std::string>& taken) {
  if (name.empty()) throw error(errc::invalid_argument, what, "the name is empty");
  for (const auto& t : taken)
    if (t == name)
      throw error(errc::invalid_argument, what,
                  "the name '" + std::string(name) + "' is already taken");
}
#endif  // KILN_RUNTIME_BODY

}  // namespace kiln

#if KILN_RUNTIME_BODY
#include "kiln/graph/composites.hpp"
#include "kiln/graph/random.hpp"
#endif
