# Runs the [path_choice] test of concord_mpi_tests on 2 ranks of which only the
# second sets CONCORD_SHM_PATH_CHOICE=threshold: the test expects every large
# message to take single copy on both; here the warning must appear once.
# Arguments: -DMPIEXEC= -DMPIEXEC_FLAGS= (space-separated) -DPROGRAM=
include(${CMAKE_CURRENT_LIST_DIR}/run_mpi_job.cmake)
concord_run_mpi_job(200 -n 1 ${PROGRAM} [path_choice] :
                    -n 1 env CONCORD_SHM_PATH_CHOICE=threshold ${PROGRAM} [path_choice])
set(warning "concord: rank 0: CONCORD_SHM_PATH_CHOICE differs between the ranks of this node")
string(REGEX MATCHALL "${warning}" found "${err}")
list(LENGTH found count)
if(NOT count EQUAL 1)
  message(FATAL_ERROR "${count} warnings, want 1 matching: ${warning}")
endif()
