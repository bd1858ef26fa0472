// The SPIR-V builder and the region emitter: deduplication, section order, and every op of every
// dtype under every operand layout emitted and accepted by spirv-val for its target environment.
#include <gtest/gtest.h>

#include <vulkan/vulkan.h>

#include <kiln/codegen/spirv/emit_region.hpp>
#include <kiln/codegen/spirv/tools.hpp>
#include <kiln/ir/convolutions.hpp>
#include <kiln/kiln.hpp>

using namespace kiln;
using ir::op;
using spirv::operand_kind;

namespace {

// A GPU with every feature kernels may use: f64 (so its f32 quotients are taken in f64) and the
// float controls (lavapipe, which the e2e suites validate on, has no DenormPreserve).
spirv::target full_target() {
  spirv::target t;
  t.float64 = t.int64 = true;
  t.preserve_inf_nan32 = t.preserve_inf_nan64 = true;
  t.denorm_preserve32 = t.denorm_preserve64 = true;
  t.denorm_widths = 2;
  return t;
}

// The word offsets of a module's instructions (stopping at a zero word count).
std::vector<std::size_t> instructions(const spirv::words& w) {
  std::vector<std::size_t> at;
  for (std::size_t i = 5; i < w.size() && (w[i] >> 16) > 0; i += w[i] >> 16) at.push_back(i);
  return at;
}
spv::Op opcode(const spirv::words& w, std::size_t i) { return static_cast<spv::Op>(w[i] & 0xFFFF); }
// The operands of every OpExecutionMode of `mode`, and how many instructions have opcode `o`.
std::vector<std::uint32_t> execution_modes(const spirv::words& w, spv::ExecutionMode mode) {
  std::vector<std::uint32_t> widths;
  for (std::size_t i : instructions(w))
    if (opcode(w, i) == spv::Op::OpExecutionMode && w[i + 2] == static_cast<std::uint32_t>(mode))
      widths.push_back(w[i + 3]);
  return widths;
}
int count_ops(const spirv::words& w, spv::Op o) {
  int n = 0;
  for (std::size_t i : instructions(w)) n += opcode(w, i) == o;
  return n;
}

// Section of an opcode in the logical layout (spec 2.4), or -1 for function-body instructions.
int section_of(spv::Op o) {
  switch (o) {
    case spv::Op::OpCapability:
      return 0;
    case spv::Op::OpExtension:
      return 1;
    case spv::Op::OpExtInstImport:
      return 2;
    case spv::Op::OpMemoryModel:
      return 3;
    case spv::Op::OpEntryPoint:
      return 4;
    case spv::Op::OpExecutionMode:
      return 5;
    case spv::Op::OpName:
      return 6;
    case spv::Op::OpDecorate:
    case spv::Op::OpMemberDecorate:
      return 7;
    case spv::Op::OpFunction:
      return 9;
    default:
      return 8;  // types, constants, global variables
  }
}

// Checks the module's layout by walking its instructions; returns the opcode count.
int expect_layout(const spirv::words& w) {
  EXPECT_EQ(w.at(0), spv::MagicNumber);
  EXPECT_EQ(w.at(1), spirv::module::version);
  int last = 0, count = 0;
  for (std::size_t i = 5; i < w.size();) {
    auto o = static_cast<spv::Op>(w[i] & 0xFFFF);
    std::uint32_t n = w[i] >> 16;
    EXPECT_GT(n, 0u);
    if (n == 0) break;
    int s = section_of(o);
    if (last < 9) {
      EXPECT_GE(s, last) << "opcode " << static_cast<int>(o) << " out of section order";
      last = std::max(last, s);
    }
    i += n;
    ++count;
  }
  return count;
}

std::string validate(const spirv::words& code) {
  return spirv::validate(code, VK_API_VERSION_1_1) + spirv::validate(code, VK_API_VERSION_1_2);
}

}  // namespace

