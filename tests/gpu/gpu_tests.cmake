# The GPU tests (included by tests/CMakeLists.txt, in its scope: paths are relative
# to tests/, and the targets and ctest names are that directory's): the device
# path, its kernels and the NCCL transport on a GPU, and the emulation build's
# extra runs on the CUDA emulator.
# GPU tests: built wherever CUDA is, skipped (exit 77, "skipped: no CUDA device")
# where no GPU is visible. Ranks share the GPU(s): local rank % device count.
if(CONCORD_WITH_CUDA)
  concord_test_target(concord_gpu_tests
    gpu/gpu_main.cpp
    gpu/test_gpu_allreduce.cpp
    gpu/test_gpu_peer_path.cpp
    gpu/test_gpu_peer_failures.cpp
    gpu/test_gpu_abort.cpp
    gpu/test_gpu_engine_failures.cpp
    gpu/stream_kernels.cu)
  concord_cuda_sources(gpu/stream_kernels.cu)
  target_link_libraries(concord_gpu_tests PRIVATE ${CONCORD_CUDART})
  # The CUDA kernels bit for bit against the host table (one process).
  concord_test_target(concord_gpu_kernel_tests gpu/kernels_main.cpp gpu/test_gpu_kernels.cpp
                      gpu/test_gpu_copy_kernels.cpp)
  target_link_libraries(concord_gpu_kernel_tests PRIVATE ${CONCORD_CUDART})
  add_test(NAME gpu_kernels COMMAND concord_gpu_kernel_tests)
  set_tests_properties(gpu_kernels PROPERTIES TIMEOUT ${CONCORD_TEST_TIMEOUT} LABELS gpu
                       SKIP_RETURN_CODE 77 SKIP_REGULAR_EXPRESSION "skipped: no CUDA device")
  target_compile_definitions(concord_gpu_tests PRIVATE CONCORD_WITH_CUDA=1)
  set(gpu_tests "")
  foreach(ranks 1 2 4)
    concord_add_mpi_test(gpu_np${ranks} concord_gpu_tests ${ranks})
    list(APPEND gpu_tests gpu_np${ranks})
  endforeach()
  # One node's ranks take the device-synchronised path (where the ranks' kernels run
  # at once: the emulated GPU runs them so). The other device paths: the same path in
  # small pieces and two shot, pinned-host staging, many small IPC rounds, two virtual
  # nodes (IPC inside, NCCL or host staging across), a peer that never arrives.
  concord_add_mpi_test(gpu_np3_peer_pieces concord_gpu_tests 3 ARGS "[matrix]"
    ENV "CONCORD_CUDA_IPC_REGION_BYTES=1048576;CONCORD_CUDA_PEER=on"
        "CONCORD_TUNING_FILE=${CMAKE_CURRENT_SOURCE_DIR}/gpu/tuning_peer_two_shot.json")
  concord_add_mpi_test(gpu_np3_peer_direct concord_gpu_tests 3 ARGS "[matrix],[peer]"
    ENV "CONCORD_CUDA_IPC_REGION_BYTES=1048576;CONCORD_CUDA_PEER=on"
        "CONCORD_TUNING_FILE=${CMAKE_CURRENT_SOURCE_DIR}/gpu/tuning_peer_direct.json")
  concord_add_mpi_test(gpu_np2_staging concord_gpu_tests 2 ARGS "~[.]~[peer]~[probe]"
    ENV CONCORD_CUDA_IPC=0)
  concord_add_mpi_test(gpu_np3_small_regions concord_gpu_tests 3 ARGS "[matrix]"
    ENV "CONCORD_CUDA_IPC_REGION_BYTES=4096;CONCORD_CUDA_DIRECT_BYTES=0;CONCORD_CUDA_PEER=off")
  concord_add_mpi_test(gpu_np3_peer_timeout concord_gpu_tests 3 ARGS "[timeout]"
    ENV "CONCORD_TRANSPORT_TIMEOUT_S=0.5;CONCORD_CUDA_PEER=on")
  concord_add_mpi_test(gpu_np2_peer_failures concord_gpu_tests 2 ARGS "[peer_failure]"
    ENV "CONCORD_TRANSPORT_TIMEOUT_S=1;CONCORD_CUDA_PEER=on;CONCORD_CUDA_IPC_REGION_BYTES=1048576"
        "CONCORD_TUNING_FILE=${CMAKE_CURRENT_SOURCE_DIR}/gpu/tuning_peer_failures.json")
  # Device calls that cannot finish (gpu/test_gpu_abort.cpp): a rank that never
  # comes to the first one, and aborts, in the set-up, in the IPC rounds and in the
  # device-synchronised path's kernels.
  concord_add_mpi_test(gpu_np2_setup_timeout concord_gpu_tests 2 ARGS "[setup_timeout]"
    ENV "CONCORD_TRANSPORT_TIMEOUT_S=2")
  concord_add_mpi_test(gpu_np2_device_abort concord_gpu_tests 2 ARGS "[device_abort]"
    ENV "CONCORD_TRANSPORT_TIMEOUT_S=60;CONCORD_CUDA_PEER=off")
  concord_add_mpi_test(gpu_np2_peer_abort concord_gpu_tests 2 ARGS "[peer_abort]"
    ENV "CONCORD_TRANSPORT_TIMEOUT_S=60;CONCORD_CUDA_PEER=on")
  concord_add_mpi_test(gpu_np4_virtual_nodes concord_gpu_tests 4 ENV CONCORD_VIRTUAL_NODES=2)
  concord_add_mpi_test(gpu_np4_virtual_nodes_host_staging concord_gpu_tests 4 ARGS "[matrix]"
    ENV "CONCORD_VIRTUAL_NODES=2;CONCORD_NCCL=0")
  list(APPEND gpu_tests gpu_np3_peer_pieces gpu_np3_peer_direct gpu_np2_staging gpu_np3_small_regions
       gpu_np3_peer_timeout gpu_np2_setup_timeout gpu_np2_device_abort gpu_np2_peer_abort
       gpu_np4_virtual_nodes gpu_np2_peer_failures
       gpu_np4_virtual_nodes_host_staging)
  # The device-synchronised kernels (reduce/cuda_peer_kernels.hpp) on their own:
  # ranks meeting through flags in each other's device memory, at 2 and 3 ranks.
  concord_test_target(concord_peer_kernel_tests gpu/gpu_main.cpp gpu/test_peer_kernels.cpp
                      gpu/test_peer_kernels_failures.cpp)
  target_link_libraries(concord_peer_kernel_tests PRIVATE ${CONCORD_CUDART})
  foreach(ranks 2 3)
    concord_add_mpi_test(gpu_peer_np${ranks} concord_peer_kernel_tests ${ranks})
    list(APPEND gpu_tests gpu_peer_np${ranks})
  endforeach()
  set_tests_properties(${gpu_tests} PROPERTIES LABELS "mpi;gpu" SKIP_RETURN_CODE 77
                       SKIP_REGULAR_EXPRESSION "skipped: no CUDA device")
