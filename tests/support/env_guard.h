// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Sets an environment variable for the lifetime of a scope and makes mixccl's cached knobs
// re-read it (both on entry and on exit).

#include <cstdlib>

#include "common/config.h"

namespace mixccl::testing {

class EnvGuard {
 public:
  EnvGuard(const char* name, const char* value) : name_(name) {
    setenv(name, value, 1);
    config::resetForTesting();
  }
  ~EnvGuard() {
    unsetenv(name_);
    config::resetForTesting();
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

 private:
  const char* name_;
};

}  // namespace mixccl::testing
