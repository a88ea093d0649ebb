# Runs the [path_choice] test of concord_mpi_tests on 2 ranks of which only the
# second sets CONCORD_SHM_PATH_CHOICE=threshold: the test expects every large
# message to take single copy on both; here the warning must appear once.
# Arguments: -DMPIEXEC= -DMPIEXEC_FLAGS= (space-separated) -DPROGRAM=
separate_arguments(mpiexec_flags UNIX_COMMAND "${MPIEXEC_FLAGS}")
execute_process(COMMAND timeout 200 ${MPIEXEC} ${mpiexec_flags} -n 1 ${PROGRAM} [path_choice] :
                        -n 1 env CONCORD_SHM_PATH_CHOICE=threshold ${PROGRAM} [path_choice]
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
message(STATUS "exit status ${rc}\n${out}${err}")
if(rc EQUAL 124)
  message(FATAL_ERROR "the job hung")
endif()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the job failed")
endif()
if(out MATCHES "skipped: [^\n]*")
  message(STATUS "${CMAKE_MATCH_0}")  # CTest's SKIP_REGULAR_EXPRESSION reports it
  return()
endif()
set(warning "concord: rank 0: CONCORD_SHM_PATH_CHOICE differs between the ranks of this node")
string(REGEX MATCHALL "${warning}" found "${err}")
list(LENGTH found count)
if(NOT count EQUAL 1)
  message(FATAL_ERROR "${count} warnings, want 1 matching: ${warning}")
endif()
