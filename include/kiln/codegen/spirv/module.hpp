// A SPIR-V module builder: fresh ids, deduplicated types and constants, one word vector per
// section, concatenated in the order the spec requires, so the layout is right by construction.
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <spirv/unified1/GLSL.std.450.h>
#include <spirv/unified1/spirv.hpp11>

#include "kiln/core/hash.hpp"

namespace kiln::spirv {

using id = std::uint32_t;
using words = std::vector<std::uint32_t>;

class module {
 public:
  // The SPIR-V version the module declares (1.3 runs on every Vulkan 1.1+ driver and needs no
  // interface lists beyond Input/Output variables).
  static constexpr std::uint32_t version = 0x00010300;

  id fresh() { return next_++; }

  // Appends one instruction: opcode and operands to a section.
  static void op(words& section, spv::Op code, std::span<const std::uint32_t> operands) {
    section.push_back(static_cast<std::uint32_t>(operands.size() + 1) << 16 |
                      static_cast<std::uint32_t>(code));
    section.insert(section.end(), operands.begin(), operands.end());
  }
  static void op(words& section, spv::Op code, std::initializer_list<std::uint32_t> operands) {
    op(section, code, std::span<const std::uint32_t>(operands.begin(), operands.size()));
  }

  // A string operand: UTF-8, nul-terminated, padded to whole words.
  static void append_string(words& out, std::string_view s) {
    std::size_t n = s.size() / 4 + 1;
    std::size_t start = out.size();
    out.resize(start + n, 0);
    std::memcpy(out.data() + start, s.data(), s.size());
  }

  void capability(spv::Capability c) {
    for (auto have : capabilities_)
      if (have == c) return;
    capabilities_.push_back(c);
    op(capability_words_, spv::Op::OpCapability, {static_cast<std::uint32_t>(c)});
  }
  void extension(std::string_view name) {
    words w;
    append_string(w, name);
    op(extensions_, spv::Op::OpExtension, w);
  }
  id glsl_std_450() {
    if (glsl_ == 0) {
      glsl_ = fresh();
      words w{glsl_};
      append_string(w, "GLSL.std.450");
      op(imports_, spv::Op::OpExtInstImport, w);
    }
    return glsl_;
  }

  // Types and constants: identical declarations get one id.
  id type_void() { return unique(spv::Op::OpTypeVoid, {}); }
  id type_bool() { return unique(spv::Op::OpTypeBool, {}); }
  id type_int(std::uint32_t width, bool is_signed) {
    return unique(spv::Op::OpTypeInt, {width, is_signed ? 1u : 0u});
  }
  id type_float(std::uint32_t width) { return unique(spv::Op::OpTypeFloat, {width}); }
  id type_vector(id component, std::uint32_t n) {
    return unique(spv::Op::OpTypeVector, {component, n});
  }
  id type_pointer(spv::StorageClass sc, id pointee) {
    return unique(spv::Op::OpTypePointer, {static_cast<std::uint32_t>(sc), pointee});
  }
  id type_function(id result) { return unique(spv::Op::OpTypeFunction, {result}); }
  id type_array(id element, id length) { return unique(spv::Op::OpTypeArray, {element, length}); }
  id type_runtime_array(id element) { return unique(spv::Op::OpTypeRuntimeArray, {element}); }
  // A subgroup's rows x cols matrix of `component` (SPV_NV_cooperative_matrix): scope, rows and
  // cols are u32 constants.
  id type_cooperative_matrix(id component, id scope, id rows, id cols) {
    return unique(spv::Op::OpTypeCooperativeMatrixNV, {component, scope, rows, cols});
  }
  // Structs are never merged: each carries its own decorations (Block, member offsets).
  id type_struct(std::initializer_list<id> members) {
    id r = fresh();
    words w{r};
    w.insert(w.end(), members.begin(), members.end());
    op(globals_, spv::Op::OpTypeStruct, w);
    return r;
  }

  id constant_bits(id type, std::initializer_list<std::uint32_t> bits) {
    words w{type};
    w.insert(w.end(), bits.begin(), bits.end());
    return unique(spv::Op::OpConstant, w, true);
  }
  id constant_u32(std::uint32_t v) { return constant_bits(type_int(32, false), {v}); }
  id constant_i32(std::int32_t v) {
    return constant_bits(type_int(32, true), {static_cast<std::uint32_t>(v)});
  }
  id constant_f32(float v) {
    std::uint32_t b;
    std::memcpy(&b, &v, 4);
    return constant_bits(type_float(32), {b});
  }
  id constant_64(id type, std::uint64_t v) {
    return constant_bits(type,
                         {static_cast<std::uint32_t>(v), static_cast<std::uint32_t>(v >> 32)});
  }
  id constant_bool(bool v) {
    return unique(v ? spv::Op::OpConstantTrue : spv::Op::OpConstantFalse, {type_bool()}, true);
  }
  id constant_composite(id type, std::initializer_list<id> parts) {
    words w{type};
    w.insert(w.end(), parts.begin(), parts.end());
    return unique(spv::Op::OpConstantComposite, w, true);
  }
  // A scalar constant splatted to `n` lanes (n == 1: the scalar itself).
  id splat_constant(id vector_type, id scalar, std::uint32_t n) {
    if (n == 1) return scalar;
    words w{vector_type};
    for (std::uint32_t i = 0; i < n; ++i) w.push_back(scalar);
    return unique(spv::Op::OpConstantComposite, w, true);
  }

