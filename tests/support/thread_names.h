// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// The names of this process's threads (/proc/self/task/*/comm), for tests that check which
// library threads run (mixccl-root, mixccl-prog ...) or that none is left behind.

#include <dirent.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace mixccl::testing {

inline std::vector<std::string> threadNames() {
  std::vector<std::string> names;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      std::FILE* f = std::fopen(("/proc/self/task/" + std::string(e->d_name) + "/comm").c_str(), "r");
      if (f == nullptr) continue;  // the thread ended meanwhile
      char buf[32] = {};
      if (std::fgets(buf, sizeof(buf), f) != nullptr) names.emplace_back(buf, strcspn(buf, "\n"));
      std::fclose(f);
    }
    closedir(d);
  }
  return names;
}

}  // namespace mixccl::testing
