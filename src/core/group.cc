// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "src/core/group.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <system_error>
#include <thread>
#include <tuple>

#include "common/log.h"
#include "common/no_throw.h"
#include "common/per_thread.h"
#include "src/core/communicator.h"
#include "src/core/engine.h"
#include "src/core/executor.h"
#include "src/core/op_stamp.h"
#include "src/core/plan_cache.h"

namespace mixccl::group {
namespace {

// A group's blocking call on `comm` (addTask). One that starts at once pins the communicator
// until it has run, so a destroy or abort on another thread waits for it (Communicator::
// waitForCalls); one on the group's own thread joins it first (forget()). A deferred one (started
// by end()) only holds a reference until then, as the group's operations do (GroupState::held).
struct Task {
  Communicator* comm = nullptr;
  std::function<Result()> body;
  std::thread thread;
  std::unique_ptr<Result> result;
  // The thread keeps what it needs itself: the Task moves when its list grows. The caller has
  // pinned `comm` for the thread; when no thread can be made, the pin goes and the task fails.
  void start() {
    try {
      thread = std::thread([body = std::move(body), slot = result.get(), c = comm] {
        *slot = noThrow("grouped call", body);  // on a thread of its own: nothing may escape it
        c->leaveCall();
      });
    } catch (const std::system_error& e) {
      comm->leaveCall();
      *result =
          fail(Result::kSystemError, "rank %d: cannot start a thread for a grouped call: %s", comm->rank(), e.what());
    }
  }
};

struct GroupState {
  int depth = 0;
  std::vector<std::unique_ptr<Op>> ops;
  std::vector<Communicator*> inits;
  // Blocking work that needs every rank of the group at once (split, shrink and finalize from one
  // thread for several ranks): each runs in its own thread, joined by end() or by forget() of its
  // communicator; `tasks` are running, `deferred` start at end(), after the group's operations.
  std::vector<Task> tasks;
  std::vector<Task> deferred;
  // A reference (Communicator::hold) to every communicator the group's operations, inits and
  // deferred tasks name, released when the group ends. Why a reference and not the handle or a
  // pin: another thread (a watchdog) may destroy or abort the communicator before ncclGroupEnd;
  // a pin would make that abort wait for this thread's ncclGroupEnd, and the operations keep a
  // raw Communicator*, which a free would leave dangling (ncclGroupEnd read freed memory). With
  // the reference the memory stays, destroy/abort return at once (the last reference frees), and
  // end() pins each communicator and checks closed() before it touches anything else.
  std::vector<Communicator*> held;
  // ncclCommDestroy calls made in the group: they run at its end, after everything else (as
  // NCCL defers them), so a split or the collectives of the communicator issued before still run.
  std::vector<std::function<void()>> destroys;
  // Calls inside the group that failed, reported at end(): it returns the last one's result, as
  // NCCL does (ncclGroupErrCheck keeps the latest), and names the first too, usually the cause.
  int failures = 0;
  Result lastError = Result::kSuccess;
  std::string firstMessage;
  std::string lastMessage;

