# Runs a GPU benchmark (`concord-bench allreduce --device cuda`, `kernels`). Without
# a GPU it must fail cleanly saying so (the test then reports SKIPPED); with one it
# must succeed, print EXPECT (default "Device: GPU") and no failed check.
#   cmake -DCOMMAND="prog arg..." [-DEXPECT=regex] -P check_device_bench.cmake
cmake_minimum_required(VERSION 3.25)
separate_arguments(command UNIX_COMMAND "${COMMAND}")
execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                TIMEOUT 110)
set(all "${out}${err}")
if(NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "'${COMMAND}' did not exit cleanly: ${rc}\n${all}")
endif()
if(all MATCHES "no CUDA device")
  if(rc EQUAL 0)
    message(FATAL_ERROR "no CUDA device, yet exit 0:\n${all}")
  endif()
  message(STATUS "SKIPPED: no CUDA device\n${all}")
  return()
endif()
if(NOT DEFINED EXPECT)
  set(EXPECT "Device: GPU")
endif()
if(NOT rc EQUAL 0 OR NOT all MATCHES "${EXPECT}" OR all MATCHES "FAIL")
  message(FATAL_ERROR "'${COMMAND}' exited ${rc}:\n${all}")
endif()
message(STATUS "${all}")
