# A rank that stops taking part in the engine's negotiation (SIGSTOP) makes the
# other's allreduce fail with ErrorCode::Timeout within CONCORD_TRANSPORT_TIMEOUT_S
# (test_engine_negotiation_timeout.cpp, mode `stopped`, checks that and prints its
# verdict); then it SIGKILLs the stopped rank and mpiexec ends the job. This
# script checks the verdict and that the job ended by itself.
# Arguments: -DMPIEXEC= -DMPIEXEC_FLAGS= (space-separated) -DPROGRAM=
separate_arguments(mpiexec_flags UNIX_COMMAND "${MPIEXEC_FLAGS}")
execute_process(COMMAND timeout 60 ${MPIEXEC} ${mpiexec_flags} -n 2 ${PROGRAM} stopped
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
message(STATUS "exit status ${rc}\n${out}")
# If rank 0 never got to kill it, the stopped rank may outlive mpiexec.
if(out MATCHES "peer-pid=([0-9]+)")
  execute_process(COMMAND kill -9 ${CMAKE_MATCH_1} ERROR_QUIET)
endif()
if(rc EQUAL 124)
  message(FATAL_ERROR "the job hung: the negotiation did not time out\n${err}")
endif()
if(NOT out MATCHES "negotiation-timeout-test: PASS")
  message(FATAL_ERROR "rank 0 did not pass\n${err}")
endif()
if(rc EQUAL 0)
  message(FATAL_ERROR "mpiexec exited 0, yet a rank was killed")
endif()
