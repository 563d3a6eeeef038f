// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// Communicator life cycle: unique ids, init (blocking, non-blocking, grouped), split, shrink,
// finalize, destroy, abort, revoke.

#include <pthread.h>

#include <climits>
#include <cstring>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "common/log.h"
#include "src/api/guard.h"
#include "src/api/handle.h"
#include "src/core/bootstrap.h"
#include "src/core/comm_split.h"
#include "src/core/engine.h"
#include "src/core/finalize.h"
#include "src/core/group.h"

using mixccl::CommOptions;
using mixccl::Communicator;
using mixccl::fail;
using mixccl::Result;
using mixccl::UniqueIdData;
using mixccl::api::apiGuard;

namespace {

Result checkOut(const char* fn, const void* p, const char* what) {
  if (p == nullptr) return fail(Result::kInvalidArgument, "%s: %s is NULL", fn, what);
  return Result::kSuccess;
}

Result checkRanks(const char* fn, int nranks, int rank) {
  if (nranks < 1) return fail(Result::kInvalidArgument, "%s: nranks is %d; it must be at least 1", fn, nranks);
  if (rank < 0 || rank >= nranks) {
    return fail(Result::kInvalidArgument, "%s: rank %d is out of range [0, %d)", fn, rank, nranks);
  }
  return Result::kSuccess;
}

// apiGuard for the calls that may sit in a group (split, shrink, finalize): an error of one is
// also ncclGroupEnd's (as NCCL's ncclGroupErrCheck makes it); ncclInProgress (a non-blocking call
// under way) is no error, as NCCL's check skips it too.
template <class Body>
ncclResult_t groupedApiGuard(const char* name, Body&& body) noexcept {
  return apiGuard(name, [&]() -> Result {
    const Result r = body();
    return r == Result::kSuccess || r == Result::kInProgress ? r : mixccl::group::noteError(r);
  });
}

// What ncclCommDestroy and ncclCommAbort do once they took the handle: wait for the calls still
// inside `c`, end its queue (queued and running work fails at once after an abort, and every
// stream gate is released; after the pinned calls, which may still be creating the engine) and
// free it. `forgetGroup`: drop what this thread's open group holds of it (not when the group that
// deferred a destroy has ended, or at a thread's exit, where there is no group state to look at).
void endComm(ncclComm_t handle, Communicator* c, bool forgetGroup) {
  c->close();
  if (forgetGroup) mixccl::group::forget(c);
  if (!c->waitForCalls()) return;  // leaked, with a WARN: a call still uses it
  // The queue runs out here, not when the last reference goes: a group of another thread that
  // queued work on it may hold one until its ncclGroupEnd (which then fails).
  c->stopEngine();
  mixccl::api::freeComm(handle);
}

// The parent of ncclCommSplit and ncclCommShrink: initialised and not aborted. A revoked one is
// fine (nccl.h: a revoked communicator can then be destroyed, split or shrunk): its bootstrap
// still connects the ranks, and revoking only failed its queued work.
Result lookupParent(const char* fn, ncclComm_t handle, Communicator** out) {
  MIXCCL_TRY(mixccl::api::lookupCallerComm(fn, handle, out));
  Communicator* c = *out;
  // Before the join: a non-blocking finalize's thread waits for the other ranks' finalize.
  if (c->finalizeCalled()) {
    return fail(Result::kInvalidUsage, "%s: the parent communicator (rank %d) was finalized", fn, c->rank());
  }
  if (c->initThread().joinable()) c->initThread().join();  // a non-blocking init may still run
  if (c->state() != mixccl::CommState::kReady || c->aborted()) {
    return fail(Result::kInvalidUsage, "%s: the parent communicator (rank %d) is not initialised, finalized or aborted",
                fn, c->rank());
  }
  // An earlier error leaves the ranks out of step (NCCL's ncclCommEnsureReady refuses it too); a
  // revoke's failed work does not count: revoking is how a communicator is made ready to split.
  const Result async = c->asyncError();
  if (!c->revoked() && async != Result::kSuccess) {
    return fail(async == Result::kInProgress ? Result::kInvalidArgument : async,
                "%s: the parent communicator (rank %d) has %s (%s); abort it and create a new one", fn, c->rank(),
                async == Result::kInProgress ? "work in progress" : "an earlier error", mixccl::resultString(async));
  }
  return Result::kSuccess;
}

// Creates the handle and runs init: inline when blocking outside a group, otherwise in a thread
// (non-blocking comms are polled with ncclCommGetAsyncError; grouped inits are joined by
// ncclGroupEnd). Grouped blocking inits must not run inline: one thread may init several ranks.
Result startInit(const char* fn, std::unique_ptr<Communicator> comm, const UniqueIdData& id,
                 std::vector<UniqueIdData> spareRoots, ncclComm_t* out) {
  const bool blocking = comm->options().blocking;
  const bool grouped = mixccl::group::active();
  Communicator* c = comm.get();
  ncclComm* handle = mixccl::api::registerComm(std::move(comm));
  if (blocking && !grouped) {
    Result r = c->init(id, spareRoots);
    if (r != Result::kSuccess) {
      mixccl::api::releaseComm(handle);
      *out = nullptr;
      return fail(r, "%s: %s", fn, mixccl::lastError().c_str());
    }
    *out = handle;
    return Result::kSuccess;
  }
  try {
    c->initThread() = std::thread([c, id, spareRoots = std::move(spareRoots)] {
      pthread_setname_np(pthread_self(), "mixccl-init");  // docs/DEBUGGING.md lists the threads
      (void)c->init(id, spareRoots);
    });
  } catch (const std::system_error& e) {
    // Out of threads: no handle may stay behind in the initialising state, which nothing ends.
    mixccl::api::releaseComm(handle);
    *out = nullptr;
    return fail(Result::kSystemError,
                "%s: cannot start the init thread: %s; free threads (ulimit -u, the container's "
                "pids limit)",
                fn, e.what());
  }
  *out = handle;
  if (grouped) mixccl::group::addPendingInit(c);
  return blocking ? Result::kSuccess : Result::kInProgress;
}

// `spareIds`, `nSpare`: ids besides commId whose roots this communicator does not use (see
// ncclCommInitRankScalable).
Result initRank(const char* fn, ncclComm_t* comm, int nranks, const ncclUniqueId& commId, int rank,
                const ncclConfig_t* config, const ncclUniqueId* spareIds = nullptr, int nSpare = 0) {
  MIXCCL_TRY(checkOut(fn, comm, "comm (output pointer)"));
  *comm = nullptr;
  MIXCCL_TRY(checkRanks(fn, nranks, rank));
  CommOptions options;
  MIXCCL_TRY(mixccl::api::parseConfig(fn, config, &options));
  UniqueIdData id;
  Result decoded = UniqueIdData::decode(reinterpret_cast<const uint8_t*>(commId.internal), &id);
  if (decoded != Result::kSuccess) return fail(decoded, "%s: %s", fn, mixccl::lastError().c_str());
  std::vector<UniqueIdData> spareRoots(static_cast<size_t>(nSpare));
  for (int i = 0; i < nSpare; ++i) {
    decoded = UniqueIdData::decode(reinterpret_cast<const uint8_t*>(spareIds[i].internal), &spareRoots[i]);
    if (decoded != Result::kSuccess) {
      return fail(decoded, "%s: commIds[%d]: %s", fn, i + 1, mixccl::lastError().c_str());
    }
  }
  return startInit(fn, Communicator::makeUninitialised(nranks, rank, options), id, std::move(spareRoots), comm);
}

}  // namespace

