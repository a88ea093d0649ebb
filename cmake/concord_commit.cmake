# Writes OUT, a header defining CONCORD_COMMIT as the commit the source tree is at
# (git describe --tags --always --dirty; outside a git checkout CONCORD_SOURCE_COMMIT,
# else "unknown"), and rewrites it only when that changed, so that an unchanged commit
# rebuilds nothing.
# Run at every build of the targets concord_commit_header() names (concord-bench, whose
# records name it, and the Python extension: concord.build_commit()).
execute_process(
  COMMAND git -C "${SOURCE_DIR}" describe --tags --always --dirty
  OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  # A copy of the tree without .git (the GPU node's: scripts/device-check sets it).
  if(DEFINED ENV{CONCORD_SOURCE_COMMIT} AND NOT "$ENV{CONCORD_SOURCE_COMMIT}" STREQUAL "")
    set(commit "$ENV{CONCORD_SOURCE_COMMIT}")
    string(REGEX REPLACE "[\"\\]" "'" commit "${commit}")  # it goes into a C string
  else()
    set(commit "unknown")
  endif()
endif()
set(text "#define CONCORD_COMMIT \"${commit}\"\n")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
