// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "common/result.h"

#include <cstdio>

#include "common/log.h"
#include "common/per_thread.h"

namespace mixccl {
namespace {
thread_local std::string tLastError;
// tLastError's text in storage that never moves, for ncclGetLastError: a caller may keep that
// pointer across later calls (as NCCL's static buffer allows), and std::string frees its old
// buffer when a longer message replaces a shorter one. Kept equal to tLastError, truncated.
thread_local char tLastErrorText[1024];
thread_local int tQuiet MIXCCL_TLS_FAST = 0;
thread_local std::string tQuietError;
}  // namespace

QuietFailures::QuietFailures() { ++tQuiet; }
QuietFailures::~QuietFailures() { --tQuiet; }

Result failV(Result code, const char* fmt, va_list ap) {
  char buf[1024];
  vsnprintf(buf, sizeof(buf), fmt, ap);
  if (tQuiet > 0) {
    tQuietError = buf;
    MIXCCL_INFO(log::kColl, "(ignored) %s", buf);
    return code;
  }
  tLastError = buf;
  snprintf(tLastErrorText, sizeof(tLastErrorText), "%s", buf);
  MIXCCL_WARN("%s", buf);
  return code;
}

Result fail(Result code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  Result r = failV(code, fmt, ap);
  va_end(ap);
  return r;
}

const std::string& lastError() { return tLastError; }
const char* lastErrorText() { return tLastErrorText; }
const std::string& lastQuietError() { return tQuietError; }

const std::string& lastFailure() { return tQuiet > 0 ? tQuietError : tLastError; }
void clearLastError() {
  tLastError.clear();
  tLastErrorText[0] = '\0';
}
void setLastError(const std::string& message) {
  tLastError = message;
  snprintf(tLastErrorText, sizeof(tLastErrorText), "%s", message.c_str());
}

const char* resultString(Result r) {
  switch (r) {
    case Result::kSuccess:
      return "no error";
    case Result::kUnhandledDeviceError:
      return "unhandled device runtime error";
    case Result::kSystemError:
      return "unhandled system error (a system call failed)";
    case Result::kInternalError:
      return "internal error - please report this issue to the mixccl developers";
    case Result::kInvalidArgument:
      return "invalid argument";
    case Result::kInvalidUsage:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case Result::kRemoteError:
      return "remote process exited or there was a network error";
    case Result::kInProgress:
      return "operation in progress";
  }
  return "unknown result code";
}

}  // namespace mixccl
