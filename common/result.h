// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// The one error idiom of mixccl (DESIGN.md section 3).
//
// Every internal function that can fail returns a Result (values mirror ncclResult_t so the API
// layer converts with a cast) and callers propagate it with MIXCCL_TRY. kInProgress is not an
// error: non-blocking calls return it until they are done. A failing site records a message with
// fail(), which is what ncclGetLastError() later shows, so the message must say what went wrong,
// on which rank/peer, and what to do about it.

#include <cstdarg>
#include <string>

namespace mixccl {

enum class [[nodiscard]] Result : int{
    kSuccess = 0,
    kUnhandledDeviceError = 1,  // ncclUnhandledCudaError: a device runtime call failed
    kSystemError = 2,           // a system call failed (socket, mmap, ...)
    kInternalError = 3,         // a bug in mixccl
    kInvalidArgument = 4,       // the caller passed a bad value
    kInvalidUsage = 5,          // the call is valid but not in this state / not supported
    kRemoteError = 6,           // a peer failed, vanished or timed out
    kInProgress = 7,            // not done yet; call again
};

inline bool ok(Result r) { return r == Result::kSuccess; }

// Records `code` with a printf-style message as this thread's last error, logs it at WARN and
// returns `code`, so a failing site reads `return fail(Result::kSystemError, "...", ...);`.
Result fail(Result code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
Result failV(Result code, const char* fmt, va_list ap);

// While one is alive on a thread, fail() there neither records nor logs at WARN (it logs at
// INFO): for advisory work whose failure is expected and harmless, such as a probe to a peer
// that already left (src/core/stream_checks.cc). Nests.
class QuietFailures {
 public:
  QuietFailures();
  ~QuietFailures();
  QuietFailures(const QuietFailures&) = delete;
  QuietFailures& operator=(const QuietFailures&) = delete;
};

// The last message fail() kept quiet on this thread (inside a QuietFailures scope).
const std::string& lastQuietError();
// The message of the last fail() on this thread, quiet or not: lastQuietError() inside a
// QuietFailures scope, lastError() outside. For code that keeps a failure's message for later
// callers and may itself run inside a caller's quiet scope.
const std::string& lastFailure();

// The last message recorded by fail() on this thread ("" when none).
const std::string& lastError();
// The same text (cut at 1023 bytes) at an address that stays valid for the thread's lifetime and
// always shows the current message: what ncclGetLastError hands out.
const char* lastErrorText();
void clearLastError();
// Makes `message` this thread's last error without logging it: for a failure that happened (and
// was logged) on another thread, so that the thread that learns of it can read why.
void setLastError(const std::string& message);

// Readable name of a result code, e.g. "remote process exited or there was a network error".
const char* resultString(Result r);

}  // namespace mixccl

// Propagates any result other than kSuccess (kInProgress included) to the caller.
#define MIXCCL_TRY(expr)                                    \
  do {                                                      \
    ::mixccl::Result mixccl_try_result_ = (expr);           \
    if (mixccl_try_result_ != ::mixccl::Result::kSuccess) { \
      return mixccl_try_result_;                            \
    }                                                       \
  } while (0)