  GroupState() = default;
  GroupState(GroupState&&) = default;
  GroupState& operator=(GroupState&&) = default;
  // The end of a group: when end() is done with it (finish()), or when a thread exits with its
  // group open (an exception, a cancelled worker): what the group started ends, what it was asked
  // to destroy is, and its references go, or the communicators would never be freed.
  ~GroupState() {
    for (Task& t : tasks) {
      if (t.thread.joinable()) t.thread.join();
    }
    for (auto& destroy : destroys) destroy();
    for (Communicator* c : held) Communicator::release(c);
  }
};

// Holds a reference to `comm` for the group (GroupState::held), once per communicator.
void keep(GroupState& group, Communicator* comm) {
  if (std::find(group.held.begin(), group.held.end(), comm) != group.held.end()) return;
  group.held.reserve(group.held.size() + 1);  // may throw: before the reference, so nothing leaks
  comm->hold();
  group.held.push_back(comm);
}

// kInvalidArgument, as a call on the destroyed or aborted handle gets, when destroy or abort of
// `comm` began (on another thread) after the group's calls on it. `comm` is pinned (or held) by
// the caller, so closed() is reliable (Communicator::close).
Result checkOpen(const char* fn, Communicator* comm, const char* consequence) {
  if (!comm->closed()) return Result::kSuccess;
  return fail(Result::kInvalidArgument,
              "%s: communicator %p of rank %d was destroyed or aborted (by another thread) after this group's calls "
              "on it; %s",
              fn, static_cast<void*>(comm), comm->rank(), consequence);
}

// The last call outside a group on a thread, as prepareOp() and checkBuffers() left it: a
// training step or a benchmark repeats its calls with the same buffers, and preparing one again
// (the operator, the lane, the tuner's remembered decision, the buffer checks) cost a 2-rank 8 B
// all-reduce about 330 of its 2,800 instructions (callgrind). Only calls whose preparation
// depends on nothing but what is compared here are remembered: built-in operators (a user's
// operator may be destroyed and its number given to another), no stream, a synchronous backend, no
// TUNING log (which wants every decision). The communicator's random hash tells a new communicator made at a
// destroyed one's address from it. The buffers were found readable at the last call, as the
// host backend's own check remembers recent pages (host_backend.cc).
class LastCall {
 public:
  bool repeats(const Op& op) const {
    return op.comm == call_.comm && op.kind == call_.kind && op.input == call_.input && op.output == call_.output &&
           op.count == call_.count && op.dtype == call_.dtype && op.redOp == call_.redOp && op.root == call_.root &&
           op.stream == nullptr && op.comm->commHash() == commHash_ && !log::enabled(log::Level::kInfo, log::kTune);
  }
  // Fills in what prepareOp() did for the remembered call.
  void apply(Op* op) const {
    op->reduction = call_.reduction;
    op->spec = call_.spec;
    op->lane = call_.lane;
    op->algo = call_.algo;
    op->predictedSeconds = call_.predictedSeconds;
    if (op->schedule != schedule_) op->schedule = schedule_;
  }
  void remember(const Op& op) {
    call_.comm = nullptr;
    if (op.stream != nullptr || op.redOp >= kNumBuiltinOps || op.deviceScalar != nullptr) return;
    // A device backend tells its memory by the allocations it knows, which come and go: its
    // buffers are checked every time.
    if ((op.comm->backend()->caps().flags & kCapAsync) != 0) return;
    call_ = op;
    commHash_ = op.comm->commHash();
    if (schedule_ != op.schedule) schedule_ = op.schedule;
  }
  // Once the call has run: planOp() found the schedule where prepareOp() may not have.
  void noteSchedule(const Op& op) {
    if (op.comm == call_.comm && schedule_ != op.schedule) schedule_ = op.schedule;
  }

 private:
  OpValues call_;  // the call and what prepareOp() made of it; comm nullptr: nothing remembered
  uint64_t commHash_ = 0;
  std::shared_ptr<const algo::Schedule> schedule_;
};

// This thread's group, and the scratch its runs reuse from call to call (a small collective
// pays for every allocation): per thread, and a run never nests in another on its thread.
struct ThreadGroup {
  GroupState group;
  std::vector<Communicator*> taken;                   // CallerSlots
  std::vector<std::pair<Communicator*, bool>> comms;  // runOps
  std::vector<Op*> sync;                              // runOps
  std::vector<Stream> streams;                        // runOps
  std::vector<std::unique_ptr<Op>> single;            // submit outside a group
  std::vector<std::unique_ptr<Op>> ending;            // finish: the operations of the group it ends
  // Operations that ran here, for the next calls (newOp(), recycle()): a group of sends and
  // receives allocated and freed one per call before. Each keeps its schedule: a repeated call
  // finds the same one, and handing it over keeps the reference count, and its two locked
  // instructions, out of the call.
  std::vector<std::unique_ptr<Op>> spares;
  LastCall last;
};
ThreadGroup& threadGroup() { return PerThread<ThreadGroup>::get(); }
GroupState& state() { return threadGroup().group; }

// At most this many spare operations per thread: a group's worth of sends and receives. They
// keep a schedule only as large as the plan cache keeps, so their memory stays bounded too.
constexpr size_t kMaxSpareOps = 16;

// Keeps `op`, which ran on this thread, for newOp(): back to a new operation's state but for its
// schedule (its scratch memory returns to the pool now). Never allocates (newOp() reserved the
// room): it runs in scope guards.
const OpValues kFreshOp{};

void recycle(std::unique_ptr<Op> op, std::vector<std::unique_ptr<Op>>& spares) {
  if (op == nullptr || spares.size() >= std::min(kMaxSpareOps, spares.capacity())) return;
  if (op->schedule != nullptr && op->schedule->steps.size() > PlanCache::kMaxSteps) op->schedule = nullptr;
  op->scratch.reset();
  static_cast<OpValues&>(*op) = kFreshOp;  // op.h says why not `new (op) Op()`
  spares.push_back(std::move(op));
}

// Recycles `ops` (last first: newOp() takes the last one given back, so a group repeated in the
// same order gets each operation's own) and empties the list when it goes out of scope, also
// when something throws.
struct RecycleOps {
  std::vector<std::unique_ptr<Op>>& ops;
  std::vector<std::unique_ptr<Op>>& spares;
  ~RecycleOps() {
    for (auto it = ops.rbegin(); it != ops.rend(); ++it) recycle(std::move(*it), spares);
    ops.clear();
  }
};

// The caller slots (communicator.h) of every communicator of a run, held until it ends. An API
// call on this thread may hold a slot already (an operation outside a group): that is kNested.
// Released before the run unpins its communicators (leaveCall): an abort on another thread may
// free one as soon as it is unpinned.
class CallerSlots {
 public:
  ~CallerSlots() { release(); }
  void release() {
    for (Communicator* c : taken_) c->releaseCaller();
    taken_.clear();
  }
  Result claim(Communicator* c) {
    if (c->claimCallerInto(&taken_)) return Result::kSuccess;
    return fail(Result::kInvalidUsage,
                "ncclGroupEnd: two threads called on communicator of rank %d at the same time; NCCL allows one "
                "thread at a time per communicator (this group's operations were dropped; the other call goes on)",
                c->rank());
  }

