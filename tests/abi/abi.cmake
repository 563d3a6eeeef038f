# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
# ABI suites (label "abi"):
#   abi_values_test      our headers against NVIDIA's NCCL 2.28.9 headers, item by item; the numeric
#                        items are also static_asserted at build time (abi_gen -> abi_real_values.h)
#   abi_header_checks    include/nccl.h and mixccl/device_api.h compiled as C99 and C++11 with
#                        -pedantic -Werror, with and without cuda_runtime.h (CTest: abi_c99)
#   abi_exports_test     the dynamic symbols and SONAME of the built library
#   abi_device_api_test  behaviour of the device-API stubs
set(abi_dir ${CMAKE_CURRENT_LIST_DIR})

# NVIDIA's headers, for reference only. Never on the include path of anything that includes ours.
set(_cuda_hints)
if(DEFINED ENV{CUDA_HOME})
  list(APPEND _cuda_hints $ENV{CUDA_HOME}/include)
endif()
list(APPEND _cuda_hints /usr/local/cuda/include)
find_path(MIXCCL_REAL_NCCL_INCLUDE_DIR nccl.h HINTS ${_cuda_hints} NO_DEFAULT_PATH
          DOC "Directory of NVIDIA's nccl.h, the reference of the ABI tests")
find_path(MIXCCL_CUDA_RUNTIME_INCLUDE_DIR cuda_runtime.h HINTS ${_cuda_hints} NO_DEFAULT_PATH
          DOC "Directory of cuda_runtime.h, for the header checks and NVIDIA's nccl.h")
if(MIXCCL_REAL_NCCL_INCLUDE_DIR STREQUAL "${PROJECT_SOURCE_DIR}/include")
  message(FATAL_ERROR "MIXCCL_REAL_NCCL_INCLUDE_DIR points at our own include/; give NVIDIA's")
endif()
set(_have_real OFF)
if(MIXCCL_REAL_NCCL_INCLUDE_DIR AND MIXCCL_CUDA_RUNTIME_INCLUDE_DIR)
  set(_have_real ON)
endif()
message(STATUS "mixccl abi tests: reference nccl.h=${MIXCCL_REAL_NCCL_INCLUDE_DIR} "
               "cuda_runtime.h=${MIXCCL_CUDA_RUNTIME_INCLUDE_DIR}")

# --- abi_values ---------------------------------------------------------------------------------
# The reference tables: only NVIDIA's and CUDA's directories on the include path.
add_library(abi_real_tables OBJECT ${abi_dir}/abi_real_tables.cc)
target_include_directories(abi_real_tables PRIVATE ${PROJECT_SOURCE_DIR})
if(_have_real)
  target_include_directories(abi_real_tables SYSTEM PRIVATE ${MIXCCL_REAL_NCCL_INCLUDE_DIR}
                                                            ${MIXCCL_CUDA_RUNTIME_INCLUDE_DIR})
  target_compile_definitions(abi_real_tables PRIVATE MIXCCL_HAVE_REAL_NCCL)
endif()

# Writes the reference's numeric items as a header, for the build-time static_asserts.
add_executable(abi_gen ${abi_dir}/abi_gen_main.cc $<TARGET_OBJECTS:abi_real_tables>)
target_include_directories(abi_gen PRIVATE ${PROJECT_SOURCE_DIR})
set(abi_generated ${CMAKE_CURRENT_BINARY_DIR}/generated/abi_real_values.h)
add_custom_command(OUTPUT ${abi_generated}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_CURRENT_BINARY_DIR}/generated
  COMMAND abi_gen ${abi_generated}
  DEPENDS abi_gen
  COMMENT "Reading NCCL's ABI values into abi_real_values.h")

add_executable(abi_values_test ${abi_dir}/abi_values_test.cc ${abi_dir}/abi_our_tables.cc
                               ${abi_dir}/abi_static_check.cc ${abi_generated} $<TARGET_OBJECTS:abi_real_tables>)
target_include_directories(abi_values_test PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/include
                                                   ${CMAKE_CURRENT_BINARY_DIR}/generated)