MIXCCL_API(ncclResult_t, ncclGetVersion, int* version) {
  return apiGuard("ncclGetVersion", [&]() -> Result {
    MIXCCL_TRY(checkOut("ncclGetVersion", version, "version"));
    *version = NCCL_VERSION_CODE;
    return Result::kSuccess;
  });
}

MIXCCL_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId* uniqueId) {
  return apiGuard("ncclGetUniqueId", [&]() -> Result {
    MIXCCL_TRY(checkOut("ncclGetUniqueId", uniqueId, "uniqueId"));
    UniqueIdData id;
    MIXCCL_TRY(mixccl::createUniqueId(&id));
    memset(uniqueId, 0, sizeof(*uniqueId));
    id.encode(reinterpret_cast<uint8_t*>(uniqueId->internal));
    return Result::kSuccess;
  });
}

MIXCCL_API(ncclResult_t, ncclCommInitRank, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return apiGuard("ncclCommInitRank",
                  [&] { return initRank("ncclCommInitRank", comm, nranks, commId, rank, nullptr); });
}

MIXCCL_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
           ncclConfig_t* config) {
  return apiGuard("ncclCommInitRankConfig",
                  [&] { return initRank("ncclCommInitRankConfig", comm, nranks, commId, rank, config); });
}

MIXCCL_API(ncclResult_t, ncclCommInitRankScalable, ncclComm_t* newcomm, int nranks, int myrank, int nId,
           ncclUniqueId* commIds, ncclConfig_t* config) {
  return apiGuard("ncclCommInitRankScalable", [&]() -> Result {
    const char* fn = "ncclCommInitRankScalable";
    MIXCCL_TRY(checkOut(fn, commIds, "commIds"));
    if (nId < 1 || nId > nranks) {
      return fail(Result::kInvalidArgument, "%s: nId is %d; it must be in [1, nranks=%d]", fn, nId, nranks);
    }
    // Every rank registers with the first id's root; the other roots (if any) are not needed
    // at mixccl's scale, and rank 0 stops them once it joined (PROTOCOL.md 4.2), so they hold no
    // thread and port until MIXCCL_TIMEOUT.
    return initRank(fn, newcomm, nranks, commIds[0], myrank, config, commIds + 1, nId - 1);
  });
}

