# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
#
# Acceptance clients (label "abi"), built the way an application is: against NVIDIA's nccl.h and
# cuda_runtime.h (never our include/), linked to our libnccl.so.2 by file.
#   client_np{2,3,4}                 abi_client: every collective x datatype x operator x
#                                    in-place/out-of-place x count, split, all-to-all-v, groups
#   client_np8_allreduce_64MiB_shm   8 ranks, 16M float32 all-reduce, exact check
#   client_np8_allreduce_64MiB_tcp   the same with NCCL_SHM_DISABLE=1
#   preload_ours / preload_without   abi_preload, linked to NVIDIA's libnccl.so.2, run with and
#                                    without LD_PRELOAD of ours (run_preload.sh)
# Without NVIDIA's headers (or library, for the preload pair) the tests are still registered and
# report SKIP with the reason, so a missing dependency is never a silent pass.
set(client_dir ${CMAKE_CURRENT_LIST_DIR})
set(_client_hints)
if(DEFINED ENV{CUDA_HOME})
  list(APPEND _client_hints $ENV{CUDA_HOME})
endif()
list(APPEND _client_hints /usr/local/cuda)
set(_client_inc_hints)
set(_client_lib_hints)
foreach(h ${_client_hints})
  list(APPEND _client_inc_hints ${h}/include)
  list(APPEND _client_lib_hints ${h}/lib64 ${h}/lib)
endforeach()
find_path(MIXCCL_CLIENT_NCCL_INCLUDE_DIR nccl.h HINTS ${_client_inc_hints} NO_DEFAULT_PATH
          DOC "NVIDIA's nccl.h for the acceptance client")
find_path(MIXCCL_CLIENT_CUDA_INCLUDE_DIR cuda_runtime.h HINTS ${_client_inc_hints} NO_DEFAULT_PATH
          DOC "cuda_runtime.h (included by NVIDIA's nccl.h)")
find_library(MIXCCL_CLIENT_REAL_NCCL_LIB NAMES libnccl.so.2 HINTS ${_client_lib_hints} NO_DEFAULT_PATH
             DOC "NVIDIA's libnccl.so.2 for the preload check")
if(MIXCCL_CLIENT_NCCL_INCLUDE_DIR STREQUAL "${PROJECT_SOURCE_DIR}/include")
  message(FATAL_ERROR "MIXCCL_CLIENT_NCCL_INCLUDE_DIR must be NVIDIA's include directory, not ours")
endif()
message(STATUS "mixccl acceptance client: nccl.h=${MIXCCL_CLIENT_NCCL_INCLUDE_DIR} "
               "cuda_runtime.h=${MIXCCL_CLIENT_CUDA_INCLUDE_DIR} libnccl.so.2=${MIXCCL_CLIENT_REAL_NCCL_LIB}")

set(_client_tests client_np2 client_np3 client_np4 client_np8_allreduce_64MiB_shm client_np8_allreduce_64MiB_tcp)
if(MIXCCL_CLIENT_NCCL_INCLUDE_DIR AND MIXCCL_CLIENT_CUDA_INCLUDE_DIR)
  function(mixccl_client_target name)
    cmake_parse_arguments(T "" "" "SOURCES;LINK" ${ARGN})
    add_executable(${name} ${T_SOURCES})
    # SYSTEM: CUDA's headers are not warning-clean; only NVIDIA's and CUDA's directories are used.
    target_include_directories(${name} SYSTEM PRIVATE ${MIXCCL_CLIENT_NCCL_INCLUDE_DIR}
                                                      ${MIXCCL_CLIENT_CUDA_INCLUDE_DIR})
    target_include_directories(${name} PRIVATE ${client_dir})
    target_link_libraries(${name} PRIVATE ${T_LINK} ${CMAKE_DL_LIBS} m)
    set_target_properties(${name} PROPERTIES C_STANDARD 99 C_STANDARD_REQUIRED ON)
  endfunction()

  # Linked by file, not through the `mixccl` target, so our include/ is not inherited.
  mixccl_client_target(abi_client SOURCES ${client_dir}/client.c ${client_dir}/client_dtypes.c
                       LINK $<TARGET_FILE:mixccl>)
  add_dependencies(abi_client mixccl)
  target_link_options(abi_client PRIVATE -Wl,-rpath,$<TARGET_FILE_DIR:mixccl>)
  target_compile_definitions(abi_client PRIVATE MIXCCL_CLIENT_EXPECTED_LIB="$<TARGET_FILE:mixccl>")

  foreach(np 2 3 4)
    add_test(NAME client_np${np} COMMAND abi_client --np ${np})
    set_tests_properties(client_np${np} PROPERTIES PROCESSORS ${np})
  endforeach()
  set(_np8 --np 8 --only allreduce --dtype float32 --op sum --count 16777216)
  add_test(NAME client_np8_allreduce_64MiB_shm COMMAND abi_client ${_np8} -v)
  add_test(NAME client_np8_allreduce_64MiB_tcp COMMAND abi_client ${_np8} -v)
  set_tests_properties(client_np8_allreduce_64MiB_tcp PROPERTIES ENVIRONMENT NCCL_SHM_DISABLE=1)
  set_tests_properties(client_np8_allreduce_64MiB_shm client_np8_allreduce_64MiB_tcp PROPERTIES PROCESSORS 8)
