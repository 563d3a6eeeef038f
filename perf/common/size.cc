// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "perf/common/size.h"

#include <cctype>
#include <limits>

namespace mixccl::perf {

std::optional<size_t> parseSize(const std::string& text) {
  size_t pos = 0;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) ++pos;
  if (pos == 0 || pos > 15) return std::nullopt;  // at most 15 digits: stoull cannot throw
  const size_t value = std::stoull(text.substr(0, pos));
  std::string suffix = text.substr(pos);
  if (!suffix.empty() && (suffix.back() == 'B' || suffix.back() == 'b')) suffix.pop_back();
  if (suffix.empty()) return value;
  if (suffix.size() != 1) return std::nullopt;
  int shift = 0;
  switch (std::toupper(static_cast<unsigned char>(suffix[0]))) {
    case 'K':
      shift = 10;
      break;
    case 'M':
      shift = 20;
      break;
    case 'G':
      shift = 30;
      break;
    default:
      return std::nullopt;
  }
  // "99999999999G" does not fit in 64 bits: no size, rather than what the shift wraps to.
  if (value > (std::numeric_limits<size_t>::max() >> shift)) return std::nullopt;
  return value << shift;
}

}  // namespace mixccl::perf
