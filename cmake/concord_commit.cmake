# Writes OUT, a header defining CONCORD_COMMIT as the commit the source tree is at
# (git describe --tags --always --dirty; "unknown" outside a git checkout), and
# rewrites it only when that changed, so that an unchanged commit rebuilds nothing.
# Run at every build of concord-bench (bench/CMakeLists.txt), whose records name it,
# and of the Python extension (bindings/python/CMakeLists.txt: concord.build_commit()).
execute_process(
  COMMAND git -C "${SOURCE_DIR}" describe --tags --always --dirty
  OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit "unknown")
endif()
set(text "#define CONCORD_COMMIT \"${commit}\"\n")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