else()
  foreach(t ${_client_tests})
    add_test(NAME ${t} COMMAND sh -c "echo 'SKIP: NVIDIA nccl.h/cuda_runtime.h not found (set CUDA_HOME)'; exit 77")
    set_tests_properties(${t} PROPERTIES SKIP_RETURN_CODE 77)
  endforeach()
endif()
set_tests_properties(${_client_tests} PROPERTIES LABELS abi TIMEOUT 900)

# The preload pair. The wrapper also skips (77) if the library disappears after configuring.
if(MIXCCL_CLIENT_NCCL_INCLUDE_DIR AND MIXCCL_CLIENT_CUDA_INCLUDE_DIR AND MIXCCL_CLIENT_REAL_NCCL_LIB)
  mixccl_client_target(abi_preload SOURCES ${client_dir}/preload.c LINK ${MIXCCL_CLIENT_REAL_NCCL_LIB})
  add_dependencies(abi_preload mixccl)  # the tests preload it
  foreach(mode ours without)
    add_test(NAME preload_${mode}
             COMMAND sh ${client_dir}/run_preload.sh ${mode} $<TARGET_FILE:abi_preload>
                     $<TARGET_FILE_DIR:mixccl>/libnccl.so.2 ${MIXCCL_CLIENT_REAL_NCCL_LIB})
  endforeach()
else()
  foreach(mode ours without)
    add_test(NAME preload_${mode}
             COMMAND sh -c "echo 'SKIP: NVIDIA libnccl.so.2 or nccl.h not found (set CUDA_HOME)'; exit 77")
  endforeach()
endif()
set_tests_properties(preload_ours preload_without PROPERTIES LABELS abi TIMEOUT 300 SKIP_RETURN_CODE 77)

# The mixed-vendor client (label "device"): client_mixed.c against NVIDIA's nccl.h and the Khronos
# CL/cl.h, linked to our library by file and to the ICD loader. run_client_mixed.sh runs it with
# H,H,H,H and then H,O,H,O and requires identical hash files; it skips (77) without an OpenCL
# platform. Registered as a skip with the reason when NVIDIA's headers or OpenCL are missing.
if(MIXCCL_CLIENT_NCCL_INCLUDE_DIR AND MIXCCL_CLIENT_CUDA_INCLUDE_DIR AND OpenCL_FOUND AND TARGET mixccl_device_opencl)
  mixccl_client_target(abi_client_mixed SOURCES ${client_dir}/client_mixed.c ${client_dir}/client_dtypes.c
                       LINK $<TARGET_FILE:mixccl> ${OpenCL_LIBRARIES})
  add_dependencies(abi_client_mixed mixccl)
  target_link_options(abi_client_mixed PRIVATE -Wl,-rpath,$<TARGET_FILE_DIR:mixccl>)
  add_test(NAME client_mixed_hoho
           COMMAND sh ${client_dir}/run_client_mixed.sh $<TARGET_FILE:abi_client_mixed>
                   ${CMAKE_CURRENT_BINARY_DIR}/client_mixed H,H,H,H H,O,H,O)
else()
  add_test(NAME client_mixed_hoho
           COMMAND sh -c "echo 'SKIP: needs NVIDIA nccl.h/cuda_runtime.h (CUDA_HOME) and OpenCL (headers, ICD loader)'; exit 77")
endif()
set_tests_properties(client_mixed_hoho PROPERTIES LABELS "abi;device" TIMEOUT 900 SKIP_RETURN_CODE 77 PROCESSORS 4)

# Device-backend plugin refusals (a plugin without the table, a newer major version, ...) and an
# unknown MIXCCL_DEVICE_BACKEND, reusing tests/plugin's suites under the "device" label.
add_test(NAME device_plugin_refusals
         COMMAND plugin_test --gtest_filter=PluginLoader.RefusesBrokenPluginsWithAMessageSayingWhy)
add_test(NAME device_unknown_backend COMMAND plugin_test --gtest_filter=SelectUnknown.*)
set_tests_properties(device_plugin_refusals device_unknown_backend PROPERTIES LABELS device TIMEOUT 300
                     FAIL_REGULAR_EXPRESSION "PASSED  \\] 0 tests")
set_tests_properties(device_plugin_refusals PROPERTIES ENVIRONMENT_MODIFICATION "MIXCCL_DEVICE_BACKEND=unset:")
set_tests_properties(device_unknown_backend PROPERTIES ENVIRONMENT_MODIFICATION "MIXCCL_DEVICE_BACKEND=set:nosuchbackend")