MIXCCL_API(ncclResult_t, ncclCommInitAll, ncclComm_t* comms, int ndev, const int* devlist) {
  return apiGuard("ncclCommInitAll", [&]() -> Result {
    const char* fn = "ncclCommInitAll";
    MIXCCL_TRY(checkOut(fn, comms, "comms"));
    if (ndev < 0) return fail(Result::kInvalidArgument, "%s: ndev is %d; it must not be negative", fn, ndev);
    if (ndev == 0) return Result::kSuccess;  // as in NCCL: no ranks, nothing created, comms untouched
    // Device numbers only label the ranks of a host-memory communicator, but a negative one, or
    // one named twice, is refused as NCCL refuses it (invalid argument, invalid usage), before any
    // rank starts: a program that works here must not fail under NCCL.
    for (int r = 0; devlist != nullptr && r < ndev; ++r) {
      if (devlist[r] < 0)
        return fail(Result::kInvalidArgument, "%s: devlist[%d] is %d, not a device", fn, r, devlist[r]);
      for (int i = 0; i < r; ++i) {
        if (devlist[i] == devlist[r]) {
          return fail(Result::kInvalidUsage,
                      "%s: devlist[%d] and devlist[%d] are both device %d; each rank needs a device of its own", fn, i,
                      r, devlist[r]);
        }
      }
    }
    UniqueIdData id;
    MIXCCL_TRY(mixccl::createUniqueId(&id, /*honourCommIdEnv=*/false));
    std::vector<std::unique_ptr<Communicator>> made(ndev);
    for (int r = 0; r < ndev; ++r) made[r] = Communicator::makeUninitialised(ndev, r, CommOptions{});
    std::vector<Result> results(ndev, Result::kSuccess);
    std::vector<std::string> messages(ndev);  // each rank's thread has its own last error
    std::vector<std::thread> threads;
    threads.reserve(ndev);
    // A thread limit (a container's pids.max) may refuse a rank its thread: the ranks already
    // started would wait for it until MIXCCL_TIMEOUT, and leaving their threads joinable would
    // end the process (std::terminate). They are aborted and joined, and the call fails.
    std::string refused;
    for (int r = 0; r < ndev && refused.empty(); ++r) {
      try {
        threads.emplace_back([&, r] {
          results[r] = made[r]->init(id);
          if (results[r] != Result::kSuccess) messages[r] = mixccl::lastError();
        });
      } catch (const std::system_error& e) {
        refused = "cannot start the thread of rank " + std::to_string(r) + ": " + e.what();
        for (int i = 0; i < r; ++i) made[i]->abort();
      }
    }
    for (auto& t : threads) t.join();
    if (!refused.empty()) {
      // The ranks that never started never register: the id's root, waiting for them until
      // MIXCCL_TIMEOUT with its thread and port, goes now.
      mixccl::cancelRoot(id, "ncclCommInitAll: " + refused);
      for (int i = 0; i < ndev; ++i) comms[i] = nullptr;
      return fail(Result::kSystemError,
                  "%s: %s; free threads (ulimit -u, the container's pids limit) or use fewer "
                  "ranks",
                  fn, refused.c_str());
    }
    for (int r = 0; r < ndev; ++r) {
      if (results[r] != Result::kSuccess) {
        mixccl::cancelRoot(id, "ncclCommInitAll: rank " + std::to_string(r) + " failed to initialise");  // as above
        for (int i = 0; i < ndev; ++i) comms[i] = nullptr;
        return fail(results[r], "%s: rank %d of %d failed to initialise: %s", fn, r, ndev, messages[r].c_str());
      }
    }
    for (int r = 0; r < ndev; ++r) {
      made[r]->setDevice(devlist != nullptr ? devlist[r] : r);
      comms[r] = mixccl::api::registerComm(std::move(made[r]));
    }
    return Result::kSuccess;
  });
}