TEST(SpirvModule, DeduplicatesTypesAndConstants) {
  spirv::module m;
  auto u = m.type_int(32, false);
  EXPECT_EQ(m.type_int(32, false), u);
  EXPECT_NE(m.type_int(32, true), u);
  auto v = m.type_vector(u, 4);
  EXPECT_EQ(m.type_vector(m.type_int(32, false), 4), v);
  EXPECT_EQ(m.constant_u32(7), m.constant_u32(7));
  EXPECT_NE(m.constant_u32(7), m.constant_i32(7));
  EXPECT_EQ(m.constant_f32(1.5f), m.constant_f32(1.5f));
  EXPECT_NE(m.constant_f32(0.0f), m.constant_f32(-0.0f));
  EXPECT_EQ(m.glsl_std_450(), m.glsl_std_450());
}

TEST(SpirvModule, SectionsComeOutInSpecOrderWhateverTheCallOrder) {
  spirv::module m;
  // Declared out of order on purpose: a constant before the capability, a name last.
  auto c = m.constant_u32(3);
  m.capability(spv::Capability::Shader);
  m.capability(spv::Capability::Shader);  // once only
  auto f = m.fresh();
  auto void_t = m.type_void();
  m.inst(spv::Op::OpFunction, {void_t, f, 0, m.type_function(void_t)});
  m.label();
  m.inst(spv::Op::OpReturn, {});
  m.inst(spv::Op::OpFunctionEnd, {});
  m.entry_point(spv::ExecutionModel::GLCompute, f, "main", {});
  m.execution_mode(f, spv::ExecutionMode::LocalSize, {1, 1, 1});
  m.decorate(c, spv::Decoration::SpecId, {0});
  m.name(f, "main");
  auto w = m.assemble();
  EXPECT_GT(expect_layout(w), 8);
  int shaders = 0;
  for (std::size_t i = 5; i < w.size(); i += w[i] >> 16)
    shaders += static_cast<spv::Op>(w[i] & 0xFFFF) == spv::Op::OpCapability;
  EXPECT_EQ(shaders, 1);
}

