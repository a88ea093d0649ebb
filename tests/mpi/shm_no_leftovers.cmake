# Kills a rank of a job that uses the shared-memory transport and checks that no
# /dev/shm segment of concord's is left behind, nor existed while it ran.
# Arguments: -DMPIEXEC= -DMPIEXEC_FLAGS= (space-separated) -DPROGRAM= -DRANKS=
#            -DSINGLE_COPY=ON|OFF: whether rank 0's message must have taken single-copy reads
#            -DIN_PLACE=ON: and read its peers' (shared) buffers in place
separate_arguments(mpiexec_flags UNIX_COMMAND "${MPIEXEC_FLAGS}")
execute_process(COMMAND timeout 120 ${MPIEXEC} ${mpiexec_flags} -n ${RANKS} ${PROGRAM}
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
message(STATUS "exit status ${rc}\n${out}")
if(rc EQUAL 0)
  message(FATAL_ERROR "the job should have failed: one rank killed itself")
endif()
if(rc EQUAL 124)
  message(FATAL_ERROR "mpiexec hung after a rank was killed\n${err}")
endif()
if(NOT out MATCHES "pid=([0-9]+)")
  message(FATAL_ERROR "rank 0 did not report its pid\n${err}")
endif()
set(pid ${CMAKE_MATCH_1})
if(NOT out MATCHES "segments-while-running=([0-9]+)")
  message(FATAL_ERROR "rank 0 did not report the segments it saw while running\n${err}")
endif()
if(NOT CMAKE_MATCH_1 EQUAL 0)
  message(FATAL_ERROR "the segment was still linked in /dev/shm after set-up")
endif()
if(NOT out MATCHES "single-copy-messages=([0-9]+)")
  message(FATAL_ERROR "rank 0 did not report its single-copy messages\n${err}")
endif()
set(single_copy_messages ${CMAKE_MATCH_1})
# Where the host forbids cross-memory attach (the test's own probe says so),
# concord copies by design: the path cannot be checked there.
if(SINGLE_COPY AND out MATCHES "host-allows-cma=0")
  message(STATUS "this host refuses cross-memory attach: single copy not checked")
elseif(SINGLE_COPY AND single_copy_messages EQUAL 0)
  message(FATAL_ERROR "the message should have taken single-copy reads (CMA on)\n${err}")
elseif(NOT SINGLE_COPY AND NOT single_copy_messages EQUAL 0)
  message(FATAL_ERROR "the message took single-copy reads with CONCORD_SHM_CMA=0")
endif()
# IN_PLACE=ON (the job's buffers from allocate_shared): rank 0 read its peers
# where they lie, unless the host refuses single copy altogether.
if(IN_PLACE AND NOT out MATCHES "host-allows-cma=0")
  if(NOT out MATCHES "in-place-reads=([1-9][0-9]*)")
    message(FATAL_ERROR "rank 0 read no peer's shared buffer in place\n${err}")
  endif()
endif()
file(GLOB leftovers /dev/shm/concord-${pid}-*)
if(leftovers)
  file(REMOVE ${leftovers})
  message(FATAL_ERROR "left behind in /dev/shm: ${leftovers}")
endif()
message(STATUS "no /dev/shm/concord-${pid}-* left")
