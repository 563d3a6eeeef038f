# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
# The OpenCL device backend (src/device/opencl) is built when OpenCL headers and an ICD loader are
# found (Debian: ocl-icd-opencl-dev opencl-headers; a platform to run on: pocl-opencl-icd). Without
# them the build goes on and the backend is simply absent: MIXCCL_HAVE_OPENCL stays undefined.
# Included after mixccl_core exists: core links the backend PUBLIC, so MIXCCL_HAVE_OPENCL=1 reaches
# every dependent (src/api/opencl_api.cc, the tests).
find_package(OpenCL 2.0 QUIET)
if(OpenCL_FOUND)
  add_subdirectory(${PROJECT_SOURCE_DIR}/src/device/opencl ${PROJECT_BINARY_DIR}/src/device/opencl)
  target_link_libraries(mixccl_core PUBLIC mixccl_device_opencl)
  message(STATUS "mixccl: OpenCL backend enabled (OpenCL ${OpenCL_VERSION_STRING}, ${OpenCL_LIBRARIES})")
else()
  message(STATUS "mixccl: OpenCL (2.0+ headers and libOpenCL) not found; the OpenCL backend is not built")
endif()
