# CONCORD_WITH_CUDA / CONCORD_WITH_NCCL: ON, OFF or AUTO (the default: on where
# nvcc, respectively nccl.h, is found). CUDA code is built for sm_80 (A100) and
# sm_90 (H100/H200) with PTX for later GPUs, unless CMAKE_CUDA_ARCHITECTURES says
# otherwise. The CUDA runtime is linked statically and NCCL is loaded at run time,
# so the library loads and runs its host paths on machines without a GPU or NCCL.
set(CONCORD_WITH_CUDA AUTO CACHE STRING "Build the CUDA device path: ON, OFF or AUTO")
set(CONCORD_WITH_NCCL AUTO CACHE STRING "Build the NCCL transport: ON, OFF or AUTO")
set_property(CACHE CONCORD_WITH_CUDA PROPERTY STRINGS AUTO ON OFF)
set_property(CACHE CONCORD_WITH_NCCL PROPERTY STRINGS AUTO ON OFF)

# CONCORD_CUDA_EMULATION: the device path built with the host compiler against the
# CUDA emulator in tests/cudaemu (a test double of the CUDA runtime and NCCL that
# runs on the CPU with deferred streams, see docs/GPU.md), so its tests run
# where there is no GPU. Needs the CUDA headers only; never for production use.
option(CONCORD_CUDA_EMULATION "Build the device path against the CPU CUDA emulator (tests)" OFF)

set(concord_cuda_request ${CONCORD_WITH_CUDA})
set(CONCORD_WITH_CUDA OFF)
if(CONCORD_CUDA_EMULATION)
  if(concord_cuda_request STREQUAL "OFF")
    message(FATAL_ERROR "CONCORD_CUDA_EMULATION=ON needs CONCORD_WITH_CUDA (AUTO or ON)")
  endif()
  # The CUDA headers only (no nvcc, no libcudart): an installed toolkit's, else those
  # scripts/cuda-headers unpacks into .deps/cuda where the machine has no CUDA.
  find_package(CUDAToolkit QUIET)
  find_path(CONCORD_CUDA_INCLUDE_DIR cuda_runtime.h
            HINTS ${CUDAToolkit_INCLUDE_DIRS} ${PROJECT_SOURCE_DIR}/.deps/cuda/include
                  ENV CUDA_HOME ENV CUDA_PATH PATH_SUFFIXES include)
  if(NOT CONCORD_CUDA_INCLUDE_DIR)
    message(FATAL_ERROR "CONCORD_CUDA_EMULATION=ON needs the CUDA headers (cuda_runtime.h), "
                        "and none were found: install a CUDA toolkit, set CUDAToolkit_ROOT, "
                        "or run scripts/cuda-headers (it unpacks them into .deps/cuda)")
  endif()
  set(concord_cuda_include_dirs ${CONCORD_CUDA_INCLUDE_DIR})
  set(CONCORD_WITH_CUDA ON)
  set(CMAKE_CUDA_ARCHITECTURES "emulated")
elseif(NOT concord_cuda_request STREQUAL "OFF")
  # nvcc is often installed off PATH, in the toolkit's usual place.
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    find_program(concord_nvcc nvcc)
    if(NOT concord_nvcc)
      set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
    endif()
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES "80-real;90-real;90-virtual")
    endif()
    enable_language(CUDA)
    # CMake 3.25 knows no C++20 dialect for nvcc, which takes -std=c++20 since 12.0.
    if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    set(concord_cuda_include_dirs ${CUDAToolkit_INCLUDE_DIRS})
    set(CONCORD_WITH_CUDA ON)
  elseif(concord_cuda_request STREQUAL "ON")
    message(FATAL_ERROR "CONCORD_WITH_CUDA=ON but no CUDA compiler was found "
                        "(set CMAKE_CUDA_COMPILER or put nvcc on PATH)")
  endif()
endif()

set(concord_nccl_request ${CONCORD_WITH_NCCL})
set(CONCORD_WITH_NCCL OFF)
if(CONCORD_WITH_CUDA AND NOT concord_nccl_request STREQUAL "OFF")
  find_path(CONCORD_NCCL_INCLUDE_DIR nccl.h
            HINTS ${concord_cuda_include_dirs} ENV NCCL_HOME
                  ${PROJECT_SOURCE_DIR}/.deps/cuda/include
            PATH_SUFFIXES include)
  if(CONCORD_NCCL_INCLUDE_DIR)
    set(CONCORD_WITH_NCCL ON)
  elseif(concord_nccl_request STREQUAL "ON")
    message(FATAL_ERROR "CONCORD_WITH_NCCL=ON but nccl.h was not found (set NCCL_HOME, "
                        "or run scripts/cuda-headers: it unpacks NCCL's into .deps/cuda)")
  endif()
elseif(concord_nccl_request STREQUAL "ON")
  message(FATAL_ERROR "CONCORD_WITH_NCCL=ON needs the CUDA path (CONCORD_WITH_CUDA)")
endif()
message(STATUS "concord: CUDA device path ${CONCORD_WITH_CUDA} (architectures "
               "${CMAKE_CUDA_ARCHITECTURES}), NCCL transport ${CONCORD_WITH_NCCL}")

# The CUDA runtime to link (CONCORD_CUDART), and concord_cuda_sources(files...),
# which makes .cu files host-compiled C++ in the emulation build.
if(CONCORD_CUDA_EMULATION)
  add_library(concord_cudaemu SHARED ${PROJECT_SOURCE_DIR}/tests/cudaemu/state.cpp
                                     ${PROJECT_SOURCE_DIR}/tests/cudaemu/memory.cpp
                                     ${PROJECT_SOURCE_DIR}/tests/cudaemu/streams.cpp
                                     ${PROJECT_SOURCE_DIR}/tests/cudaemu/device.cpp
                                     ${PROJECT_SOURCE_DIR}/tests/cudaemu/grid.cpp)
  # The grid scheduler's fibers (tests/cudaemu/grid.cpp).
  find_package(boost_context 1.74 CONFIG REQUIRED)
  target_link_libraries(concord_cudaemu PRIVATE Boost::context)
  target_include_directories(concord_cudaemu PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/tests>)
  target_include_directories(concord_cudaemu SYSTEM PUBLIC
                             $<BUILD_INTERFACE:${concord_cuda_include_dirs}>)
  target_compile_definitions(concord_cudaemu PUBLIC CONCORD_CUDA_EMULATION=1)
  set(CONCORD_CUDART concord_cudaemu)
  # The NCCL stand-in, loaded through CONCORD_NCCL_LIBRARY by the tests.
  if(CONCORD_WITH_NCCL)
    add_library(concord_cudaemu_nccl SHARED ${PROJECT_SOURCE_DIR}/tests/cudaemu/nccl.cpp)
    target_include_directories(concord_cudaemu_nccl PRIVATE ${CONCORD_NCCL_INCLUDE_DIR})
    target_link_libraries(concord_cudaemu_nccl PRIVATE concord_cudaemu MPI::MPI_C)
  endif()
elseif(CONCORD_WITH_CUDA)
  set(CONCORD_CUDART CUDA::cudart_static)
endif()

function(concord_cuda_sources)
  if(CONCORD_CUDA_EMULATION)
    set_source_files_properties(${ARGN} PROPERTIES LANGUAGE CXX
      COMPILE_OPTIONS "-xc++;-include;cudaemu/kernel.hpp;-Wno-unknown-pragmas")
  endif()
endfunction()