endif()

if(CONCORD_WITH_NCCL)
  # NCCL loaded at run time: version decoding, loading, load failures (the test
  # re-runs itself with CONCORD_NCCL_LIBRARY set to something that cannot load).
  concord_test_target(concord_nccl_unit_tests support/catch_main.cpp unit/test_nccl_library.cpp)
  target_include_directories(concord_nccl_unit_tests PRIVATE ${CONCORD_NCCL_INCLUDE_DIR}
                             ${concord_cuda_include_dirs})
  add_test(NAME nccl_library COMMAND concord_nccl_unit_tests)
  set_tests_properties(nccl_library PROPERTIES TIMEOUT ${CONCORD_TEST_TIMEOUT} LABELS unit)
  # The NCCL transport's exchanges on device buffers (GPU; skipped without one,
  # and with several ranks on one GPU before NCCL 2.30).
  concord_test_target(concord_nccl_transport_test gpu/test_nccl_transport.cpp)
  target_include_directories(concord_nccl_transport_test PRIVATE ${CONCORD_NCCL_INCLUDE_DIR})
  target_link_libraries(concord_nccl_transport_test PRIVATE ${CONCORD_CUDART})
  foreach(ranks 1 2 3)
    concord_add_mpi_test(nccl_transport_np${ranks} concord_nccl_transport_test ${ranks})
    set_tests_properties(nccl_transport_np${ranks} PROPERTIES LABELS "mpi;gpu"
                         SKIP_RETURN_CODE 77 SKIP_REGULAR_EXPRESSION "^skipped: ")
  endforeach()
endif()

