// kiln::onnx::import_bytes on damaged models: ONNX's own test models with bytes flipped, cut,
// duplicated or set to boundary values. Each mutant is imported (and, where that succeeds,
// compiled and run on zeros); the only outcomes allowed are success and a kiln::error. Half the
// mutants edit bytes, half edit fields of the parsed model (so that they pass the parser and reach
// the checker, the shape inference and kiln's lowerings). A crash,
// a hang or any other exception fails. KILN_ONNX_FUZZ_COUNT sets the number of mutants.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include <onnx/onnx_pb.h>

#include <climits>

#include <kiln/onnx.hpp>

namespace {

namespace fs = std::filesystem;

std::vector<std::vector<std::uint8_t>> seed_models() {
  const char* root = std::getenv("KILN_ONNX_DATA");
  std::vector<std::vector<std::uint8_t>> seeds;
  if (!root) return seeds;
  // A spread of ops: elementwise, shapes, reductions, contractions, a converted network layer.
  for (const char* name :
       {"node/test_add_bcast", "node/test_reshape_reordered_all_dims",
        "node/test_conv_with_strides_padding", "node/test_gemm_all_attributes",
        "node/test_softmax_axis_1", "node/test_slice_neg_steps",
        "node/test_layer_normalization_4d_axis1", "node/test_reduce_sum_keepdims_example",
        "node/test_gather_elements_1", "node/test_maxpool_2d_pads",
        "node/test_cast_FLOAT_to_FLOAT16", "node/test_nllloss_NCd1d2_with_weight",
        "pytorch-converted/test_Conv2d_depthwise_padded", "pytorch-converted/test_Linear",
        "simple/test_expand_shape_model1"}) {
    std::ifstream in(fs::path(root) / name / "model.onnx", std::ios::binary);
    std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                    std::istreambuf_iterator<char>());
    if (!bytes.empty()) seeds.push_back(std::move(bytes));
  }
  return seeds;
}

std::vector<std::uint8_t> mutate(std::vector<std::uint8_t> b, std::mt19937_64& rng) {
  auto pick = [&](std::size_t n) {
    return static_cast<std::size_t>(rng() % std::max<std::size_t>(n, 1));
  };
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits && !b.empty(); ++e) {
    std::size_t at = pick(b.size());
    switch (rng() % 6) {
      case 0:  // one bit
        b[at] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
        break;
      case 1:  // a boundary byte (varint continuation, sign, zero)
        b[at] = std::array<std::uint8_t, 6>{0x00, 0x01, 0x7F, 0x80, 0xFF, 0xFE}[rng() % 6];
        break;
      case 2:  // cut the tail
        b.resize(at);
        break;
      case 3: {  // duplicate a run
        std::size_t n = std::min<std::size_t>(1 + pick(16), b.size() - at);
        std::vector<std::uint8_t> run(b.begin() + static_cast<std::ptrdiff_t>(at),
                                      b.begin() + static_cast<std::ptrdiff_t>(at + n));
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(pick(b.size())), run.begin(), run.end());
        break;
      }
      case 4:  // delete a run
        b.erase(b.begin() + static_cast<std::ptrdiff_t>(at),
                b.begin() + static_cast<std::ptrdiff_t>(std::min(b.size(), at + 1 + pick(8))));
        break;
      default:  // a small integer written over a byte (dims, attribute values, types)
        b[at] = static_cast<std::uint8_t>(rng() % 20);
    }
  }
  return b;
}

