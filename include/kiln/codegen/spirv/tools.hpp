// SPIRV-Tools, where the build links it (target kiln::spirv_tools defines KILN_WITH_SPIRV_TOOLS):
// the validator for KILN_VALIDATE and the tests, the disassembler for KILN_DUMP_DIR. Never needed
// to run kiln.
#pragma once

#include <string>

#include "kiln/codegen/spirv/module.hpp"

#ifdef KILN_WITH_SPIRV_TOOLS
#include <spirv-tools/libspirv.hpp>
#endif

namespace kiln::spirv {

inline constexpr bool have_tools =
#ifdef KILN_WITH_SPIRV_TOOLS
    true;
#else
    false;
#endif

// The validator's messages for `code` in the Vulkan environment of `vulkan_version` (empty: valid,
// or no SPIRV-Tools in this build).
inline std::string validate(const words& code, std::uint32_t vulkan_version) {
#ifdef KILN_WITH_SPIRV_TOOLS
  // VK_API_VERSION minor lives in bits 12..21.
  std::uint32_t minor = (vulkan_version >> 12) & 0x3FF;
  spv_target_env env = minor >= 3   ? SPV_ENV_VULKAN_1_3
                       : minor == 2 ? SPV_ENV_VULKAN_1_2
                                    : SPV_ENV_VULKAN_1_1;
  spvtools::SpirvTools tools(env);
  std::string messages;
  tools.SetMessageConsumer(
      [&](spv_message_level_t, const char*, const spv_position_t& at, const char* m) {
        messages += "word " + std::to_string(at.index) + ": " + m + "\n";
      });
  if (!tools.Validate(code) && messages.empty()) messages = "invalid module";
  return messages;
#else
  (void)code;
  (void)vulkan_version;
  return "";
#endif
}

// The module as SPIR-V assembly text (empty without SPIRV-Tools).
inline std::string disassemble(const words& code) {
#ifdef KILN_WITH_SPIRV_TOOLS
  spvtools::SpirvTools tools(SPV_ENV_UNIVERSAL_1_3);
  std::string text;
  tools.Disassemble(code, &text,
                    SPV_BINARY_TO_TEXT_OPTION_FRIENDLY_NAMES | SPV_BINARY_TO_TEXT_OPTION_INDENT);
  return text;
#else
  (void)code;
  return "";
#endif
}

}  // namespace kiln::spirv