// Every op, on every dtype it accepts, with its operands full, uniform and strided.
TEST(SpirvEmitter, EveryOpAndDtypeValidates) {
  const dtype all[] = {dtype::f32,    dtype::f64, dtype::f16, dtype::bf16, dtype::f8e4m3,
                       dtype::f8e5m2, dtype::i8,  dtype::i16, dtype::i32,  dtype::i64,
                       dtype::u8,     dtype::u16, dtype::u32, dtype::u64,  dtype::boolean};
  int modules = 0, refused = 0;
  for (int o = 2; o < ir::op_count; ++o) {
    auto kind = static_cast<op>(o);
    const ir::op_info& info = ir::info(kind);
    for (dtype t : all) {
      if (info.cls != ir::op_class::select && info.cls != ir::op_class::cast &&
          !ir::accepts(info.types, t))
        continue;
      for (dtype to : all) {
        if (info.cls != ir::op_class::cast && to != all[0]) continue;
        ir::builder b;
        auto x = b.input(t, {dyn, 3});
        auto y = b.input(t, {3});
        std::int32_t r = 0;
        switch (info.cls) {
          case ir::op_class::cast:
            r = b.cast(x, to);
            break;
          case ir::op_class::select:
            r = b.select(b.input(dtype::boolean, {}), x, y);
            break;
          case ir::op_class::ternary:
            r = b.ternary(kind, x, y, b.input(t, {}));
            break;
          case ir::op_class::reduction:  // over the run-time axis, and keeping it
            r = b.reduce(kind, x, 0b01, true);
            break;
          case ir::op_class::index_reduction:
            r = b.index_reduce(kind, x, 1, false, o % 2 == 0);
            break;
          case ir::op_class::contraction:  // no Vulkan kernel yet: the CPU runs contractions
            continue;
          case ir::op_class::view: {  // each a load through an offset and strides
            const std::int64_t sizes[] = {0, 3, 1}, one[] = {1}, none[] = {0}, back[] = {-1};
            if (kind == op::transpose) r = b.transpose(x, {});
            if (kind == op::reshape) r = b.reshape(x, sizes);
            if (kind == op::expand) r = b.transpose(b.expand(y, shape{2, 3}), {});
            if (kind == op::slice) r = b.slice(x, one, none, one, back);
            break;
          }
          default:
            r = info.arity == 1 ? b.unary(kind, x) : b.binary(kind, x, y);
        }
        b.output(r);
        auto p = compiler::compile(b.get());
        ASSERT_EQ(p.regions.size(), 1u);
        const auto& reg = p.regions[0];
        for (auto k : {operand_kind::full, operand_kind::uniform, operand_kind::strided,
                       operand_kind::consecutive, operand_kind::repeated})
          for (bool whole_quads : {true, false}) {
            // A reduction's operands are always strided (kernel_cache's layout_call); whole_quads
            // changes only a reduction's kernel (it folds along its rows).
            if (reg.root >= 0 && !spirv::is_strided(k)) continue;
            if (reg.root < 0 && !whole_quads) continue;
            std::vector<operand_kind> kinds(compiler::input_slots(p, reg).size(), k);
            auto kernel = spirv::emit_region(p, reg, kinds, full_target(), whole_quads);
            std::string what = std::string(ir::name(kind)) + " " + std::string(name(t)) + "->" +
                               std::string(name(to)) + " layout " + std::to_string(int(k)) +
                               (whole_quads ? " whole quads" : "");
            if (!kernel.unsupported.empty()) {
              // Only 64-bit floats may be refused (GLSL.std.450 has no 64-bit transcendentals).
              EXPECT_EQ(t, dtype::f64) << what << ": " << kernel.unsupported;
              ++refused;
              continue;
            }
            expect_layout(kernel.code);
            EXPECT_EQ(validate(kernel.code), "") << what;
            ++modules;
          }
      }
    }
  }
  EXPECT_GT(modules, 1000);
  EXPECT_GT(refused, 0);
  std::printf("%d modules validated, %d refused\n", modules, refused);
}

TEST(SpirvEmitter, RefusesWhatTheTargetLacksNamingOpAndDtype) {
  ir::builder b;
  auto x = b.input(dtype::f64, {dyn});
  b.output(b.binary(op::add, x, x));
  auto p = compiler::compile(b.get());
  spirv::target t;  // no shaderFloat64
  auto k = spirv::emit_region(p, p.regions[0], {operand_kind::full}, t);
  EXPECT_TRUE(k.code.empty());
  EXPECT_NE(k.unsupported.find("add on f64"), std::string::npos) << k.unsupported;
  EXPECT_NE(k.unsupported.find("shaderFloat64"), std::string::npos) << k.unsupported;

  ir::builder e;
  auto y = e.input(dtype::f64, {dyn});
  e.output(e.unary(op::exp, y));
  auto q = compiler::compile(e.get());
  auto k2 = spirv::emit_region(q, q.regions[0], {operand_kind::full}, full_target());
  EXPECT_NE(k2.unsupported.find("exp on f64"), std::string::npos) << k2.unsupported;
}