 private:
  std::vector<Communicator*>& taken_ = threadGroup().taken;
};

// Gives `op` its place in its communicator's order: sequence number, stamp, closing token.
void issue(Op& op) {
  op.seq = op.comm->nextSeq(op.kind, op.root);
  op.stamp = opStamp(op);
  op.closingToken = closingTokenDue(op);
  if (op.lane == kLaneColl) op.comm->board().noteIssued(op.seq);
  MIXCCL_INFO(log::kColl,
              "%s: opCount %llx sendbuff %p recvbuff %p count %llu datatype %s op %d root %d comm %p "
              "[nranks=%d] stream %p",
              collName(op.kind), static_cast<unsigned long long>(op.seq), op.input, op.output,
              static_cast<unsigned long long>(op.count), dataTypeName(op.dtype), op.redOp, op.root,
              static_cast<void*>(op.comm), op.comm->nranks(), op.stream);
}

// At most this many polls for a peer's message before a call's quick start (Stream::runPlainSteps)
// hands over to runStreams, whose back-off, deadline and stall checks then take over.
constexpr int64_t kQuickPolls = 1024;

// runOps() for the usual small call: one synchronous operation outside a group, held by its API
// call (caller slot and pin), on a communicator without queued work. One stream, nothing to sort
// or wait for, and its plain steps run before runStreams' loop is set up.
Result runSingle(Op* op) {
  issue(*op);
  Result r = planOp(op);
  if (r != Result::kSuccess) {
    op->comm->setAsyncError(r);  // the sequence number is taken: out of step with the peers
    return r;
  }
  auto& streams = threadGroup().streams;
  streams.resize(1);
  streams[0].reset();
  streams[0].push(op);
  const int64_t polls = op->comm->deviceOnHostCores() ? 0 : std::min(kQuickPolls, spinPolls(op->comm->localRanks()));
  threadGroup().last.noteSchedule(*op);
  Stream& stream = streams[0];
  r = stream.runPlainSteps(polls);
  if (r == Result::kSuccess) {
    bool advanced = false;
    r = stream.progress(&advanced);  // what is left: usually only the end of the operation
    if (r == Result::kSuccess && stream.done()) return r;
  }
  if (r != Result::kSuccess) {  // as runStreams() fails a stream
    r = stream.preferMismatch(r);
    op->comm->setAsyncError(r);
    stream.dropPending();
    return r;
  }
  return runStreams(streams);
}

// The part of runOps() that runs here: the operations of `ops` left after the queued ones were
// moved out (of communicators `comms` marks not queued), issued already.
Result runSynchronous(std::vector<std::unique_ptr<Op>>& ops, const std::vector<std::pair<Communicator*, bool>>& comms) {
  ThreadGroup& scratch = threadGroup();
  auto queued = [&](Communicator* c) {
    return std::find_if(comms.begin(), comms.end(), [&](const auto& e) { return e.first == c; })->second;
  };
  auto& sync = scratch.sync;
  sync.clear();
  for (auto& op : ops) {
    if (op != nullptr && !queued(op->comm)) sync.push_back(op.get());
  }
  if (sync.empty()) return Result::kSuccess;
  // Sequence numbers are taken: when the synchronous operations cannot run, their communicators
  // are out of step with their peers from here on (as runSingle says too).
  auto abandon = [&](Result e) {
    for (Op* op : sync) op->comm->setAsyncError(e);
    return e;
  };
  // The wire order is the issue order: queued work of these communicators goes first.
  for (auto& [comm, isAsync] : comms) {
    Engine* engine = comm->existingEngine();
    if (isAsync || engine == nullptr) continue;
    Result w = engine->waitIdle("synchronous call after queued work");
    if (w != Result::kSuccess) return abandon(w);
  }
  for (Op* op : sync) {
    Result p = planOp(op);
    if (p != Result::kSuccess) return abandon(p);
  }
  auto& streams = scratch.streams;
  partitionOps(sync, &streams);
  return runStreams(streams);
}

// Issues `ops` (sequence numbers and stamps in issue order), queues the operations of
// communicators whose work is asynchronous (engine.h) and runs the rest here. `callHolds`: the
// API call that runs them holds the caller slot of, and a pin on, every communicator of `ops`
// already (an operation outside a group), so this run takes neither again: each is a locked
// instruction, and a small collective's call pays for every one of them.
Result runOps(std::vector<std::unique_ptr<Op>>& ops, bool callHolds) {
  // Per communicator in order of first appearance: whether any of its operations is queued. Then
  // all of its operations of this group go into one batch, so grouped sends and receives still
  // progress together; NULL-stream ones among them complete before the call returns.
  ThreadGroup& scratch = threadGroup();
  // The call that waits, for messages: the group's end, or the single operation's own call.
  char fn[32] = "ncclGroupEnd";
  if (callHolds && ops.size() == 1) snprintf(fn, sizeof(fn), "nccl%s", collName(ops.front()->kind));
  auto& comms = scratch.comms;
  comms.clear();
  for (auto& op : ops) {
    auto it = std::find_if(comms.begin(), comms.end(), [&](const auto& c) { return c.first == op->comm; });
    if (it == comms.end()) it = comms.insert(comms.end(), {op->comm, false});
    it->second = it->second || isQueued(*op);
  }
  // Pinned for the whole run (an abort on another thread frees a communicator once unpinned);
  // the slots are released first, as the pins are.
  CallerSlots slots;
  struct Pins {
    std::vector<std::pair<Communicator*, bool>>& comms;
    CallerSlots& slots;
    bool held;  // by the API call (callHolds)
    ~Pins() {
      slots.release();
      if (held) return;
      for (auto& c : comms) c.first->leaveCall();
    }
  };
  if (!callHolds) {
    for (auto& c : comms) c.first->enterCall();
  }
  Pins pins{comms, slots, callHolds};
  if (!callHolds) {
    // A group's communicators were checked at its calls, but not since: one destroyed or aborted
    // meanwhile (the group's reference kept its memory) fails the group, before anything of any
    // communicator changes, sequence numbers included (one failed call abandons the group).
    for (auto& c : comms) MIXCCL_TRY(checkOpen(fn, c.first, "none of the group's operations ran"));
    for (auto& c : comms) MIXCCL_TRY(slots.claim(c.first));
  }
  // The operations that run here go back to this thread's spares (recycle) before the pins go:
  // an operation gives its scratch memory back to its communicator's pool, which an abort on
  // another thread may free as soon as the communicator is unpinned.
  RecycleOps recycleOps{ops, scratch.spares};
  // Room in every queue first: once sequence numbers are taken, the operations must go out.
  for (auto& [comm, isAsync] : comms) {
    if (isAsync) MIXCCL_TRY(comm->engine()->waitForRoom(fn));
  }
  for (auto& op : ops) issue(*op);
  Result r = Result::kSuccess;
  // Queued work first, so it progresses while this thread runs the synchronous rest. A batch with
  // NULL-stream operations must be complete when this returns, but it is waited for only once
  // every batch is queued and the synchronous operations ran: one thread may drive several ranks
  // (ncclCommInitAll), and a batch of one rank waits for the others' operations of the group.
  std::vector<Communicator*> awaited;
  for (auto& [comm, isAsync] : comms) {
    if (!isAsync) continue;
    std::vector<std::unique_ptr<Op>> batch;
    bool waitDone = false;
    for (auto& op : ops) {
      if (op == nullptr || op->comm != comm) continue;
      waitDone = waitDone || op->stream == nullptr;
      batch.push_back(std::move(op));
    }
    Result q = comm->engine()->enqueue(std::move(batch), fn);
    // Sequence numbers are taken: a batch that never went out leaves this rank out of step.
    if (q != Result::kSuccess) comm->setAsyncError(q);
    if (q == Result::kSuccess && waitDone) awaited.push_back(comm);
    if (r == Result::kSuccess) r = q;
  }
  Result done = runSynchronous(ops, comms);
  if (r == Result::kSuccess) r = done;
  // Also after a failure above: the batch reads and writes the caller's NULL-stream buffers.
  for (Communicator* comm : awaited) {
    Result w = comm->engine()->waitIdle(fn);
    if (r == Result::kSuccess) r = w;
  }
  return r;
}

// Completes the outermost group: joins the inits and tasks it started, then runs its operations
// if `run` and no call inside the group failed. As in NCCL, one failed call abandons the group's
// operations: running the others would leave this rank's sequence out of step with its peers'.
Result finish(const char* fn, bool run) {
  // The group as it ends; the thread's state starts afresh. Its destructor (~GroupState) runs
  // last, whichever way this returns: the destroys called in the group, then its references
  // (the last one frees a communicator another thread destroyed or aborted meanwhile).
  GroupState& group = state();
  GroupState ending = std::move(group);
  group = GroupState{};
  // The operations go to the thread's `ending` list, whose storage serves call after call (the
  // group's own list starts empty again with the storage `ending` had).
  auto& ops = threadGroup().ending;
  ops.clear();
  ops.swap(ending.ops);
  group.ops = std::move(ending.ops);
  // Those that did not run (runOps recycles the others). They were never planned, so they hold
  // no scratch memory: their communicators need not be pinned.
  RecycleOps recycleOps{ops, threadGroup().spares};
  Result r = Result::kSuccess;
  auto join = [&r](std::vector<Task>& list) {
    for (Task& t : list) {
      if (t.thread.joinable()) t.thread.join();
      if (*t.result != Result::kSuccess && r == Result::kSuccess) r = *t.result;
    }
  };
  join(ending.tasks);
  for (Communicator* c : ending.inits) {
    if (c->initThread().joinable()) c->initThread().join();
    if (c->options().blocking && c->asyncError() != Result::kSuccess && r == Result::kSuccess) r = c->asyncError();
  }
  if (ending.failures == 1) {
    return fail(ending.lastError, "%s: a call inside the group failed, so none of its %zu operation(s) ran: %s", fn,
                ops.size(), ending.lastMessage.c_str());
  }
  if (ending.failures > 1) {
    return fail(ending.lastError,
                "%s: %d calls inside the group failed, so none of its %zu operation(s) ran; the last: %s; the "
                "first: %s",
                fn, ending.failures, ops.size(), ending.lastMessage.c_str(), ending.firstMessage.c_str());
  }
  if (run && !ops.empty()) {
    Result done = runOps(ops, /*callHolds=*/false);
    if (r == Result::kSuccess) r = done;
  }
  // Finalize and shrink come after the group's operations, as the calls were issued; all at
  // once, as each waits for its communicator's other ranks, which may be this thread's too.
  for (Task& t : ending.deferred) {
    t.comm->enterCall();  // the task's pin; checked after it (Communicator::close)
    if (Result open = checkOpen(fn, t.comm, "its finalize or shrink did not run"); open != Result::kSuccess) {
      t.comm->leaveCall();
      *t.result = open;
      continue;
    }
    t.start();
  }
  join(ending.deferred);
  return r;
}

}  // namespace

bool active() { return state().depth > 0; }

Result start() {
  ++state().depth;
  return Result::kSuccess;
}

Result end() {
  if (state().depth == 0) {
    return fail(Result::kInvalidUsage, "ncclGroupEnd called without a matching ncclGroupStart");
  }
  if (--state().depth > 0) return Result::kSuccess;
  return finish("ncclGroupEnd", /*run=*/true);
}

Result simulateEnd(double* estimatedSeconds) {
  *estimatedSeconds = -1;
  if (state().depth == 0) {
    return fail(Result::kInvalidUsage, "ncclGroupSimulateEnd called without a matching ncclGroupStart");
  }
  if (--state().depth > 0) return Result::kSuccess;
  // The tuner's estimate of each operation (tuner.h), as if they ran one after the other.
  double seconds = 0;
  for (auto& op : state().ops) seconds += op->predictedSeconds;
  *estimatedSeconds = seconds;
  return finish("ncclGroupSimulateEnd", /*run=*/false);
}

Result submit(std::unique_ptr<Op> op) {
  ThreadGroup& scratch = threadGroup();
  const bool grouped = scratch.group.depth > 0;
  if (!grouped && scratch.last.repeats(*op)) {
    scratch.last.apply(op.get());
  } else {
    Result r = prepareOp(op.get());
    if (r == Result::kSuccess) r = checkBuffers(*op, isQueued(*op));
    if (r != Result::kSuccess) return noteError(r);
    if (!grouped) scratch.last.remember(*op);
  }
  if (grouped) {
    keep(scratch.group, op->comm);
    scratch.group.ops.push_back(std::move(op));
    return Result::kSuccess;
  }
  auto& ops = scratch.single;
  RecycleOps done{ops, scratch.spares};  // runOps recycles it first (or the engine takes it)
  ops.push_back(std::move(op));
  Op* single = ops.front().get();
  if (!isQueued(*single) && single->comm->existingEngine() == nullptr) return runSingle(single);
  return runOps(ops, /*callHolds=*/true);
}

std::unique_ptr<Op> newOp() {
  auto& spares = threadGroup().spares;
  if (spares.capacity() < kMaxSpareOps) spares.reserve(kMaxSpareOps);
  if (spares.empty()) return std::make_unique<Op>();
  std::unique_ptr<Op> op = std::move(spares.back());
  spares.pop_back();
  return op;
}

Result noteError(Result r) {
  if (state().depth > 0 && r != Result::kSuccess && r != Result::kInProgress) {
    GroupState& g = state();
    if (g.failures++ == 0) g.firstMessage = lastError();
    g.lastError = r;
    g.lastMessage = lastError();
  }
  return r;
}

void addPendingInit(Communicator* comm) {
  state().inits.reserve(state().inits.size() + 1);
  keep(state(), comm);
  state().inits.push_back(comm);
}

void addTask(Communicator* comm, std::function<Result()> task, bool afterOps) {
  std::vector<Task>& list = afterOps ? state().deferred : state().tasks;
  if (afterOps) keep(state(), comm);  // end() pins it when it starts the task
  Task& t = list.emplace_back();
  t.comm = comm;
  t.body = std::move(task);
  t.result = std::make_unique<Result>(Result::kInProgress);
  if (afterOps) return;
  comm->enterCall();
  t.start();
}

void deferDestroy(std::function<void()> destroy) {
  GroupState& group = state();
  group.destroys.reserve(group.destroys.size() + 1);  // may throw: before the caller lets go
  group.destroys.push_back(std::move(destroy));
}

void forget(Communicator* comm) {
  // A split of `comm` this thread started in its group uses it until it ends (an abort makes it
  // fail at once: the bootstrap watches the abort flag); one not started yet never will.
  for (Task& t : state().tasks) {
    if (t.comm == comm && t.thread.joinable()) t.thread.join();
  }
  auto& deferred = state().deferred;
  deferred.erase(std::remove_if(deferred.begin(), deferred.end(), [comm](const Task& t) { return t.comm == comm; }),
                 deferred.end());
  auto& ops = state().ops;
  ops.erase(std::remove_if(ops.begin(), ops.end(), [comm](const auto& op) { return op->comm == comm; }), ops.end());
  auto& inits = state().inits;
  inits.erase(std::remove(inits.begin(), inits.end(), comm), inits.end());
  // The group's reference: the caller (destroy, abort) still holds the handle's, so this never
  // frees.
  auto& held = state().held;
  if (auto it = std::find(held.begin(), held.end(), comm); it != held.end()) {
    held.erase(it);
    Communicator::release(comm);
  }
}

}  // namespace mixccl::group
