// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
//
// Fuzz target: the bootstrap root's handling of registrations (bootstrap_root.cc), through the
// pure check it uses (checkRegistration in bootstrap_wire.h) and a model of the root's slot
// table. The input is a sequence of 65-byte records: a control byte, then the 64 hello bytes
// exactly as a connection would deliver them. Control bits: 1 = put the job's commHash and
// secret in, 2 = make it a well-formed protocol-1 registration (magic, version, kind, IPv4
// family), 4 = first, the registered connection of rank (byte 1 % nranks) closes (the root then
// frees its slot, as pollOnce does).
//
// Invariants: a registration is accepted only if it proves the job's identity, is well formed,
// agrees with the nranks fixed by the first accepted one, names a rank in range and a free slot;
// every refusal of a sender that proved its identity carries a reason; no slot is taken twice
// and the count of registered ranks never exceeds nranks.

#include <cstdint>
#include <cstring>
#include <map>
#include <string>

#include "src/core/bootstrap_wire.h"
#include "tests/fuzz/fuzz_check.h"

using namespace mixccl;
using namespace mixccl::bootstrap;

namespace {

void putU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr size_t kRecord = 1 + Hello::kBytes;
  uint32_t nranks = 0;                    // the root's nranks_
  std::map<uint32_t, std::string> taken;  // the root's registered_ (rank -> from)
  for (size_t at = 0; at + kRecord <= size; at += kRecord) {
    const uint8_t control = data[at];
    uint8_t in[Hello::kBytes];
    memcpy(in, data + at + 1, sizeof(in));
    if ((control & 4) != 0 && nranks != 0) taken.erase(in[0] % nranks);
    if ((control & 1) != 0) {
      for (int i = 0; i < 8; ++i) in[8 + i] = static_cast<uint8_t>(fuzz::kCommHash >> (8 * i));
      memcpy(in + 16, fuzz::kSecret, 16);
    }
    if ((control & 2) != 0) {
      putU32(in, kHelloMagic);
      putU32(in + 4, kProtocolVersion);
      putU32(in + 32, static_cast<uint32_t>(HelloKind::kRegister));
      in[44] = 0;
      in[45] = 4;
    }
    bool addressOk = false;
    const Hello h = Hello::decode(in, &addressOk);
    const std::string from = "10.0.0." + std::to_string(at / kRecord) + ":1234";
    auto takenBy = [&](uint32_t rank) -> const char* {
      FUZZ_CHECK(nranks != 0 && rank < nranks);  // the root indexes registered_ with it
      auto it = taken.find(rank);
      return it == taken.end() ? nullptr : it->second.c_str();
    };
    const RegistrationCheck c =
        checkRegistration(h, addressOk, fuzz::kCommHash, fuzz::kSecret, nranks, takenBy, from.c_str());
    using V = RegistrationCheck::Verdict;
    const bool wellFormedHello = h.magic == kHelloMagic && h.version == kProtocolVersion;
    const bool ours = h.commHash == fuzz::kCommHash && sameSecret(h.secret, fuzz::kSecret);
    FUZZ_CHECK((c.verdict == V::kNotHello) == !wellFormedHello);
    FUZZ_CHECK(c.verdict != V::kForeignJob || (wellFormedHello && !ours));
    FUZZ_CHECK(c.verdict != V::kMalformed || (wellFormedHello && ours));
    FUZZ_CHECK((c.verdict == V::kReject) == (c.why[0] != '\0'));
    FUZZ_CHECK(strnlen(c.why, sizeof(c.why)) < sizeof(c.why));
    if (c.verdict == V::kReject) FUZZ_CHECK(wellFormedHello && ours && h.kind == HelloKind::kRegister && addressOk);
    if (c.verdict != V::kAccept) continue;
    FUZZ_CHECK(wellFormedHello && ours && h.kind == HelloKind::kRegister && addressOk);
    FUZZ_CHECK(h.nranks >= 1 && h.nranks <= kMaxRanks && h.rank < h.nranks);
    FUZZ_CHECK(nranks == 0 || h.nranks == nranks);
    FUZZ_CHECK(taken.count(h.rank) == 0);
    SocketAddress copy;
    uint8_t wire[SocketAddress::kWireBytes];
    h.address.encode(wire);
    FUZZ_CHECK(SocketAddress::decode(wire, &copy) == Result::kSuccess);
    if (nranks == 0) nranks = h.nranks;
    taken[h.rank] = from;
    FUZZ_CHECK(taken.size() <= nranks);
    if (taken.size() == nranks) break;  // the root sends the table and stops listening
  }
  return 0;
}