MIXCCL_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
           ncclConfig_t* config) {
  return groupedApiGuard("ncclCommSplit", [&]() -> Result {
    const char* fn = "ncclCommSplit";
    MIXCCL_TRY(checkOut(fn, newcomm, "newcomm"));
    *newcomm = nullptr;
    Communicator* parent = nullptr;
    MIXCCL_TRY(lookupParent(fn, comm, &parent));
    if (color < 0 && color != NCCL_SPLIT_NOCOLOR) {
      return fail(Result::kInvalidArgument, "%s: color %d is negative (use NCCL_SPLIT_NOCOLOR to opt out)", fn, color);
    }
    CommOptions options = parent->options();
    if (config != nullptr) MIXCCL_TRY(mixccl::api::parseConfig(fn, config, &options));
    auto run = [parent, color, key, options, newcomm]() -> Result {
      std::unique_ptr<Communicator> child;
      MIXCCL_TRY(mixccl::splitCommunicator(parent, color, key, options, &child));
      if (child) *newcomm = mixccl::api::registerComm(std::move(child));
      return Result::kSuccess;
    };
    // In a group one thread may split several ranks: each split waits for the others, so they
    // run in threads and ncclGroupEnd completes them (*newcomm is written by then).
    if (mixccl::group::active()) {
      mixccl::group::addTask(parent, run, /*afterOps=*/false);
      return Result::kSuccess;
    }
    return run();
  });
}

MIXCCL_API(ncclResult_t, ncclCommShrink, ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
           ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  return groupedApiGuard("ncclCommShrink", [&]() -> Result {
    const char* fn = "ncclCommShrink";
    MIXCCL_TRY(checkOut(fn, newcomm, "newcomm"));
    *newcomm = nullptr;
    Communicator* parent = nullptr;
    MIXCCL_TRY(lookupParent(fn, comm, &parent));
    if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT) {
      return fail(Result::kInvalidArgument, "%s: unknown shrinkFlags 0x%x", fn, shrinkFlags);
    }
    if (excludeRanksList == nullptr) return fail(Result::kInvalidArgument, "%s: excludeRanksList is NULL", fn);
    // As in NCCL, at least one rank is excluded; excluding all would leave no communicator.
    if (excludeRanksCount <= 0 || excludeRanksCount >= parent->nranks()) {
      return fail(Result::kInvalidArgument,
                  "%s: excludeRanksCount %d is invalid for %d ranks: exclude at least one rank "
                  "and not all of them",
                  fn, excludeRanksCount, parent->nranks());
    }
    for (int i = 0; i < excludeRanksCount; ++i) {
      if (excludeRanksList[i] < 0 || excludeRanksList[i] >= parent->nranks()) {
        return fail(Result::kInvalidArgument, "%s: excluded rank %d is out of range [0, %d)", fn, excludeRanksList[i],
                    parent->nranks());
      }
      if (excludeRanksList[i] == parent->rank()) {
        return fail(Result::kInvalidArgument,
                    "%s: rank %d is in its own exclude list; excluded ranks must not call ncclCommShrink", fn,
                    parent->rank());
      }
    }
    CommOptions options = parent->options();
    if (config != nullptr) MIXCCL_TRY(mixccl::api::parseConfig(fn, config, &options));
    // NCCL_SHRINK_ABORT cancels queued work (the revoke flag fails it, engine.h) and marks the
    // parent unusable for new operations; the default lets queued work finish first. Only after
    // every argument was accepted: a refused call leaves the parent as it was.
    if (shrinkFlags == NCCL_SHRINK_ABORT) parent->revoke();
    std::vector<int> excluded(excludeRanksList, excludeRanksList + excludeRanksCount);
    auto run = [fn, parent, excluded, options, newcomm]() -> Result {
      if (mixccl::Engine* e = parent->existingEngine(); e != nullptr && !parent->revoked()) {
        MIXCCL_TRY(e->waitIdle(fn));
      }
      std::unique_ptr<Communicator> child;
      MIXCCL_TRY(
          mixccl::shrinkCommunicator(parent, excluded.data(), static_cast<int>(excluded.size()), options, &child));
      *newcomm = mixccl::api::registerComm(std::move(child));
      return Result::kSuccess;
    };
    // In a group one thread may shrink several ranks, each waiting for the others: as split,
    // but after the group's operations on the parent, which were issued before.
    if (mixccl::group::active()) {
      mixccl::group::addTask(parent, run, /*afterOps=*/true);
      return Result::kSuccess;
    }
    return run();
  });
}