target_compile_definitions(abi_values_test PRIVATE
  MIXCCL_REAL_NCCL_H="${MIXCCL_REAL_NCCL_INCLUDE_DIR}/nccl.h"
  MIXCCL_OUR_NCCL_H="${PROJECT_SOURCE_DIR}/include/nccl.h"
  MIXCCL_ABI_ITEMS="${abi_dir}/abi_items.inc")
target_link_libraries(abi_values_test PRIVATE GTest::gtest_main)
gtest_discover_tests(abi_values_test DISCOVERY_MODE PRE_TEST PROPERTIES LABELS abi TIMEOUT 120)

# --- abi_c99: header compile checks --------------------------------------------------------------
add_custom_target(abi_header_checks)
function(mixccl_abi_header_check name lang)
  cmake_parse_arguments(C "" "" "DEFS;CUDA" ${ARGN})
  if(lang STREQUAL "C")
    set(src ${abi_dir}/abi_header_check.c)
  else()
    set(src ${abi_dir}/abi_header_check.cc)
  endif()
  add_library(${name} OBJECT ${src})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/include ${abi_dir})
  if(C_CUDA)
    # SYSTEM: CUDA's own headers are not -pedantic clean; we only check ours.
    target_include_directories(${name} SYSTEM PRIVATE ${MIXCCL_CUDA_RUNTIME_INCLUDE_DIR})
  endif()
  target_compile_definitions(${name} PRIVATE ${C_DEFS})
  set_target_properties(${name} PROPERTIES C_STANDARD 99 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF
                                           CXX_STANDARD 11 CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF)
  target_compile_options(${name} PRIVATE -pedantic -Wall -Wextra -Werror)
  add_dependencies(abi_header_checks ${name})
endfunction()
mixccl_abi_header_check(abi_header_c99 C)
mixccl_abi_header_check(abi_header_cxx11 CXX)
if(MIXCCL_CUDA_RUNTIME_INCLUDE_DIR)
  mixccl_abi_header_check(abi_header_c99_cuda_first C DEFS MIXCCL_CHECK_CUDA_FIRST CUDA ON)
  mixccl_abi_header_check(abi_header_c99_cuda_after C DEFS MIXCCL_CHECK_CUDA_AFTER CUDA ON)
  mixccl_abi_header_check(abi_header_cxx11_cuda_first CXX DEFS MIXCCL_CHECK_CUDA_FIRST CUDA ON)
  mixccl_abi_header_check(abi_header_cxx11_cuda_after CXX DEFS MIXCCL_CHECK_CUDA_AFTER CUDA ON)
else()
  message(STATUS "mixccl abi tests: cuda_runtime.h not found; header checks run without it only")
endif()
# The objects are part of the normal build (a header regression breaks the build); the CTest entry
# re-runs them so the result shows up in test reports too.
add_test(NAME abi_c99 COMMAND ${CMAKE_COMMAND} --build ${CMAKE_BINARY_DIR} --target abi_header_checks)
set_tests_properties(abi_c99 PROPERTIES LABELS abi TIMEOUT 300)

# --- abi_exports ---------------------------------------------------------------------------------
add_executable(abi_exports_test ${abi_dir}/abi_exports_test.cc)
add_dependencies(abi_exports_test mixccl)
target_compile_definitions(abi_exports_test PRIVATE
  MIXCCL_LIB="$<TARGET_FILE:mixccl>"
  MIXCCL_NM="${CMAKE_NM}"
  MIXCCL_READELF="${CMAKE_READELF}"
  MIXCCL_EXPORTS_LIST="${abi_dir}/nccl_${MIXCCL_NCCL_ABI_VERSION}_exports.txt")
target_link_libraries(abi_exports_test PRIVATE GTest::gtest_main)
gtest_discover_tests(abi_exports_test DISCOVERY_MODE PRE_TEST PROPERTIES LABELS abi TIMEOUT 120)

# --- abi_device_api ------------------------------------------------------------------------------
add_executable(abi_device_api_test ${abi_dir}/abi_device_api_test.cc)
target_link_libraries(abi_device_api_test PRIVATE mixccl GTest::gtest_main ${CMAKE_DL_LIBS})
gtest_discover_tests(abi_device_api_test DISCOVERY_MODE PRE_TEST PROPERTIES LABELS abi TIMEOUT 120)
