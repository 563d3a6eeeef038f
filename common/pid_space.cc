// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "common/pid_space.h"

#include <unistd.h>

#include <fstream>
#include <string>

#include "common/wire.h"

namespace mixccl {
namespace {

uint64_t computePidSpace() {
  std::string id;
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::getline(boot, id);
  char ns[128] = {};
  const ssize_t n = readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1);  // "pid:[4026531836]"
  if (id.empty() || n <= 0) return 0;
  id += "/";
  id.append(ns, static_cast<size_t>(n));
  const uint64_t h = fnv1a64(id.data(), id.size());
  return h == 0 ? 1 : h;
}

}  // namespace

uint64_t localPidSpace() {
  static const uint64_t space = computePidSpace();
  return space;
}

}  // namespace mixccl