// The float controls and the f32 quotient follow the target: DenormPreserve for the widths whose
// modes may be set alone (denorm_widths), quotients through f64 on a GPU with f64 only.
TEST(SpirvEmitter, FloatControlsAndQuotientsFollowTheTarget) {
  auto kernel = [](const spirv::target& target) {  // x / y in f32
    ir::builder b;
    auto x = b.input(dtype::f32, {dyn});
    b.output(b.binary(op::div, x, b.input(dtype::f32, {dyn})));
    auto p = compiler::compile(b.get());
    auto k = spirv::emit_region(p, p.regions[0], {operand_kind::full, operand_kind::full}, target);
    EXPECT_EQ(validate(k.code), "");
    return k.code;
  };
  using E = spv::ExecutionMode;
  spirv::target gpu = full_target();
  auto f32 = kernel(gpu);
  EXPECT_EQ(execution_modes(f32, E::DenormPreserve), (std::vector<std::uint32_t>{32, 64}));
  EXPECT_EQ(execution_modes(f32, E::SignedZeroInfNanPreserve),
            (std::vector<std::uint32_t>{32, 64}));
  EXPECT_EQ(count_ops(f32, spv::Op::OpFConvert), 3);  // a / b as f64(a) / f64(b), rounded back

  gpu.denorm_widths = 1;  // 32-bit alone: no 64-bit mode, since 16 and 64 must agree
  EXPECT_EQ(execution_modes(kernel(gpu), E::DenormPreserve), (std::vector<std::uint32_t>{32}));
  gpu.denorm_widths = 0;  // tied widths: none declared
  EXPECT_TRUE(execution_modes(kernel(gpu), E::DenormPreserve).empty());

  spirv::target lavapipe = full_target();
  lavapipe.cpu_device = true;  // divides exactly already
  lavapipe.denorm_preserve32 = lavapipe.denorm_preserve64 = false;
  auto cpu = kernel(lavapipe);
  EXPECT_EQ(count_ops(cpu, spv::Op::OpFConvert), 0);
  EXPECT_EQ(execution_modes(cpu, E::SignedZeroInfNanPreserve), (std::vector<std::uint32_t>{32}));
  EXPECT_TRUE(execution_modes(cpu, E::DenormPreserve).empty());

  spirv::target no_f64 = full_target();
  no_f64.float64 = false;  // the driver's OpFDiv
  EXPECT_EQ(count_ops(kernel(no_f64), spv::Op::OpFConvert), 0);
}

// The workgroup kiln dispatches with: on a CPU device twice the subgroup (at least 64); on a
// GPU 256 where the device allows that many invocations and has 32 KiB of shared memory, else
// as on a CPU device; never more than the device's limit.
TEST(SpirvTarget, WorkgroupSizeFollowsTheDevice) {
  spirv::target t;
  t.max_workgroup_size_x = 1024;
  t.shared_memory_bytes = 49152;
  t.subgroup_size = 8;
  t.cpu_device = true;
  EXPECT_EQ(t.workgroup_size(), 64u);
  t.subgroup_size = 64;
  EXPECT_EQ(t.workgroup_size(), 128u);
  t.cpu_device = false;
  t.subgroup_size = 32;
  EXPECT_EQ(t.workgroup_size(), 256u);
  t.max_workgroup_size_x = 128;
  EXPECT_EQ(t.workgroup_size(), 128u);
  t.max_workgroup_size_x = 1024;
  t.shared_memory_bytes = 16384;  // what Vulkan promises
  EXPECT_EQ(t.workgroup_size(), 64u);
}

TEST(SpirvEmitter, MetadataBeyondThePushConstantsGoesToABuffer) {
  ir::builder b;
  std::int32_t sum = b.input(dtype::f32, {dyn, dyn, dyn, dyn});
  for (int i = 0; i < 6; ++i) sum = b.binary(op::add, sum, b.input(dtype::f32, {dyn, 1, dyn, 1}));
  b.output(sum);
  auto p = compiler::compile(b.get());
  std::vector<operand_kind> kinds(p.regions[0].args.size(), operand_kind::strided);
  auto k = spirv::emit_region(p, p.regions[0], kinds, full_target());
  EXPECT_EQ(k.metadata, spirv::metadata_words(4, 7, 0));
  EXPECT_GT(k.metadata * 4, 128u);
  EXPECT_TRUE(k.metadata_in_buffer);
  EXPECT_EQ(k.bindings, 7u + 1u + 1u);
  EXPECT_EQ(validate(k.code), "");
  kinds.assign(kinds.size(), operand_kind::full);
  auto small = spirv::emit_region(p, p.regions[0], kinds, full_target());
  EXPECT_FALSE(small.metadata_in_buffer);
  EXPECT_EQ(validate(small.code), "");
}

