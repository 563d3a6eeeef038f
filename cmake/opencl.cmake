# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The mixccl authors
# OpenCL for the OpenCL device backend (src/device/opencl), found here at the top so that
# OpenCL::OpenCL is visible to every directory that links the backend (imported targets are
# directory-scoped). Debian: ocl-icd-opencl-dev opencl-headers; a platform to run on:
# pocl-opencl-icd. Without them the build goes on and the backend is absent (its folder returns
# before registering itself; MIXCCL_HAVE_OPENCL stays undefined).
find_package(OpenCL 2.0 QUIET)
if(OpenCL_FOUND)
  message(STATUS "mixccl: OpenCL backend enabled (OpenCL ${OpenCL_VERSION_STRING}, ${OpenCL_LIBRARIES})")
else()
  message(STATUS "mixccl: OpenCL (2.0+ headers and libOpenCL) not found; the OpenCL backend is not built")
endif()
