// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Size arguments of the perf tools and perf/simulate, read as nccl-tests reads them. No library
// dependency, so the simulator (which links the internal layers, not libmixccl) shares it.

#include <cstddef>
#include <optional>
#include <string>

namespace mixccl::perf {

// "64K" -> 65536: an integer with an optional K, M or G suffix (powers of 1024) and an optional
// trailing B. nullopt for anything else, including numbers of more than 15 digits and sizes
// beyond 64 bits.
std::optional<size_t> parseSize(const std::string& text);

}  // namespace mixccl::perf
