# concord.pc's MPI flags (cmake/concord_pkgconfig.cmake) for MPIs with no include
# directories, one and two: no bare -I, one -I per directory.
include(${SOURCE_DIR}/cmake/concord_pkgconfig.cmake)

function(expect include_dirs libraries cflags libs)
  concord_pkgconfig_mpi_flags("${include_dirs}" "${libraries}" got_cflags got_libs)
  if(NOT got_cflags STREQUAL cflags OR NOT got_libs STREQUAL libs)
    message(FATAL_ERROR "concord_pkgconfig_mpi_flags('${include_dirs}', '${libraries}'): "
                        "Cflags part '${got_cflags}', Libs part '${got_libs}'; expected "
                        "'${cflags}' and '${libs}'")
  endif()
endfunction()

expect("" "" "" "")
expect("/opt/mpi/include" "/opt/mpi/lib/libmpi.so" " -I/opt/mpi/include" " /opt/mpi/lib/libmpi.so")
expect("/a;/b" "/l/x.so;/l/y.so" " -I/a -I/b" " /l/x.so /l/y.so")