MIXCCL_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm) {
  return groupedApiGuard("ncclCommFinalize", [&]() -> Result {
    if (comm == nullptr) return Result::kSuccess;  // as in NCCL: nothing to finalize
    Communicator* c = nullptr;
    MIXCCL_TRY(mixccl::api::lookupCallerComm("ncclCommFinalize", comm, &c));
    // Before the join below: after a non-blocking finalize, initThread() is that finalize, which
    // waits for the other ranks (maybe this thread's next calls); in a group it has not started.
    if (c->finalizeCalled()) {
      // NCCL refuses a second finalize as an invalid argument.
      return fail(Result::kInvalidArgument,
                  "ncclCommFinalize: communicator of rank %d was finalized already (a non-blocking one completes "
                  "when ncclCommGetAsyncError says ncclSuccess); destroy it",
                  c->rank());
    }
    if (c->initThread().joinable()) c->initThread().join();  // a non-blocking init
    if (c->revoked()) {
      // As NCCL, whose revoke counts as the finalize: what is left to do is destroy.
      return fail(Result::kInvalidArgument, "ncclCommFinalize: communicator of rank %d was revoked; destroy it",
                  c->rank());
    }
    if (c->state() != mixccl::CommState::kReady) return Result::kSuccess;  // failed init: nothing to agree on
    (void)c->markFinalizeCalled();  // this thread holds the caller slot: no other finalize got here
    auto run = [c]() -> Result {
      // Queued work first: finalize drains the lanes that work uses (bounded, abort-aware).
      if (mixccl::Engine* e = c->existingEngine()) MIXCCL_TRY(e->waitIdle("ncclCommFinalize"));
      return mixccl::finalizeCommunicator(*c);
    };
    // Every rank's finalize waits for the others: in a group, where one thread may finalize
    // several ranks, it runs in a thread of its own after the group's operations.
    if (c->options().blocking && mixccl::group::active()) {
      mixccl::group::addTask(c, run, /*afterOps=*/true);
      return Result::kSuccess;
    }
    if (c->options().blocking) return run();
    // Non-blocking, as NCCL: ncclInProgress now, ncclCommGetAsyncError says when every rank got
    // here; destroy joins the thread. In a group the thread starts at its end, after the group's
    // operations (which its drain check would otherwise find in flight).
    auto start = [c, run]() -> Result {
      c->setAsyncError(Result::kInProgress);
      c->initThread() = std::thread([c, run] {
        pthread_setname_np(pthread_self(), "mixccl-final");
        mixccl::log::RankScope scope(c->rank());
        c->setAsyncError(run());
      });
      return Result::kSuccess;
    };
    if (mixccl::group::active()) {
      mixccl::group::addTask(c, start, /*afterOps=*/true);
    } else {
      MIXCCL_TRY(start());
    }
    return Result::kInProgress;
  });
}

MIXCCL_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm) {
  return apiGuard("ncclCommDestroy", [&]() -> Result {
    if (comm == nullptr) return Result::kSuccess;  // NCCL accepts destroying a NULL communicator
    Communicator* c = nullptr;
    MIXCCL_TRY(mixccl::api::takeComm("ncclCommDestroy", comm, &c, /*destroy=*/true));
    // In a group, as NCCL: at its end, after the group's splits, collectives, shrinks and
    // finalizes, which may need this communicator (and, for one thread driving several ranks,
    // other ranks' calls that come after this one). The handle is gone for new calls already.
    if (mixccl::group::active()) {
      mixccl::group::deferDestroy([comm, c] { endComm(comm, c, /*forgetGroup=*/false); });
    } else {
      endComm(comm, c, /*forgetGroup=*/true);
    }
    return Result::kSuccess;
  });
}

