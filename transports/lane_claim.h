// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// What every transport checks before it trusts an incoming lane (TCP's hello, RDMA's connect
// data): that it comes from this communicator (hash and secret), is addressed to this rank, and
// names a source rank and lane that exist. Pure; the fuzz targets reach it through each
// transport's own check.

#include <cstdint>
#include <cstring>

#include "transports/transport.h"

namespace mixccl {

// nullptr when the claim may come from lane `lane` of rank `src`, else why not.
inline const char* checkLaneClaim(uint64_t commHash, const uint8_t secret[16], uint32_t src, uint32_t dst,
                                  uint32_t lane, const TransportContext& ctx) {
  if (commHash != ctx.commHash) return "different communicator (stale or foreign job)";
  if (memcmp(secret, ctx.secret, sizeof(ctx.secret)) != 0) return "wrong secret";
  if (dst != static_cast<uint32_t>(ctx.rank)) return "addressed to another rank";
  if (src >= static_cast<uint32_t>(ctx.nranks) || lane >= static_cast<uint32_t>(kNumLanes)) {
    return "source rank or lane out of range";
  }
  return nullptr;
}

}  // namespace mixccl
