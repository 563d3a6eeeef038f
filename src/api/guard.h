// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// The API shell's two tools (DESIGN.md section 3):
//  - MIXCCL_API(ret, name, params...) defines the exported pncclX and the ncclX alias of it, as
//    NCCL exports both names (profilers interpose on ncclX and call pncclX).
//  - apiGuard(name, body) runs one API body: nothing throws past it; an exception becomes
//    ncclSystemError (out of memory, thread creation) or ncclInternalError with a message for
//    ncclGetLastError. Like NCCL's, the last message stays until a later failure replaces it,
//    so it is read after the failing call returns.

#include <utility>

#include "common/no_throw.h"
#include "common/per_thread.h"
#include "common/result.h"
#include "nccl.h"

#define MIXCCL_API(ret, name, ...)                                                           \
  extern "C" __attribute__((visibility("default"))) ret p##name(__VA_ARGS__);                \
  extern "C" __attribute__((visibility("default"), alias("p" #name))) ret name(__VA_ARGS__); \
  extern "C" ret p##name(__VA_ARGS__)

namespace mixccl::api {

inline ncclResult_t toNccl(Result r) { return static_cast<ncclResult_t>(r); }

// Communicators an API call looked up stay pinned until its outermost apiGuard returns, so an
// abort or destroy on another thread waits for the call instead of freeing what it uses
// (handle.cc). Defined there.
void unpinCallComms() noexcept;
inline thread_local int tApiDepth MIXCCL_TLS_FAST = 0;

template <class Body>
ncclResult_t apiGuard(const char* name, Body&& body) noexcept {
  struct Depth {
    Depth() { ++tApiDepth; }
    ~Depth() {
      if (--tApiDepth == 0) unpinCallComms();
    }
  } depth;
  return toNccl(noThrow(name, std::forward<Body>(body)));
}

}  // namespace mixccl::api
