// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Which pid namespace a pid lives in. Ranks on one host (same hostname and kernel boot, sharing
// /dev/shm) may still run in different pid namespaces: one container per device started with
// --ipc=host, Kubernetes pods with hostIPC. A pid that such a peer reports is its pid in its own
// namespace; here it names nothing, or some other process (its pid 1 is our init). So a pid is
// used for liveness (kill(pid, 0)) or to judge a leftover's owner only when it comes with the
// pid space of its writer and that space is ours.
//
// The pid space is FNV-1a 64 of "<kernel boot id>/<readlink /proc/self/ns/pid>", never 0; 0
// means "unknown" (no /proc), which every reader treats as "the same as mine", the behaviour of
// builds that did not publish it. It travels in the peer info (PROTOCOL.md, section 6.1) and in
// the shm transport's headers (transports/shm/).

#include <cstdint>

namespace mixccl {

// This process's pid space; computed once (a process never changes its pid namespace: unshare
// moves only its children). Thread-safe.
uint64_t localPidSpace();

// Whether pids written in pid space `a` may be used in space `b`: true unless both are known and
// differ.
inline bool samePidSpace(uint64_t a, uint64_t b) { return a == 0 || b == 0 || a == b; }

}  // namespace mixccl
