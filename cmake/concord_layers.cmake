# libconcord's layers, each an OBJECT library that sees only its own headers and
# those of the layers it may use (docs/ARCHITECTURE.md, "Layers"). The objects of
# all layers make the one shared library, libconcord.so.
#
# How the build enforces it: a layer's sources are compiled with one include root,
# ${PROJECT_BINARY_DIR}/layers/<layer>, which holds links to src/<dir> for exactly
# the directories the layer may include (its own and the ones in concord_uses_<layer>),
# never src/ itself. An include of any other layer, e.g. "dispatch/dispatch.hpp" in
# src/transport/, fails to compile: "fatal error: dispatch/dispatch.hpp: No such file
# or directory". Tests and the bench see all of src/ (they test the insides).

# Bottom up. What each layer may include, besides its own headers and include/concord.
set(concord_layers core cuda reduce transport collectives device dispatch engine)
set(concord_uses_core "")
set(concord_uses_cuda core)
set(concord_uses_reduce core cuda)
set(concord_uses_transport core cuda)
set(concord_uses_collectives core reduce transport)
set(concord_uses_device core cuda transport)
set(concord_uses_dispatch core cuda reduce transport collectives device)
# Not transport: only the dispatch layer constructs transports. (collectives for
# shared/message_view.hpp's TensorSpan; its algorithms' headers need transport, so they fail.)
set(concord_uses_engine core cuda reduce collectives device dispatch)

# Compile settings every layer shares (and the library's own link needs).
add_library(concord_layer_settings INTERFACE)
target_include_directories(concord_layer_settings INTERFACE
  ${PROJECT_SOURCE_DIR}/include ${PROJECT_BINARY_DIR}/generated/include
  ${PROJECT_BINARY_DIR}/generated)
target_compile_definitions(concord_layer_settings INTERFACE MPICH_SKIP_MPICXX OMPI_SKIP_MPICXX)
target_link_libraries(concord_layer_settings INTERFACE MPI::MPI_C fmt::fmt
                      nlohmann_json::nlohmann_json)
target_compile_options(concord_layer_settings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:${concord_warnings}>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CONFIG:Release>>:-O3>)
if(CONCORD_WITH_CUDA)
  target_compile_definitions(concord_layer_settings INTERFACE CONCORD_WITH_CUDA=1)
  target_link_libraries(concord_layer_settings INTERFACE ${CONCORD_CUDART})
  target_compile_options(concord_layer_settings INTERFACE
    $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -Xcompiler=-Wall,-Wextra>)
  if(CONCORD_WERROR)
    target_compile_options(concord_layer_settings INTERFACE
      $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings>)
  endif()
endif()
if(CONCORD_WITH_NCCL)
  target_include_directories(concord_layer_settings INTERFACE ${CONCORD_NCCL_INCLUDE_DIR})
  target_compile_definitions(concord_layer_settings INTERFACE CONCORD_WITH_NCCL=1)
endif()

# concord_layer(NAME sources...): the OBJECT library concord_<NAME> with its include
# root; without sources (the cuda layer of a build without CUDA), the root alone.
function(concord_layer name)
  if(NOT name IN_LIST concord_layers)
    message(FATAL_ERROR "concord_layer: unknown layer ${name}")
  endif()
  set(root ${PROJECT_BINARY_DIR}/layers/${name})
  file(MAKE_DIRECTORY ${root})
  foreach(dir IN LISTS concord_uses_${name} name)
    if(NOT IS_SYMLINK ${root}/${dir})
      file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${dir} ${root}/${dir} SYMBOLIC)
    endif()
  endforeach()
  if(NOT ARGN)
    return()
  endif()
  add_library(concord_${name} OBJECT ${ARGN})
  target_include_directories(concord_${name} PRIVATE ${root})
  target_link_libraries(concord_${name} PRIVATE concord_layer_settings)
endfunction()
