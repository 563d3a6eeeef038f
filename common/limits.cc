// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "common/limits.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "common/log.h"

namespace mixccl {
namespace {

std::string limitText(rlim_t v) { return v == RLIM_INFINITY ? "unlimited" : std::to_string(v); }

}  // namespace

void raiseFileLimit() {
  static std::once_flag once;
  std::call_once(once, [] {
    rlimit lim{};
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0) {
      MIXCCL_INFO(log::kInit, "getrlimit(RLIMIT_NOFILE) failed: %s; open-file limit left as it is", strerror(errno));
      return;
    }
    if (lim.rlim_cur == lim.rlim_max) {
      MIXCCL_INFO(log::kInit, "open-file limit (RLIMIT_NOFILE) %s is already the hard limit",
                  limitText(lim.rlim_cur).c_str());
      return;
    }
    const rlim_t old = lim.rlim_cur;
    lim.rlim_cur = lim.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &lim) != 0) {
      // An unlimited hard limit is refused for open files (the kernel caps them at fs.nr_open).
      MIXCCL_INFO(log::kInit, "cannot raise the open-file limit (RLIMIT_NOFILE) from %s to %s: %s; left as it is",
                  limitText(old).c_str(), limitText(lim.rlim_max).c_str(), strerror(errno));
      return;
    }
    MIXCCL_INFO(log::kInit, "open-file limit (RLIMIT_NOFILE) raised: %s -> %s (the hard limit)", limitText(old).c_str(),
                limitText(lim.rlim_max).c_str());
  });
}

std::string fileLimitText() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return "unknown";
  return limitText(lim.rlim_cur) + "/" + limitText(lim.rlim_max);
}

}  // namespace mixccl
