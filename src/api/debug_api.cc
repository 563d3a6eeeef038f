// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// mixcclCommHangReport (include/mixccl/debug.h): the API face of src/core/hang_report.h.

#include <cstring>
#include <string>

#include "mixccl/debug.h"
#include "src/api/guard.h"
#include "src/api/handle.h"
#include "src/core/communicator.h"

extern "C" __attribute__((visibility("default"))) ncclResult_t mixcclCommHangReport(ncclComm_t comm, char* buf,
                                                                                    size_t bufSize, size_t* needed) {
  using mixccl::Result;
  return mixccl::api::apiGuard("mixcclCommHangReport", [&]() -> Result {
    mixccl::Communicator* c = nullptr;
    MIXCCL_TRY(mixccl::api::lookupComm("mixcclCommHangReport", comm, &c));
    if (buf != nullptr && bufSize == 0) {
      return mixccl::fail(Result::kInvalidArgument, "mixcclCommHangReport: bufSize is 0 but buf is not NULL");
    }
    const mixccl::CommState state = c->state();
    if (state == mixccl::CommState::kInitializing || state == mixccl::CommState::kFailed) {
      return mixccl::fail(Result::kInvalidUsage,
                          "mixcclCommHangReport: rank %d's communicator never completed its initialisation; "
                          "ncclCommGetAsyncError says why",
                          c->rank());
    }
    if (buf == nullptr && needed == nullptr) {
      mixccl::hang::logReport(*c, "requested");
      return Result::kSuccess;
    }
    const std::string text = c->board().report(*c, "requested");
    if (needed != nullptr) *needed = text.size() + 1;
    if (buf == nullptr) return Result::kSuccess;  // a size query, as snprintf(NULL, 0, ...)
    const size_t n = std::min(text.size(), bufSize - 1);
    memcpy(buf, text.data(), n);
    buf[n] = '\0';
    return Result::kSuccess;
  });
}
