// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// The arithmetic check of mixed communicators (PROTOCOL.md, "Arithmetic"). Results must be bitwise
// identical on every rank whatever mix of backends reduces them, so before any data moves each
// rank runs its backend's reduce() over one fixed input per data type (the same on every rank and
// every build), for every operator and transform, and publishes a fingerprint per data type in its
// peer info. Ranks whose fingerprints differ for a type they both support would disagree on results;
// init fails and names them.
//
// The fingerprint hashes the output bits, except that every NaN counts as the same value: the NaN
// payload (and sign) is the one thing vendors' hardware does not agree on, and a NaN result stays
// a NaN everywhere.
//
// Threading: runs on the init thread; uses the backend synchronously (queue == nullptr).

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/types.h"
#include "src/device/device_backend.h"

namespace mixccl {

// One 32-bit fingerprint per data type; 0 for a type the backend does not announce in caps().
using ArithPrint = std::array<uint32_t, kNumDataTypes>;

// Runs the fixed reductions on `backend` (in its device memory, as collectives do) and fills *out.
Result arithmeticPrint(DeviceBackend& backend, ArithPrint* out);

// What one rank announced: its backend name, the types it reduces and its fingerprints.
struct ArithFacts {
  std::string backend;
  uint32_t dtypes = 0;
  ArithPrint print{};
};

// kSuccess when every pair of ranks agrees on every type both support; kInvalidUsage otherwise,
// with a message naming the first disagreeing ranks, their backends and the data types.
Result compareArithmetic(const std::vector<ArithFacts>& ranks, int self);

}  // namespace mixccl
