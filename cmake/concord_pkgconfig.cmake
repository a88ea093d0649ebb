# concord.pc's MPI flags: one -I per include directory and the libraries, each with
# its leading space, so that an MPI whose compiler needs none (a wrapper used as the
# compiler, Cray's) leaves nothing behind (a bare -I would take the next flag as its
# directory).
function(concord_pkgconfig_mpi_flags include_dirs libraries out_cflags out_libs)
  set(cflags "")
  foreach(dir IN LISTS include_dirs)
    string(APPEND cflags " -I${dir}")
  endforeach()
  set(libs "")
  foreach(lib IN LISTS libraries)
    string(APPEND libs " ${lib}")
  endforeach()
  set(${out_cflags} "${cflags}" PARENT_SCOPE)
  set(${out_libs} "${libs}" PARENT_SCOPE)
endfunction()
