// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// NCCL's device-list syntax, shared by NCCL_SOCKET_IFNAME (interfaces) and NCCL_IB_HCA (RDMA
// devices): "eth,ib" lists name prefixes, a leading "^" excludes what is listed, a leading "="
// (after any "^") makes the names exact, and with ports enabled "mlx5_0:1" names one port of a
// device. An empty spec means "no preference" (useDefault): the caller applies its own policy.
// So does a spec that names nothing ("^", "=", "^=", ","): NCCL ignores a one-character
// NCCL_SOCKET_IFNAME such as "^", and reading "^" as "exclude nothing" would admit loopback and
// container bridges first, which a script's "^$EXCLUDED" with an empty variable never meant.
// Pure and allocation-light; safe from any thread.

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace mixccl {

struct NameFilter {
  struct Entry {
    std::string name;
    int port = -1;  // -1: any port
  };
  bool useDefault = true;
  bool exclude = false;
  bool exact = false;
  std::vector<Entry> entries;

  // `withPorts`: "name:N" names port N (NCCL_IB_HCA). Without, ':' is part of the name.
  static NameFilter parse(const std::string& spec, bool withPorts) {
    NameFilter f;
    std::string s = spec;
    if (s.empty()) return f;
    f.useDefault = false;
    if (s[0] == '^') {
      f.exclude = true;
      s.erase(0, 1);
    }
    if (!s.empty() && s[0] == '=') {
      f.exact = true;
      s.erase(0, 1);
    }
    size_t pos = 0;
    while (pos <= s.size()) {
      size_t comma = s.find(',', pos);
      if (comma == std::string::npos) comma = s.size();
      if (comma > pos) {
        Entry e{s.substr(pos, comma - pos), -1};
        // As in NCCL, the port follows the first ':' and later ':' fields are ignored (newer NCCL
        // releases write "mlx5_0:1:<rail>:<plane>"; we have no use for those).
        const size_t colon = withPorts ? e.name.find(':') : std::string::npos;
        if (colon != std::string::npos) {
          char* end = nullptr;
          const long port = strtol(e.name.c_str() + colon + 1, &end, 10);
          // "dev:" or "dev:x" is not a port: keep the text whole, so it matches nothing real.
          if (end != e.name.c_str() + colon + 1 && (*end == '\0' || *end == ':') && port >= 0 && port < 65536) {
            e.port = static_cast<int>(port);
            e.name.erase(colon);
          }
        }
        // ":1" names no device: as an empty prefix it would select port 1 of every device
        // (or, after "^", exclude it from all of them). NCCL drops such an entry; so do we.
        if (!e.name.empty()) f.entries.push_back(std::move(e));
      }
      pos = comma + 1;
    }
    if (f.entries.empty()) return NameFilter{};
    return f;
  }

  bool listed(const char* name, int port = -1) const {
    for (const Entry& e : entries) {
      const bool nameMatches = exact ? e.name == name : strncmp(name, e.name.c_str(), e.name.size()) == 0;
      if (nameMatches && (e.port < 0 || port < 0 || e.port == port)) return true;
    }
    return false;
  }
  // Whether the device (and port) passes a non-default filter.
  bool accepts(const char* name, int port = -1) const { return exclude ? !listed(name, port) : listed(name, port); }
};

}  // namespace mixccl
