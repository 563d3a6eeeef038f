// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// ncclComm_t is a pointer to `struct ncclComm`, which the API layer defines as a thin handle
// around the core Communicator. Live handles are kept in a registry so a destroyed, aborted or
// garbage handle is reported as ncclInvalidArgument instead of being dereferenced.

#include <cstdint>
#include <memory>

#include "nccl.h"
#include "src/core/communicator.h"

struct ncclComm {
  std::unique_ptr<mixccl::Communicator> impl;
  // Unique in the process and never reused (registerComm counts up), unlike the handle's address:
  // what a registration records to know its communicator from a later one at the same address.
  uint64_t serial = 0;
};

namespace mixccl::api {

// Registers a new handle owning `comm`.
ncclComm* registerComm(std::unique_ptr<Communicator> comm);
// The communicator of a live handle; kInvalidArgument naming `fn` otherwise, kInvalidUsage in a
// process other than its creator's (a fork()ed child: the parent owns its sockets and shared
// memory). It stays pinned (Communicator::enterCall) until the calling API function returns
// (guard.h). Takes no caller slot: for entry points any thread may call (abort, async error,
// rank/count/device, revoke, hang report).
Result lookupComm(const char* fn, ncclComm_t handle, Communicator** out);
// As lookupComm, and takes the communicator's caller slot until the calling API function returns
// (Communicator::claimCaller): for calls that issue operations or change state. kInvalidUsage
// when another thread is inside such a call on it.
Result lookupCallerComm(const char* fn, ncclComm_t handle, Communicator** out);
// For destroy and abort: unregisters a live handle atomically, so later lookups fail and only one
// of several racing destroyers wins; the caller then waits for pinned calls and frees it. In a
// fork()ed child it is kInvalidUsage and the handle stays: freeing the copy would close the
// parent's rank page and shared lanes, and tell its peers it left. The child's copy of the memory
// goes when the child exits. `destroy`: refuse (kInvalidArgument, the handle stays) a
// communicator whose non-blocking init is still running, as NCCL's ncclCommEnsureReady does:
// destroy would wait for that init, until MIXCCL_TIMEOUT when a peer never comes. Abort takes it
// in any state (its flag stops the init). Checked under the registry lock, where no call can pin
// the communicator meanwhile: pinning it first to look would make waitForCalls wait for that pin.
Result takeComm(const char* fn, ncclComm_t handle, Communicator** out, bool destroy);
// Frees a handle taken with takeComm once no call uses it (Communicator::waitForCalls) with the
// buffer and window registrations the user did not deregister (dropRegistrations), and drops its
// reference to the communicator, which goes when no group holds one either (Communicator::hold:
// a group of another thread that queued work on it frees it at its end).
void freeComm(ncclComm* handle);
// Unregisters and frees a handle no other thread can know yet (its init failed inline).
void releaseComm(ncclComm* handle);
// As lookupCallerComm, and the communicator must be usable for operations: initialised (a
// non-blocking init is waited for), not finalized, not aborted or revoked, no earlier error.
Result lookupReadyComm(const char* fn, ncclComm_t handle, Communicator** out);

// Frees the registrations (ncclCommRegister, ncclCommWindowRegister) still held for `handle`,
// so that they do not outlive it; its handles then read as unknown (mem_api.cc).
void dropRegistrations(const ncclComm* handle) noexcept;

// Parses a user ncclConfig_t the way NCCL does: honour size, magic and version, never sizeof.
Result parseConfig(const char* fn, const ncclConfig_t* config, CommOptions* out);

}  // namespace mixccl::api
