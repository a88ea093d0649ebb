# Runs a command that must be rejected: a non-zero exit status (not a crash) and an
# error message matching EXPECT on stdout or stderr.
#   cmake -DCOMMAND="prog arg..." -DEXPECT=regex -P expect_error.cmake
# COMMAND is split like a Unix shell command line.
cmake_minimum_required(VERSION 3.25)
separate_arguments(command UNIX_COMMAND "${COMMAND}")
execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                TIMEOUT 60)
set(all "${out}${err}")
if(NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "'${COMMAND}' did not exit cleanly: ${rc}\n${all}")
endif()
if(rc EQUAL 0)
  message(FATAL_ERROR "'${COMMAND}' was accepted (exit 0); expected an error\n${all}")
endif()
if(NOT all MATCHES "${EXPECT}")
  message(FATAL_ERROR "'${COMMAND}' exited ${rc} without the message /${EXPECT}/:\n${all}")
endif()
message(STATUS "rejected with exit ${rc}: ${all}")
