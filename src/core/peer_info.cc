// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "src/core/peer_info.h"

#include <unistd.h>

#include <cstring>
#include <fstream>

#include "common/config.h"
#include "common/wire.h"

namespace mixccl {

void PeerInfo::encode(uint8_t* out) const {
  WireWriter w(out, kWireBytes);
  w.u32(protocolVersion);
  w.u32(static_cast<uint32_t>(rank));
  w.u32(static_cast<uint32_t>(nranks));
  w.u32(static_cast<uint32_t>(pid));
  w.u64(hostHash);
  w.u32(backend);
  w.u32(0);  // reserved
  w.fixedString(host, kHostBytes);
  for (const auto& blob : blobs) {
    w.u32(static_cast<uint32_t>(blob.size()));
    w.bytes(blob.data(), blob.size(), Transport::kMaxBlobBytes);
  }
}

Result PeerInfo::decode(const uint8_t* in, PeerInfo* out) {
  WireReader r(in, kWireBytes);
  out->protocolVersion = r.u32();
  out->rank = static_cast<int32_t>(r.u32());
  out->nranks = static_cast<int32_t>(r.u32());
  out->pid = static_cast<int32_t>(r.u32());
  out->hostHash = r.u64();
  out->backend = r.u32();
  (void)r.u32();
  out->host = r.fixedString(kHostBytes);
  for (auto& blob : out->blobs) {
    uint32_t n = r.u32();
    if (n > Transport::kMaxBlobBytes) {
      return fail(Result::kRemoteError,
                  "peer info of rank %d carries a %u-byte transport blob (max %zu): corrupt or "
                  "incompatible peer",
                  out->rank, n, Transport::kMaxBlobBytes);
    }
    blob.assign(r.here(), r.here() + n);
    r.skip(Transport::kMaxBlobBytes);
  }
  return Result::kSuccess;
}

std::string localHostName() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return host;
}

uint64_t localHostHash() {
  std::string id = config::getString(config::Knob::kHostId);
  if (id.empty()) {
    std::ifstream boot("/proc/sys/kernel/random/boot_id");
    std::string bootId;
    std::getline(boot, bootId);
    id = localHostName() + "/" + bootId;
  }
  return fnv1a64(id.data(), id.size());
}

}  // namespace mixccl
