// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Group semantics (ncclGroupStart/End), per calling thread. Outside a group an operation runs
// as soon as it is submitted; inside, operations are kept until the outermost groupEnd(), which
// runs them all together: per communicator, the collectives in issue order on one stream, and
// sends/receives on one stream per (peer, direction), all progressed at once, so grouped
// point-to-point calls complete whatever order the ranks posted them in. Communicator inits
// issued inside a group are started at once and joined at groupEnd().

#include <functional>
#include <memory>
#include <vector>

#include "src/core/op.h"

namespace mixccl {

class Communicator;

namespace group {

Result start();
// Closes one level; the outermost end completes the group. If a call inside the group failed,
// none of its operations run (as in NCCL) and that call's error is returned.
Result end();
// Ends the group as end() does but drops its queued operations instead of running them
// (ncclGroupSimulateEnd), after estimating how long they would take. Communicator inits and splits
// started in the group still complete. Only the outermost end acts: an inner one just closes its
// level and leaves *estimatedSeconds negative.
Result simulateEnd(double* estimatedSeconds);
bool active();

// A new operation for submit(): fields as Op{} has them, except that `schedule` may hold the one
// of an earlier call of this thread (prepareOp() replaces or clears it).
std::unique_ptr<Op> newOp();

// Runs `op` now (outside a group) or queues it (inside). Takes ownership. A queued operation's
// communicator is held (Communicator::hold) until groupEnd(), which fails, running none of the
// group's operations, if another thread destroyed or aborted it meanwhile. The calling API function
// holds op->comm's caller slot and a pin on it (api/handle.h, lookupReadyComm) until it returns.
Result submit(std::unique_ptr<Op> op);

// Records an error of a call made inside a group so that groupEnd() reports it too; returns `r`.
Result noteError(Result r);

// A communicator whose init runs in a thread started inside a group: groupEnd() joins it.
void addPendingInit(Communicator* comm);

// Runs `task`, a blocking call on `comm`, in a thread of its own: now, or with `afterOps` once
// groupEnd() has run the group's operations; groupEnd() joins it and reports its error. For
// blocking calls that need all ranks at once when one thread drives several ranks (ncclCommSplit,
// ncclCommShrink, ncclCommFinalize in a group). A task started now pins `comm` until it has run;
// a deferred one holds a reference (Communicator::hold) until groupEnd(), which pins `comm` when it
// starts the task, or fails it if `comm` was destroyed or aborted meanwhile.
void addTask(Communicator* comm, std::function<Result()> task, bool afterOps);

// Runs `destroy` (what ncclCommDestroy does once the handle is taken) when the outermost group
// ends, after its tasks and operations, or when the thread exits with the group open.
void deferDestroy(std::function<void()> destroy);

// Removes every queued operation, pending init and task not started of `comm` (it is being
// aborted or destroyed) from this thread's group, drops the group's reference to it, and waits
// for its running tasks (an abort fails them at once).
void forget(Communicator* comm);

}  // namespace group
}  // namespace mixccl
