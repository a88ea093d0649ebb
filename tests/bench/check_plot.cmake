# Runs bench/plot on JSON files and checks that both PNGs are written. Skipped (the
# output matches the test's SKIP_REGULAR_EXPRESSION) when no python3 has matplotlib.
#   cmake -DPLOT=bench/plot -DPYTHONS=python3,/usr/bin/python3 -DINPUTS=a.json,b.json
#         -DPREFIX=out/x -P check_plot.cmake
cmake_minimum_required(VERSION 3.25)
string(REPLACE "," ";" pythons "${PYTHONS}")
string(REPLACE "," ";" inputs "${INPUTS}")
set(python "")
foreach(candidate IN LISTS pythons)
  if(candidate)
    execute_process(COMMAND ${candidate} -c "import matplotlib" RESULT_VARIABLE rc
                    OUTPUT_QUIET ERROR_QUIET)
    if(rc STREQUAL "0")
      set(python ${candidate})
      break()
    endif()
  endif()
endforeach()
if(NOT python)
  message(STATUS "SKIPPED: no python3 with matplotlib among '${PYTHONS}' "
                 "(./scripts/setup installs python3-matplotlib)")
  return()
endif()

file(REMOVE "${PREFIX}-latency.png" "${PREFIX}-busbw.png")
execute_process(COMMAND ${python} ${PLOT} ${inputs} -o ${PREFIX} --title "bench test"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 100)
message(STATUS "${python} ${PLOT}: ${out}${err}")
if(NOT rc STREQUAL "0")
  message(FATAL_ERROR "bench/plot exited ${rc}")
endif()
foreach(png "${PREFIX}-latency.png" "${PREFIX}-busbw.png")
  if(NOT EXISTS "${png}")
    message(FATAL_ERROR "bench/plot did not write ${png}")
  endif()
  file(SIZE "${png}" size)
  file(READ "${png}" magic LIMIT 8 HEX)
  if(size LESS 1000 OR NOT magic STREQUAL "89504e470d0a1a0a")
    message(FATAL_ERROR "${png} is not a PNG chart (${size} bytes, starts ${magic})")
  endif()
  message(STATUS "${png}: ${size} bytes")
endforeach()