// A structured edit that keeps the bytes a valid ModelProto, so that the checker, the shape
// inference and kiln's lowerings see it: an attribute, a dim, a data type, an input name, an op
// type, tensor data cut short, an external data location outside the model's folder.
std::vector<std::uint8_t> mutate_fields(const std::vector<std::uint8_t>& seed,
                                        std::mt19937_64& rng) {
  ::onnx::ModelProto m;
  if (!m.ParseFromArray(seed.data(), static_cast<int>(seed.size()))) return seed;
  auto* g = m.mutable_graph();
  const std::int64_t extremes[] = {-1, 0, 1, 2, 7, -9, 1 << 20, INT64_MAX, INT64_MIN, 3};
  auto extreme = [&] { return extremes[rng() % std::size(extremes)]; };
  const char* ops[] = {"Add",    "Reshape", "Conv",   "Gemm",    "Softmax",
                       "Slice",  "Gather",  "Pad",    "MaxPool", "Transpose",
                       "Concat", "Split",   "Expand", "CumSum",  "Cast"};
  const int edits = 1 + static_cast<int>(rng() % 3);
  for (int e = 0; e < edits; ++e) {
    switch (rng() % 8) {
      case 0:  // an attribute's integer(s)
        for (auto& n : *g->mutable_node())
          for (auto& a : *n.mutable_attribute()) {
            if (rng() % 2) continue;
            if (a.type() == ::onnx::AttributeProto::INT) a.set_i(extreme());
            if (a.type() == ::onnx::AttributeProto::INTS && a.ints_size() > 0)
              a.set_ints(static_cast<int>(rng() % static_cast<std::uint64_t>(a.ints_size())),
                         extreme());
            if (a.type() == ::onnx::AttributeProto::FLOAT) a.set_f(static_cast<float>(extreme()));
          }
        break;
      case 1:  // an initializer's dim
        if (g->initializer_size() > 0) {
          auto& t = *g->mutable_initializer(
              static_cast<int>(rng() % static_cast<std::uint64_t>(g->initializer_size())));
          if (t.dims_size() > 0)
            t.set_dims(static_cast<int>(rng() % static_cast<std::uint64_t>(t.dims_size())),
                       extreme());
          else
            t.add_dims(extreme());
        }
        break;
      case 2:  // an input's dim or element type
        if (g->input_size() > 0) {
          auto* tt = g->mutable_input(
                          static_cast<int>(rng() % static_cast<std::uint64_t>(g->input_size())))
                         ->mutable_type()
                         ->mutable_tensor_type();
          if (rng() % 2)
            tt->set_elem_type(static_cast<int>(rng() % 18));
          else if (tt->shape().dim_size() > 0)
            tt->mutable_shape()
                ->mutable_dim(
                    static_cast<int>(rng() % static_cast<std::uint64_t>(tt->shape().dim_size())))
                ->set_dim_value(extreme());
        }
        break;
      case 3:  // a node's op type
        if (g->node_size() > 0)
          g->mutable_node(static_cast<int>(rng() % static_cast<std::uint64_t>(g->node_size())))
              ->set_op_type(ops[rng() % std::size(ops)]);
        break;
      case 4:  // a node input renamed, dropped or emptied
        for (auto& n : *g->mutable_node())
          if (n.input_size() > 0 && rng() % 2) {
            int i = static_cast<int>(rng() % static_cast<std::uint64_t>(n.input_size()));
            if (rng() % 2)
              n.set_input(i, rng() % 2 ? "" : "nowhere");
            else
              n.mutable_input()->RemoveLast();
          }
        break;
      case 5:  // tensor data cut short, or moved to a file outside the model's folder
        if (g->initializer_size() > 0) {
          auto& t = *g->mutable_initializer(0);
          if (rng() % 2 && t.has_raw_data()) {
            t.mutable_raw_data()->resize(t.raw_data().size() / 2);
          } else {
            t.clear_raw_data();
            t.set_data_location(::onnx::TensorProto::EXTERNAL);
            auto* entry = t.add_external_data();
            entry->set_key("location");
            entry->set_value(rng() % 2 ? "../../etc/passwd" : "/etc/passwd");
          }
        }
        break;
      case 6:  // the opset
        if (m.opset_import_size() > 0)
          m.mutable_opset_import(0)->set_version(1 + static_cast<std::int64_t>(rng() % 20));
        break;
      default:  // an initializer's data type
        if (g->initializer_size() > 0)
          g->mutable_initializer(0)->set_data_type(static_cast<int>(rng() % 18));
    }
  }
  std::string out = m.SerializeAsString();
  return {out.begin(), out.end()};
}

