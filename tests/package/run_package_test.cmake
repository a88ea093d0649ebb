# Installs concord into a scratch prefix, then builds and runs a separate project
# against it twice: through find_package(concord) and through pkg-config.
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
endfunction()

run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})

separate_arguments(mpiexec_flags UNIX_COMMAND "${MPIEXEC_FLAGS}")

# CMake package, from a C++-only project (the usual trainer) and from one that
# enables C as well; neither names the MPI: the package brings its own.
foreach(languages CXX C,CXX)
  string(REPLACE "," "_" tag "${languages}")
  run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/package/consumer -B ${WORK_DIR}/consumer_${tag}
      -DCMAKE_PREFIX_PATH=${prefix} "-DCONSUMER_LANGUAGES=${languages}")
  run(${CMAKE_COMMAND} --build ${WORK_DIR}/consumer_${tag})
  run(${MPIEXEC} ${mpiexec_flags} -n 2 ${WORK_DIR}/consumer_${tag}/consumer)
endforeach()

# A project that pins an older standard (or takes its compiler's default, C++14 before
# GCC 11 and Clang 16): the package's target asks for the C++17 its headers need.
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/package/consumer -B ${WORK_DIR}/consumer_cxx14
    -DCMAKE_PREFIX_PATH=${prefix} -DCONSUMER_LANGUAGES=CXX -DCONSUMER_CXX_STANDARD=14)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/consumer_cxx14)
run(${MPIEXEC} ${mpiexec_flags} -n 2 ${WORK_DIR}/consumer_cxx14/consumer)

# pkg-config.
find_program(PKG_CONFIG pkg-config REQUIRED)
find_program(CXX_COMPILER NAMES c++ g++ REQUIRED)
set(ENV{PKG_CONFIG_PATH} "${prefix}/lib/pkgconfig:${prefix}/lib64/pkgconfig")
execute_process(COMMAND ${PKG_CONFIG} --cflags --libs concord OUTPUT_VARIABLE flags
                RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pkg-config cannot find concord in ${prefix}")
endif()
separate_arguments(flags UNIX_COMMAND "${flags}")
run(${CXX_COMPILER} -std=c++20 ${SOURCE_DIR}/tests/package/consumer/consumer.cpp ${flags}
    -Wl,-rpath,${prefix}/lib -o ${WORK_DIR}/consumer_pkgconfig)
run(${MPIEXEC} ${mpiexec_flags} -n 2 ${WORK_DIR}/consumer_pkgconfig)

# The installed concord-bench runs from its prefix (RUNPATH $ORIGIN/../lib), with no
# LD_LIBRARY_PATH: a short validated allreduce on 2 ranks. A build without the bench
# installs none.
set(installed_bench ${prefix}/bin/concord-bench)
if(EXISTS ${installed_bench})
  run(${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH ${MPIEXEC} ${mpiexec_flags} -n 2
      ${installed_bench} allreduce --impl concord -m 4:4096 -i 2 -x 1 -c)
endif()
