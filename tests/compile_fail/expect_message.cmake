# Builds TARGET, expects the build to fail, and its output to match EXPECTED.
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target ${TARGET}
                RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(result EQUAL 0)
  message(FATAL_ERROR "${TARGET} compiled, but it must be rejected")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECTED}")
  message(FATAL_ERROR "${TARGET} failed without the expected message '${EXPECTED}':\n${out}${err}")
endif()
message(STATUS "${TARGET} rejected with: ${EXPECTED}")
