// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// The OpenCL extension entry points (include/mixccl/opencl.h): argument checks and the no-throw
// guard around the backend side in src/device/opencl. Built only with OpenCL support.

#if defined(MIXCCL_HAVE_OPENCL)

#include "common/result.h"
#include "mixccl/opencl.h"
#include "src/api/guard.h"
#include "src/device/opencl/opencl_backend.h"

using mixccl::api::apiGuard;

extern "C" __attribute__((visibility("default"))) ncclResult_t mixcclOpenclUseContext(cl_context context,
                                                                                      cl_device_id device) {
  return apiGuard("mixcclOpenclUseContext", [&] { return mixccl::openclUseContext(context, device); });
}

extern "C" __attribute__((visibility("default"))) ncclResult_t mixcclOpenclGetContext(cl_context* context,
                                                                                      cl_device_id* device) {
  return apiGuard("mixcclOpenclGetContext", [&] { return mixccl::openclGetContext(context, device); });
}

#endif  // MIXCCL_HAVE_OPENCL
