# Runs a test of concord_mpi_tests on 2 ranks of which only the second has
# SETTING (NAME=value) in its environment: the job must pass, and WARNING
# (a regular expression) must appear exactly once on its standard error.
# Arguments: -DMPIEXEC= -DMPIEXEC_FLAGS= (space-separated) -DPROGRAM= -DTAG=
#            -DSETTING= -DWARNING=
include(${CMAKE_CURRENT_LIST_DIR}/run_mpi_job.cmake)
concord_run_mpi_job(200 -n 1 ${PROGRAM} ${TAG} : -n 1 env ${SETTING} ${PROGRAM} ${TAG})
string(REGEX MATCHALL "${WARNING}" found "${err}")
list(LENGTH found count)
if(NOT count EQUAL 1)
  message(FATAL_ERROR "${count} warnings, want 1 matching: ${WARNING}")
endif()
