// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// NCCL_NET and NCCL_IB_DISABLE, read in one place for the network transports (TCP and RDMA), so
// both agree on what a value means and a wrong value fails whichever transport reads it first.

#include <strings.h>

#include <string>

#include "common/config.h"
#include "common/result.h"

namespace mixccl {

struct NetChoice {
  bool wantIb = true;    // RDMA may be used (NCCL_IB_DISABLE unset, NCCL_NET not Socket)
  bool forceIb = false;  // NCCL_NET=IB: RDMA only between hosts; a rank without a device fails init
};

// NCCL_NET: "" (RDMA where both ranks can, else TCP), "IB" or "Socket", case-insensitive as in NCCL.
inline Result netChoice(NetChoice* out) {
  const std::string& net = config::getString(config::Knob::kNet);
  *out = NetChoice{};
  out->wantIb = !config::getBool(config::Knob::kIbDisable);
  if (net.empty()) return Result::kSuccess;
  if (strcasecmp(net.c_str(), "IB") == 0) {
    // NCCL's IB plugin does not start under NCCL_IB_DISABLE=1, so NCCL_NET=IB finds no network and
    // init fails; carrying the job over TCP instead would hide the contradiction.
    if (!out->wantIb) {
      return fail(Result::kInvalidUsage,
                  "NCCL_NET=%s asks for RDMA between hosts, but NCCL_IB_DISABLE=1 turns RDMA off: unset one of them",
                  net.c_str());
    }
    out->forceIb = true;
    return Result::kSuccess;
  }
  if (strcasecmp(net.c_str(), "Socket") == 0) {
    out->wantIb = false;
    return Result::kSuccess;
  }
  // kInvalidUsage, as NCCL's init when no network of that name starts ("Failed to initialize any
  // NET plugin").
  return fail(Result::kInvalidUsage, "NCCL_NET=%s is not a network this build has: choose IB or Socket", net.c_str());
}

}  // namespace mixccl