MIXCCL_API(ncclResult_t, ncclCommAbort, ncclComm_t comm) {
  return apiGuard("ncclCommAbort", [&]() -> Result {
    if (comm == nullptr) return Result::kSuccess;  // NCCL accepts aborting a NULL communicator
    Communicator* c = nullptr;
    MIXCCL_TRY(mixccl::api::takeComm("ncclCommAbort", comm, &c, /*destroy=*/false));
    c->abort();
    endComm(comm, c, /*forgetGroup=*/true);
    return Result::kSuccess;
  });
}

MIXCCL_API(ncclResult_t, ncclCommRevoke, ncclComm_t comm, int revokeFlags) {
  return apiGuard("ncclCommRevoke", [&]() -> Result {
    if (comm == nullptr) return Result::kSuccess;  // as in NCCL: nothing to revoke
    Communicator* c = nullptr;
    MIXCCL_TRY(mixccl::api::lookupComm("ncclCommRevoke", comm, &c));
    if (revokeFlags != NCCL_REVOKE_DEFAULT) {
      return fail(Result::kInvalidArgument, "ncclCommRevoke: revokeFlags must be NCCL_REVOKE_DEFAULT (0), got %d",
                  revokeFlags);
    }
    // NCCL refuses to revoke a finalized or already revoked communicator as an invalid argument
    // (finalized: from the finalize call on, as NCCL's finalizeCalled).
    if (c->finalizeCalled()) {
      return fail(Result::kInvalidArgument, "ncclCommRevoke: communicator of rank %d was finalized; destroy it",
                  c->rank());
    }
    if (c->revoked()) {
      return fail(Result::kInvalidArgument, "ncclCommRevoke: communicator of rank %d was revoked already", c->rank());
    }
    c->revoke();
    return Result::kSuccess;
  });
}

MIXCCL_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t* asyncError) {
  return apiGuard("ncclCommGetAsyncError", [&]() -> Result {
    Communicator* c = nullptr;
    MIXCCL_TRY(checkOut("ncclCommGetAsyncError", asyncError, "asyncError"));
    MIXCCL_TRY(mixccl::api::lookupComm("ncclCommGetAsyncError", comm, &c));
    const Result e = c->asyncError();
    *asyncError = mixccl::api::toNccl(e);
    // The failure was logged on the thread where it happened; this thread's ncclGetLastError
    // should say why too (NCCL's last error is process-wide, so there it would).
    if (e != Result::kSuccess && e != Result::kInProgress) {
      const std::string message = c->asyncErrorMessage();
      if (!message.empty()) mixccl::setLastError(message);
    }
    return Result::kSuccess;
  });
}

MIXCCL_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count) {
  return apiGuard("ncclCommCount", [&]() -> Result {
    Communicator* c = nullptr;
    MIXCCL_TRY(checkOut("ncclCommCount", count, "count"));
    MIXCCL_TRY(mixccl::api::lookupComm("ncclCommCount", comm, &c));
    *count = c->nranks();
    return Result::kSuccess;
  });
}

MIXCCL_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int* device) {
  return apiGuard("ncclCommCuDevice", [&]() -> Result {
    Communicator* c = nullptr;
    MIXCCL_TRY(checkOut("ncclCommCuDevice", device, "device"));
    MIXCCL_TRY(mixccl::api::lookupComm("ncclCommCuDevice", comm, &c));
    *device = c->device();
    return Result::kSuccess;
  });
}

MIXCCL_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int* rank) {
  return apiGuard("ncclCommUserRank", [&]() -> Result {
    Communicator* c = nullptr;
    MIXCCL_TRY(checkOut("ncclCommUserRank", rank, "rank"));
    MIXCCL_TRY(mixccl::api::lookupComm("ncclCommUserRank", comm, &c));
    *rank = c->rank();
    return Result::kSuccess;
  });
}

MIXCCL_API(const char*, ncclGetErrorString, ncclResult_t result) {
  if (static_cast<int>(result) < 0 || static_cast<int>(result) >= static_cast<int>(ncclNumResults)) {
    return "unknown result code";
  }
  return mixccl::resultString(static_cast<Result>(result));
}

MIXCCL_API(const char*, ncclGetLastError, ncclComm_t comm) {
  // Messages are kept per thread: the thread that got an error code reads its own explanation.
  // ncclCommGetAsyncError hands an asynchronous failure's message to the thread that polls it.
  // The pointer stays valid when later failures replace the message, as NCCL's does.
  return mixccl::lastErrorText();
}
