// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Whether the kernel knows any RDMA device (the RDMA transport's own first check): tests that
// need one skip without it (scripts/rdma-check.sh runs them in a soft-RoCE VM).

#include <dirent.h>

namespace mixccl::testing {

inline bool hasRdmaDevice() {
  DIR* d = opendir("/sys/class/infiniband");
  if (d == nullptr) return false;
  bool any = false;
  while (dirent* e = readdir(d)) any = any || e->d_name[0] != '.';
  closedir(d);
  return any;
}

}  // namespace mixccl::testing