// f16 products on the matrix units (SPV_NV_cooperative_matrix): where the target offers a shape,
// a matmul of f16 operands with its epilogue, and an f16 convolution, are cooperative-matrix
// kernels that spirv-val accepts for each shape NVIDIA's drivers report; products of other types,
// and targets without the shape, keep the tiled kernel. (Lavapipe has no such extension: the
// kernels run in VulkanMatmul.F16ProductsRunOnTheMatrixUnits on a GPU that has it.)
TEST(SpirvEmitter, F16ProductsOnTheMatrixUnitsValidate) {
  auto product = [](dtype t, bool conv) {
    ir::builder b;
    std::int32_t y;
    if (conv) {
      auto x = b.input(t, {2, 8, 9, 9});
      auto w = b.input(t, {16, 8, 3, 3});
      y = ir::conv(b, x, w, ir::conv_window{.pads = {1, 1, 1, 1}});
    } else {
      auto a = b.input(t, {dyn, 96});
      auto w = b.input(t, {96, 200});
      y = b.binary(op::add, b.matmul(a, w), b.input(t, {200}));
    }
    b.output(b.unary(op::relu, y));
    return compiler::compile(b.get());
  };
  const std::uint32_t shapes[][3] = {{16, 16, 16}, {16, 8, 16}, {16, 8, 8}};
  for (auto [m, n, k] : shapes) {
    spirv::target t = full_target();
    t.max_workgroup_size_x = 1024;
    t.shared_memory_bytes = 49152;
    t.f16_matrix_m = m;
    t.f16_matrix_n = n;
    t.f16_matrix_k = k;
    ASSERT_TRUE(t.gemm(true).on_matrix_units());
    EXPECT_LE(t.gemm(true).shared_bytes(2), t.shared_memory_bytes);
    EXPECT_EQ(t.gemm(true).invocations(), 256u);  // 8 subgroups of 32
    EXPECT_FALSE(t.gemm(false).on_matrix_units());
    for (bool conv : {false, true})
      for (dtype d : {dtype::f16, dtype::f32, dtype::bf16}) {
        auto p = product(d, conv);
        const compiler::region* reg = nullptr;
        for (const auto& r : p.regions)
          if (r.contraction >= 0) reg = &r;
        ASSERT_NE(reg, nullptr);
        std::vector<operand_kind> kinds(compiler::input_slots(p, *reg).size(), operand_kind::full);
        auto kernel = spirv::emit_region(p, *reg, kinds, t);
        std::string what = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
                           (conv ? " conv " : " matmul ") + std::string(name(d));
        ASSERT_EQ(kernel.unsupported, "") << what;
        EXPECT_EQ(validate(kernel.code), "") << what;
        // Per step of 32 along K, each subgroup's 64 x 32 part of the tile: (64 / m) x (32 / n)
        // accumulators, 32 / k products each.
        const int products = d == dtype::f16 ? int(64 / m * (32 / n) * (32 / k)) : 0;
        EXPECT_EQ(count_ops(kernel.code, spv::Op::OpCooperativeMatrixMulAddNV), products) << what;
        EXPECT_EQ(kernel.workgroup, 256u) << what;
      }
  }
  spirv::target no_subgroups_of_32 = full_target();  // the subgroup layout needs 8 of 32
  no_subgroups_of_32.max_workgroup_size_x = 1024;
  no_subgroups_of_32.shared_memory_bytes = 49152;
  no_subgroups_of_32.f16_matrix_m = no_subgroups_of_32.f16_matrix_n = 16;
  no_subgroups_of_32.f16_matrix_k = 16;
  no_subgroups_of_32.subgroup_size = 64;
  EXPECT_FALSE(no_subgroups_of_32.gemm(true).on_matrix_units());
}
