// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Per-run names and the reclaiming of names that crashed jobs left in /dev/shm.
//
// Names: every rank draws a random nonce per transport (per communicator and run) and puts it in
// the names of what it creates (its rank page, the lane segments it receives on), so a job that
// restarts with the same NCCL_COMM_ID (hence the same commHash) never meets its predecessor's
// names. Peers learn the nonce from the rank's shm blob (PROTOCOL.md, section 5.1).
//
// Reclaiming: a rank killed at the wrong moment (between creating a name and its peer mapping
// it) leaves the name behind; nothing of that job will ever remove it. Every shm transport sweeps
// /dev/shm at init and removes a "mixccl-*" object only when all of these hold:
//  - its header validates: a rank page or lane header of this build's layout (magic, version),
//    so a file still being created (size 0, magic not yet stored) or someone else's is left;
//  - it was last changed at least kShmStaleMinAge ago (a header that is still being written);
//  - its header names the pid namespace of this process on this boot (localPidSpace(),
//    common/pid_space.h; where that is unknown, nothing is judged stale), so the pids in it mean
//    here what they meant to their writer (containers sharing /dev/shm have their own pid spaces);
//  - every owner pid in it is gone: kill(pid, 0) fails with ESRCH or the process is a zombie
//    (PeerWatch::peerAlive). A reused pid reads as alive and keeps the file: the safe side.
// The names carry random nonces, so nothing can re-create a removed name between the check and
// the unlink.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace mixccl {

constexpr std::chrono::seconds kShmStaleMinAge{3};

// The shm blob (Transport::listen): u8 version, then the rank's nonce as u64 little-endian. Empty
// when shm is disabled on that rank.
constexpr uint8_t kShmBlobVersion = 1;
constexpr size_t kShmBlobBytes = 9;

inline std::vector<uint8_t> encodeShmBlob(uint64_t nonce) {
  std::vector<uint8_t> b(kShmBlobBytes);
  b[0] = kShmBlobVersion;
  for (int i = 0; i < 8; ++i) b[1 + i] = static_cast<uint8_t>(nonce >> (8 * i));
  return b;
}

// The nonce of a blob of this version; false for any other blob.
inline bool decodeShmBlob(const std::vector<uint8_t>& b, uint64_t* nonce) {
  if (b.size() != kShmBlobBytes || b[0] != kShmBlobVersion) return false;
  *nonce = 0;
  for (int i = 0; i < 8; ++i) *nonce |= static_cast<uint64_t>(b[1 + i]) << (8 * i);
  return true;
}

// A random non-zero nonce (getrandom).
uint64_t shmNonce();

// Removes the shm object `name` ("/mixccl-...") if it is stale (see above). True if removed.
// `judgeAge` false skips the age rule: for a caller that knows the object is of its own
// communicator, whose set-up is over (a validated header is complete: its magic is stored last).
bool reclaimStaleShm(const std::string& name, bool judgeAge = true);

// Applies reclaimStaleShm to every mixccl object in /dev/shm; returns how many it removed.
int sweepStaleShm();

// The same for the objects of one communicator ("/mixccl-<commHash>-..."), without the age rule.
// For a transport whose set-up never finished: a rank killed after it created its rank page and
// before the peer exchange delivered its nonce leaves a name that no survivor can spell, and the
// next job's sweep may be far away (or never come). Its header still names its dead owner.
int reclaimCommShm(uint64_t commHash);

}  // namespace mixccl
