// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Whether the kernel knows any RDMA device: a directory read, so a machine without one never maps
// the verbs libraries. The transport's first check; tests that need a device skip on it too
// (scripts/rdma-check.sh runs them in a soft-RoCE VM). Needs no verbs headers.

#include <dirent.h>

namespace mixccl {

inline bool anyRdmaDevice() {
  DIR* d = opendir("/sys/class/infiniband");
  if (d == nullptr) return false;
  bool any = false;
  while (dirent* e = readdir(d)) any = any || e->d_name[0] != '.';
  closedir(d);
  return any;
}

}  // namespace mixccl