TEST(OnnxFuzz, DamagedModelsImportOrRefuseCleanly) {
  auto seeds = seed_models();
  ASSERT_GE(seeds.size(), 10u) << "KILN_ONNX_DATA names libonnx-testdata's data folder";
  const char* count_env = std::getenv("KILN_ONNX_FUZZ_COUNT");
  const int count = count_env ? std::atoi(count_env) : 20000;
  std::mt19937_64 rng(20261128);
  int imported = 0, refused = 0;
  for (int k = 0; k < count; ++k) {
    const auto& seed = seeds[static_cast<std::size_t>(k) % seeds.size()];
    auto bytes = k % 2 ? mutate(seed, rng) : mutate_fields(seed, rng);
    SCOPED_TRACE("mutant " + std::to_string(k));
    try {
      auto m = kiln::onnx::import_bytes(bytes);
      if (m.rest) {  // cut where a size depends on values: run whole, its results allocated
        const kiln::onnx::model model(std::move(m));
        std::vector<std::vector<unsigned char>> data;
        std::vector<kiln::tensor_ref> args;
        bool runnable = true;
        for (const auto& p : model.inputs()) {
          const kiln::shape dims(p.dims);
          runnable = runnable && dims.is_static() && dims.element_count() <= (1 << 20);
          if (!runnable) break;
          data.emplace_back(
              static_cast<std::size_t>(dims.element_count() * kiln::size_in_bytes(p.type)));
          args.emplace_back(static_cast<const void*>(data.back().data()), p.type, dims);
        }
        if (runnable) model.run(args, kiln::device::cpu());
        ++imported;
        continue;
      }
      auto exe = kiln::compile(std::move(m.graph));
      // Zeros for every input with static extents of at most 2^20 elements.
      auto sig = exe.signature();
      std::vector<kiln::shape> in_dims;
      bool runnable = true;
      for (const auto& p : sig.inputs) {
        in_dims.emplace_back(p.dims);
        runnable =
            runnable && in_dims.back().is_static() && in_dims.back().element_count() <= (1 << 20);
      }
      std::vector<std::vector<unsigned char>> data;
      data.reserve(in_dims.size() + sig.results.size());
      std::vector<kiln::tensor_ref> args, results;
      for (std::size_t i = 0; runnable && i < in_dims.size(); ++i) {
        const auto t = sig.inputs[i].type;
        data.emplace_back(
            static_cast<std::size_t>(in_dims[i].element_count() * kiln::size_in_bytes(t)));
        args.emplace_back(static_cast<const void*>(data.back().data()), t, in_dims[i]);
      }
      std::vector<kiln::shape> out_dims;
      if (runnable) out_dims = exe.result_dims(in_dims);
      for (std::size_t r = 0; runnable && r < out_dims.size(); ++r) {
        runnable = out_dims[r].is_static() && out_dims[r].element_count() <= (1 << 22);
        const auto t = sig.results[r].type;
        if (runnable) {
          data.emplace_back(
              static_cast<std::size_t>(out_dims[r].element_count() * kiln::size_in_bytes(t)));
          results.emplace_back(static_cast<void*>(data.back().data()), t, out_dims[r]);
        }
      }
      if (runnable) exe.run(args, results, kiln::device::cpu());
      ++imported;
    } catch (const kiln::error&) {
      ++refused;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "mutant " << k << " threw a non-kiln exception: " << e.what();
    }
  }
  std::printf("%d mutants: %d imported, %d refused with a kiln::error\n", count, imported, refused);
  EXPECT_GT(refused, 0);
}

}  // namespace
