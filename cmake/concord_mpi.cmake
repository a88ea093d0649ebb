# Which MPI concord is built with, how its programs are launched, and what the
# installed package and the Python package need to know about it.
#
# The choice, first match wins:
#   1. -DMPI_C_COMPILER=/path/to/mpicc (FindMPI's own hint; -DMPI_HOME works too)
#   2. the CONCORD_MPI_CC environment variable (how `pip install .` chooses:
#      CONCORD_MPI_CC=mpicc.openmpi pip install .), a name on PATH or a path
#   3. MPICH's mpicc.mpich, where Debian installs MPICH beside Open MPI
#   4. whatever FindMPI finds (mpicc on PATH, MPI_HOME, ...)
# Outputs: MPI::MPI_C, CONCORD_MPI_FLAVOR (MPICH, OpenMPI or other),
# CONCORD_MPIEXEC and CONCORD_MPIEXEC_FLAGS (what the tests launch with).

if(NOT MPI_C_COMPILER AND NOT MPI_HOME)
  set(concord_mpi_cc "$ENV{CONCORD_MPI_CC}")
  if(concord_mpi_cc)
    find_program(concord_mpi_cc_path NAMES ${concord_mpi_cc} NO_CACHE)
    if(NOT concord_mpi_cc_path)
      message(FATAL_ERROR "CONCORD_MPI_CC=${concord_mpi_cc}: no such MPI compiler wrapper "
                          "on PATH. Name an mpicc (mpicc.mpich, mpicc.openmpi, or a full path).")
    endif()
    set(MPI_C_COMPILER ${concord_mpi_cc_path} CACHE FILEPATH "MPI C compiler wrapper")
  else()
    find_program(CONCORD_MPICC_MPICH mpicc.mpich)
    if(CONCORD_MPICC_MPICH)
      set(MPI_C_COMPILER ${CONCORD_MPICC_MPICH} CACHE FILEPATH "MPI C compiler wrapper")
    endif()
  endif()
endif()

find_package(MPI COMPONENTS C)
if(NOT MPI_C_FOUND)
  set(concord_mpi_tried "")
  if(MPI_C_COMPILER)
    set(concord_mpi_tried " (tried MPI_C_COMPILER=${MPI_C_COMPILER})")
  endif()
  message(FATAL_ERROR
    "concord needs an MPI library with its development files (mpi.h and mpicc), and none was "
    "found${concord_mpi_tried}.\n"
    "  Debian/Ubuntu: apt-get install libmpich-dev mpich   (or: libopenmpi-dev openmpi-bin)\n"
    "  Fedora/RHEL:   dnf install mpich-devel   (or openmpi-devel), then module load mpi\n"
    "  HPC clusters:  module load mpich / openmpi / intel-mpi (whichever provides mpicc)\n"
    "Then choose it with -DMPI_C_COMPILER=/path/to/mpicc, or for pip: "
    "CONCORD_MPI_CC=mpicc pip install .")
endif()

# The flavor, from the header the build will use.
set(CONCORD_MPI_FLAVOR other)
find_file(concord_mpi_h mpi.h PATHS ${MPI_C_INCLUDE_DIRS} NO_DEFAULT_PATH NO_CACHE)
if(concord_mpi_h)
  file(STRINGS ${concord_mpi_h} concord_mpi_h_ompi REGEX "#define OPEN_MPI 1")
  file(STRINGS ${concord_mpi_h} concord_mpi_h_mpich REGEX "#define MPICH_VERSION ")
  if(concord_mpi_h_ompi)
    set(CONCORD_MPI_FLAVOR OpenMPI)
  elseif(concord_mpi_h_mpich)
    set(CONCORD_MPI_FLAVOR MPICH)
  endif()
endif()
message(STATUS "concord: MPI is ${CONCORD_MPI_FLAVOR} (${MPI_C_COMPILER})")

# The launcher of that MPI: Debian's suffixed names first, so a machine with
# both never mixes a launcher of one with a library of the other.
get_filename_component(concord_mpi_bin "${MPI_C_COMPILER}" DIRECTORY)
if(CONCORD_MPI_FLAVOR STREQUAL "OpenMPI")
  set(concord_mpiexec_names mpiexec.openmpi mpirun.openmpi mpiexec mpirun)
elseif(CONCORD_MPI_FLAVOR STREQUAL "MPICH")
  set(concord_mpiexec_names mpiexec.mpich mpiexec.hydra mpiexec mpirun)
else()
  set(concord_mpiexec_names mpiexec mpirun)
endif()
find_program(CONCORD_MPIEXEC NAMES ${concord_mpiexec_names} HINTS ${concord_mpi_bin} REQUIRED)
# Open MPI refuses more ranks than cores and (in CI containers) running as root.
set(concord_mpiexec_default_flags "")
if(CONCORD_MPI_FLAVOR STREQUAL "OpenMPI")
  set(concord_mpiexec_default_flags --oversubscribe --allow-run-as-root)
endif()
set(CONCORD_MPIEXEC_FLAGS "${concord_mpiexec_default_flags}" CACHE STRING
    "Flags the tests pass to CONCORD_MPIEXEC before -n")

# The C++ wrapper of the same MPI, for consumers of the installed package that
# enable only C++ (concordConfig.cmake).
get_filename_component(concord_mpicc_name "${MPI_C_COMPILER}" NAME)
string(REPLACE "mpicc" "mpicxx" concord_mpicxx_name "${concord_mpicc_name}")
find_program(CONCORD_MPI_CXX_COMPILER NAMES ${concord_mpicxx_name} mpicxx mpic++
             HINTS ${concord_mpi_bin} NO_DEFAULT_PATH)
string(JOIN " " CONCORD_MPIEXEC_FLAGS_STRING ${CONCORD_MPIEXEC_FLAGS})
