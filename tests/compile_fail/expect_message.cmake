# Compiles SOURCE with COMPILER's -fsyntax-only (C++20, kiln's headers from INCLUDE_DIR as
# kiln::kiln gives them; PCH, a header whose precompiled form may sit beside it, included first),
# expects it to fail, its output to match EXPECTED, and no more than MAX_ERRORS compile errors
# (one mistake, one error: no cascade after kiln's message).
get_filename_component(TARGET ${SOURCE} NAME_WE)
set(prefix)
if(PCH)
  set(prefix -include ${PCH})
endif()
execute_process(COMMAND ${COMPILER} -std=c++20 -fsyntax-only -DKILN_SEPARATE_RUNTIME -I${INCLUDE_DIR}
                        ${prefix} ${SOURCE}
                RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(result EQUAL 0)
  message(FATAL_ERROR "${TARGET} compiled, but it must be rejected")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECTED}")
  message(FATAL_ERROR "${TARGET} failed without the expected message '${EXPECTED}':\n${out}${err}")
endif()
string(REGEX MATCHALL "error: " errors "${out}${err}")
list(LENGTH errors count)
if(count GREATER MAX_ERRORS)
  message(FATAL_ERROR "${TARGET}: ${count} errors, at most ${MAX_ERRORS} expected:\n${out}${err}")
endif()
message(STATUS "${TARGET} rejected with: ${EXPECTED} (${count} error)")