# The emulation build (CONCORD_CUDA_EMULATION, tests/cudaemu): the device tests
# run on the CPU against the emulated CUDA runtime and NCCL (2.30 by default, so
# several ranks share the emulated GPU through NCCL too).
if(CONCORD_CUDA_EMULATION AND CONCORD_WITH_NCCL)
  set_property(TEST ${gpu_tests} gpu_kernels nccl_transport_np1 nccl_transport_np2
               nccl_transport_np3 APPEND PROPERTY ENVIRONMENT
               "CONCORD_NCCL_LIBRARY=$<TARGET_FILE:concord_cudaemu_nccl>")
  # NCCL before 2.30 refuses ranks sharing a GPU: concord must see that coming
  # and cross the virtual nodes through host memory instead.
  concord_add_mpi_test(gpu_np4_virtual_nodes_nccl_2_28 concord_gpu_tests 4 ARGS "[matrix]"
    ENV "CONCORD_VIRTUAL_NODES=2;CUDAEMU_NCCL_VERSION=22809"
        "CONCORD_NCCL_LIBRARY=$<TARGET_FILE:concord_cudaemu_nccl>")
  # Two GPUs, one per rank: IPC between devices (peer access), and the check that
  # a buffer's GPU is the current one.
  concord_add_mpi_test(gpu_np2_two_gpus concord_gpu_tests 2
    ENV "CUDAEMU_DEVICES=2" "CONCORD_NCCL_LIBRARY=$<TARGET_FILE:concord_cudaemu_nccl>")
  # NCCL's own refusal at init (here: the variable forced off) must not strand a
  # node's ranks: every rank of the cross communicator falls back together.
  concord_add_mpi_test(gpu_np4_virtual_nodes_nccl_init_fails concord_gpu_tests 4
    ARGS "[stream],[engine]"
    ENV "CONCORD_VIRTUAL_NODES=2;NCCL_MULTI_RANK_GPU_ENABLE=0"
        "CONCORD_NCCL_LIBRARY=$<TARGET_FILE:concord_cudaemu_nccl>")
  concord_add_mpi_test(gpu_peer_np2_two_gpus concord_peer_kernel_tests 2 ENV "CUDAEMU_DEVICES=2")
  # Emulated ranks take turns on CI's two cores whenever the host is busy, as ranks
  # without MPS take turns on a GPU (their meetings then take the host's time slices),
  # and the set-up probe may say so: the device tests take the path without it, and
  # the probe is tested on its own. Under the emulator's MPS (the default) the ranks'
  # kernels run at once; with CUDAEMU_MPS=0 they take turns, and small messages go
  # through host memory and large ones over the IPC rounds instead.
  set_property(TEST gpu_np1 gpu_np2 gpu_np4 gpu_np2_two_gpus APPEND PROPERTY ENVIRONMENT
               CONCORD_CUDA_PEER=on)
  concord_add_mpi_test(gpu_np2_probe concord_gpu_tests 2 ARGS "[probe]"
    ENV "CONCORD_TEST_EXPECT_CONCURRENT=1"
        "CONCORD_NCCL_LIBRARY=$<TARGET_FILE:concord_cudaemu_nccl>")
  concord_add_mpi_test(gpu_np2_no_mps concord_gpu_tests 2 ARGS "[probe],[engine]"
    ENV "CUDAEMU_MPS=0;CONCORD_TEST_EXPECT_CONCURRENT=0"
        "CONCORD_NCCL_LIBRARY=$<TARGET_FILE:concord_cudaemu_nccl>")
  # A device fusion buffer the last rank cannot allocate (it fills its emulated GPU's
  # 256 MiB): the ranks agree on it, and no peer waits out the 5 s deadline.
  concord_add_mpi_test(gpu_np2_device_fusion_oom concord_gpu_tests 2 ARGS "[device_fusion_buffer]"
    ENV "CUDAEMU_DEVICE_MEMORY_BYTES=268435456;CONCORD_TRANSPORT_TIMEOUT_S=5"
        "CONCORD_NCCL_LIBRARY=$<TARGET_FILE:concord_cudaemu_nccl>")
  set_tests_properties(gpu_np2_two_gpus gpu_np4_virtual_nodes_nccl_2_28
                       gpu_np4_virtual_nodes_nccl_init_fails gpu_peer_np2_two_gpus gpu_np2_probe
                       gpu_np2_no_mps gpu_np2_device_fusion_oom PROPERTIES LABELS "mpi;gpu")
  # The emulator's own semantics: deferred streams, legacy-stream ordering, IPC,
  # bounds and guard pages, and its grid scheduler: barriers, blocks under way together,
  # kernels polling a peer process (what makes a pass of the tests above mean something).
  concord_test_target(concord_cudaemu_tests cudaemu/test_emulator.cpp cudaemu/test_grid.cpp)
  target_link_libraries(concord_cudaemu_tests PRIVATE ${CONCORD_CUDART} MPI::MPI_C)
  concord_add_mpi_test(cudaemu_np2 concord_cudaemu_tests 2)
  # ... and sharing the emulated GPU without MPS: kernels one process at a time.
  concord_add_mpi_test(cudaemu_np2_no_mps concord_cudaemu_tests 2 ARGS "[no_mps]"
    ENV "CUDAEMU_MPS=0")
  set_tests_properties(cudaemu_np2 cudaemu_np2_no_mps PROPERTIES LABELS "mpi;gpu")
endif()