  // Global declarations that are not deduplicated (variables, spec constants).
  id global(spv::Op code, id type, std::initializer_list<std::uint32_t> operands) {
    id r = fresh();
    words w{type, r};
    w.insert(w.end(), operands.begin(), operands.end());
    op(globals_, code, w);
    return r;
  }

  void decorate(id target, spv::Decoration d, std::initializer_list<std::uint32_t> extra = {}) {
    words w{target, static_cast<std::uint32_t>(d)};
    w.insert(w.end(), extra.begin(), extra.end());
    op(annotations_, spv::Op::OpDecorate, w);
  }
  void member_decorate(id type, std::uint32_t member, spv::Decoration d,
                       std::initializer_list<std::uint32_t> extra = {}) {
    words w{type, member, static_cast<std::uint32_t>(d)};
    w.insert(w.end(), extra.begin(), extra.end());
    op(annotations_, spv::Op::OpMemberDecorate, w);
  }
  void name(id target, std::string_view n) {
    words w{target};
    append_string(w, n);
    op(debug_, spv::Op::OpName, w);
  }

  void entry_point(spv::ExecutionModel model, id function, std::string_view n,
                   std::span<const id> interface) {
    words w{static_cast<std::uint32_t>(model), function};
    append_string(w, n);
    w.insert(w.end(), interface.begin(), interface.end());
    op(entry_points_, spv::Op::OpEntryPoint, w);
  }
  void execution_mode(id function, spv::ExecutionMode mode,
                      std::initializer_list<std::uint32_t> extra = {}) {
    words w{function, static_cast<std::uint32_t>(mode)};
    w.insert(w.end(), extra.begin(), extra.end());
    op(execution_modes_, spv::Op::OpExecutionMode, w);
  }

  // Function bodies: instructions appended in order.
  words& code() { return functions_; }
  // An instruction with a result: returns its fresh id.
  id emit(spv::Op code, id type, std::initializer_list<std::uint32_t> operands) {
    id r = fresh();
    emit_to(r, code, type, operands);
    return r;
  }
  // The same, with a result id allocated earlier (a loop's back-edge value named by an OpPhi).
  void emit_to(id result, spv::Op code, id type, std::initializer_list<std::uint32_t> operands) {
    functions_.push_back(static_cast<std::uint32_t>(operands.size() + 3) << 16 |
                         static_cast<std::uint32_t>(code));
    functions_.push_back(type);
    functions_.push_back(result);
    functions_.insert(functions_.end(), operands.begin(), operands.end());
  }
  id ext(id type, GLSLstd450 inst, std::initializer_list<id> operands) {
    id r = fresh();
    functions_.push_back(static_cast<std::uint32_t>(operands.size() + 5) << 16 |
                         static_cast<std::uint32_t>(spv::Op::OpExtInst));
    functions_.push_back(type);
    functions_.push_back(r);
    functions_.push_back(glsl_std_450());
    functions_.push_back(static_cast<std::uint32_t>(inst));
    functions_.insert(functions_.end(), operands.begin(), operands.end());
    return r;
  }
  void inst(spv::Op code, std::initializer_list<std::uint32_t> operands) {
    op(functions_, code, operands);
  }
  id label() {
    id r = fresh();
    inst(spv::Op::OpLabel, {r});
    return r;
  }
  void label(id r) { inst(spv::Op::OpLabel, {r}); }

  // The module's words: header, then every section in the order of the spec's logical layout.
  words assemble() const {
    words out{spv::MagicNumber, version, 0x6B696C6E /* generator: 'kiln' */, next_, 0};
    for (const words* s : {&capability_words_, &extensions_, &imports_})
      out.insert(out.end(), s->begin(), s->end());
    words memory_model;
    op(memory_model, spv::Op::OpMemoryModel,
       {static_cast<std::uint32_t>(spv::AddressingModel::Logical),
        static_cast<std::uint32_t>(spv::MemoryModel::GLSL450)});
    for (const words* s : {static_cast<const words*>(&memory_model), &entry_points_,
                           &execution_modes_, &debug_, &annotations_, &globals_, &functions_})
      out.insert(out.end(), s->begin(), s->end());
    return out;
  }

 private:
  // Declares (or finds) a type or constant. `typed`: the first operand is the result type, which
  // precedes the result id in the instruction.
  id unique(spv::Op code, words operands, bool typed = false) {
    operands.push_back(static_cast<std::uint32_t>(code));
    auto [it, inserted] = known_.try_emplace(std::move(operands), 0);
    if (!inserted) return it->second;
    id r = fresh();
    it->second = r;
    const words& key = it->first;
    std::span<const std::uint32_t> ops(key.data(), key.size() - 1);
    words w;
    if (typed) {
      w.push_back(ops[0]);
      w.push_back(r);
      w.insert(w.end(), ops.begin() + 1, ops.end());
    } else {
      w.push_back(r);
      w.insert(w.end(), ops.begin(), ops.end());
    }
    op(globals_, code, w);
    return r;
  }

  id next_ = 1;
  id glsl_ = 0;
  std::vector<spv::Capability> capabilities_;
  words capability_words_, extensions_, imports_, entry_points_, execution_modes_, debug_,
      annotations_, globals_, functions_;
  struct words_hash {
    std::size_t operator()(const words& w) const noexcept { return kiln::detail::fnv1a(w); }
  };
  std::unordered_map<words, id, words_hash> known_;
};

}  // namespace kiln::spirv
