# The layer rule is enforced by the build: compiled with the transport layer's
# include root (what src/transport/*.cpp see), an allowed include compiles and an
# upward one (dispatch/) fails with "No such file".
#   cmake -DCXX=... -DROOT=<build>/layers/transport -DINCLUDES="a;b" -DDIR=<this dir>
#         -P check_layers.cmake
cmake_minimum_required(VERSION 3.25)
set(flags -std=c++20 -fsyntax-only -I${ROOT})
foreach(dir IN LISTS INCLUDES)
  list(APPEND flags -I${dir})
endforeach()
execute_process(COMMAND ${CXX} ${flags} ${DIR}/allowed_include.cpp
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the allowed include did not compile:\n${out}${err}")
endif()
execute_process(COMMAND ${CXX} ${flags} ${DIR}/upward_include.cpp
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "an upward include (dispatch/ from transport/) compiled: the layer "
                      "include roots no longer enforce the layers")
endif()
if(NOT err MATCHES "dispatch/dispatch.hpp: No such file")
  message(FATAL_ERROR "the upward include failed, but not for want of the header:\n${err}")
endif()
message(STATUS "transport/ cannot include dispatch/: ${err}")
