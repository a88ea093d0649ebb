# Included by the cmake -P test scripts that launch an MPI job themselves
# (shm_cma_refused.cmake, mixed_setting.cmake). After
#   concord_run_mpi_job(SECONDS LAUNCH_ARGUMENTS...)
# `out` and `err` hold the job's output; a hang (past SECONDS) or a failure
# ends the script with an error, and a job that printed "skipped: ..." ends it
# there (the caller's test has SKIP_REGULAR_EXPRESSION for it). A macro, so
# that return() leaves the calling script. Needs MPIEXEC and MPIEXEC_FLAGS.
macro(concord_run_mpi_job seconds)
  separate_arguments(mpiexec_flags UNIX_COMMAND "${MPIEXEC_FLAGS}")
  execute_process(COMMAND timeout ${seconds} ${MPIEXEC} ${mpiexec_flags} ${ARGN}
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
endmacro()
