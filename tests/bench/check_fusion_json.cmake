# Runs a validated fusion benchmark that writes JSON, then checks its output: exit 0,
# the table's closing ratio line, and in the JSON one record per implementation, each
# validated, with the model's bytes and element count, 2 ranks, algorithm null and
# the warm-up steps the command asked for (WARMUP).
#   cmake -DCOMMAND="mpiexec ... fusion --model M -c --json F" -DJSON=F
#         -DIMPLS=fused,unfused,mpi-per-tensor,flat -DBYTES=485752 -DCOUNT=121438 -DWARMUP=1
#         -P check_fusion_json.cmake
cmake_minimum_required(VERSION 3.25)
separate_arguments(command UNIX_COMMAND "${COMMAND}")
file(REMOVE "${JSON}")
execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                TIMEOUT 100)
message(STATUS "${out}${err}")
if(NOT rc STREQUAL "0")
  message(FATAL_ERROR "'${COMMAND}' exited ${rc}")
endif()
set(ratio "[0-9]+\\.[0-9][0-9]")
if(NOT out MATCHES
   "\n# fused/flat = ${ratio}, unfused/fused = ${ratio}, mpi-per-tensor/fused = ${ratio}\n")
  message(FATAL_ERROR "no line '# fused/flat = X, unfused/fused = Y, mpi-per-tensor/fused = Z'")
endif()
if(NOT EXISTS "${JSON}")
  message(FATAL_ERROR "no JSON written at ${JSON}")
endif()
file(READ "${JSON}" text)
string(JSON n ERROR_VARIABLE json_error LENGTH "${text}")
if(json_error)
  message(FATAL_ERROR "${JSON} is not a JSON list: ${json_error}")
endif()

set(seen "")
math(EXPR last "${n} - 1")
foreach(i RANGE ${last})
  foreach(key impl bytes count validated ranks avg_us min_us max_us iterations warmup
              busbw_gbps)
    string(JSON ${key} ERROR_VARIABLE json_error GET "${text}" ${i} ${key})
    if(json_error)
      message(FATAL_ERROR "record ${i}: ${json_error}")
    endif()
  endforeach()
  string(JSON algorithm_type TYPE "${text}" ${i} algorithm)
  if(NOT validated STREQUAL "ON")
    message(FATAL_ERROR "record ${i} (${impl}): validated is ${validated}")
  endif()
  if(NOT bytes EQUAL BYTES OR NOT count EQUAL COUNT OR NOT ranks EQUAL 2
     OR NOT algorithm_type STREQUAL "NULL")
    message(FATAL_ERROR "record ${i} (${impl}): bytes ${bytes}, count ${count}, ranks ${ranks}, "
                        "algorithm ${algorithm_type}; expected ${BYTES}, ${COUNT}, 2, null")
  endif()
  if(NOT warmup EQUAL WARMUP)
    message(FATAL_ERROR "record ${i} (${impl}): warmup ${warmup}, expected ${WARMUP} (-x)")
  endif()
  if(NOT avg_us GREATER 0 OR min_us GREATER avg_us OR avg_us GREATER max_us
     OR NOT busbw_gbps GREATER 0)
    message(FATAL_ERROR "record ${i} (${impl}): avg_us ${avg_us}, min_us ${min_us}, "
                        "max_us ${max_us}, busbw_gbps ${busbw_gbps}")
  endif()
  list(APPEND seen "${impl}")
endforeach()

string(REPLACE "," ";" impls "${IMPLS}")
list(LENGTH impls expected)
foreach(impl IN LISTS impls)
  if(NOT "${impl}" IN_LIST seen)
    message(FATAL_ERROR "${JSON}: no record for ${impl}")
  endif()
endforeach()
if(NOT n EQUAL expected)
  message(FATAL_ERROR "${JSON}: ${n} records, expected ${expected}")
endif()
message(STATUS "${JSON}: ${n} records, all validated")
