// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "src/api/handle.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <new>
#include <shared_mutex>
#include <unordered_set>
#include <vector>

#include "common/config.h"
#include "common/per_thread.h"

namespace mixccl::api {
namespace {

// Lookups (every API call, from every rank thread of a process) share it; only creating and
// destroying a communicator takes it alone, so rank threads never queue behind each other.
std::shared_mutex gMutex;
std::unordered_set<ncclComm*>* gLive = new std::unordered_set<ncclComm*>();  // leaked: used at exit

constexpr unsigned kConfigMagic = 0xcafebeef;
// NCCL's channel limit (MAXCHANNELS), the largest nChannelsPerNetPeer it accepts.
constexpr int kMaxChannels = 64;

// The int fields NCCL range-checks (parseCommConfig), each with its valid range and the NCCL
// version that added it; the unset value NCCL_CONFIG_UNDEF_INT is always valid. NCCL reads a field
// only when the caller's config version has it (an older one gets the default) and mixccl does
// the same, so a config that works with one works with the other. mixccl ignores most of these
// fields (they tune device kernels) but refuses what NCCL refuses.
struct IntField {
  size_t offset;
  const char* name;
  int min;
  int max;
  unsigned since;  // config version that has the field; 0: NCCL reads it from any version
};
constexpr IntField kIntFields[] = {
    {offsetof(ncclConfig_t, blocking), "blocking", 0, 1, NCCL_VERSION(2, 14, 0)},
    {offsetof(ncclConfig_t, cgaClusterSize), "cgaClusterSize", 0, INT_MAX, NCCL_VERSION(2, 17, 0)},
    {offsetof(ncclConfig_t, minCTAs), "minCTAs", 1, INT_MAX, NCCL_VERSION(2, 17, 0)},
    {offsetof(ncclConfig_t, maxCTAs), "maxCTAs", 1, INT_MAX, NCCL_VERSION(2, 17, 0)},
    {offsetof(ncclConfig_t, splitShare), "splitShare", 0, 1, 0},
    {offsetof(ncclConfig_t, collnetEnable), "collnetEnable", 0, 1, NCCL_VERSION(2, 27, 0)},
    // One of NCCL_CTA_POLICY_DEFAULT (0), _EFFICIENCY (1) or _ZERO (2): NCCL checks the range, so
    // EFFICIENCY | ZERO (3) is refused although the names look like flags.
    {offsetof(ncclConfig_t, CTAPolicy), "CTAPolicy", NCCL_CTA_POLICY_DEFAULT, NCCL_CTA_POLICY_ZERO,
     NCCL_VERSION(2, 27, 0)},
    {offsetof(ncclConfig_t, shrinkShare), "shrinkShare", 0, 1, NCCL_VERSION(2, 27, 0)},
    {offsetof(ncclConfig_t, nvlsCTAs), "nvlsCTAs", 1, INT_MAX, NCCL_VERSION(2, 27, 0)},
    {offsetof(ncclConfig_t, nChannelsPerNetPeer), "nChannelsPerNetPeer", 1, kMaxChannels, NCCL_VERSION(2, 28, 0)},
    {offsetof(ncclConfig_t, nvlinkCentricSched), "nvlinkCentricSched", 0, 1, NCCL_VERSION(2, 28, 0)},
};
constexpr size_t kNumIntFields = sizeof(kIntFields) / sizeof(kIntFields[0]);
static_assert(kIntFields[0].offset == offsetof(ncclConfig_t, blocking) &&
                  kIntFields[2].offset == offsetof(ncclConfig_t, minCTAs) &&
                  kIntFields[3].offset == offsetof(ncclConfig_t, maxCTAs),
              "blocking, minCTAs and maxCTAs are entries 0, 2 and 3 of kIntFields");

}  // namespace

ncclComm* registerComm(std::unique_ptr<Communicator> comm) {
  static std::atomic<uint64_t> lastSerial{0};
  auto* handle = new ncclComm{std::move(comm), lastSerial.fetch_add(1, std::memory_order_relaxed) + 1};
  std::lock_guard<std::shared_mutex> lock(gMutex);
  gLive->insert(handle);
  return handle;
}

void freeComm(ncclComm* handle) {
  // Destroy and abort both end here. Registrations the user never deregistered would otherwise
  // leak; they die with the communicator in NCCL too (ncclRegCleanup).
  dropRegistrations(handle);
  // The handle's reference: a group of another thread may still hold one (Communicator::hold).
  Communicator* c = handle->impl.release();
  delete handle;
  Communicator::release(c);
}

void releaseComm(ncclComm* handle) {
  {
    std::lock_guard<std::shared_mutex> lock(gMutex);
    gLive->erase(handle);
  }
  delete handle;
}

namespace {

struct CallComms {
  std::vector<Communicator*> pinned;
  std::vector<Communicator*> claimed;  // caller slots this API call took
};
CallComms& callComms() { return PerThread<CallComms>::get(); }

// This process's pid, kept by a fork handler so the check on every call needs no system call.
std::atomic<int32_t> gPid{static_cast<int32_t>(getpid())};

void afterForkInChild() {
  gPid.store(static_cast<int32_t>(getpid()), std::memory_order_relaxed);
  // A thread of the parent may have held the registry lock at fork() and does not exist here:
  // start the child with a fresh one, so its calls fail cleanly instead of hanging.
  new (&gMutex) std::shared_mutex();
}

[[maybe_unused]] const int gAtFork = pthread_atfork(nullptr, nullptr, afterForkInChild);

// Requires gMutex.
Result checkLive(const char* fn, ncclComm_t handle) {
  if (gLive->count(handle) == 0) {
    return fail(Result::kInvalidArgument,
                "%s: comm %p is not a live communicator (destroyed, aborted or never created)", fn,
                static_cast<void*>(handle));
  }
  const int32_t self = gPid.load(std::memory_order_relaxed);
  const Communicator* c = handle->impl.get();
  if (c->creatorPid() != self) {
    return fail(Result::kInvalidUsage,
                "%s: communicator of rank %d created by pid %d cannot be used in pid %d (fork): a child shares "
                "the parent's connections, so it must create communicators of its own; this one was left untouched",
                fn, c->rank(), c->creatorPid(), self);
  }
  return Result::kSuccess;
}

}  // namespace

Result lookupComm(const char* fn, ncclComm_t handle, Communicator** out) {
  if (handle == nullptr) return fail(Result::kInvalidArgument, "%s: comm is NULL", fn);
  std::vector<Communicator*>& pinned = callComms().pinned;
  pinned.reserve(pinned.size() + 1);  // may throw: before the pin, so nothing leaks
  std::shared_lock<std::shared_mutex> lock(gMutex);
  MIXCCL_TRY(checkLive(fn, handle));
  *out = handle->impl.get();
  (*out)->enterCall();
  pinned.push_back(*out);
  return Result::kSuccess;
}

Result takeComm(const char* fn, ncclComm_t handle, Communicator** out, bool destroy) {
  if (handle == nullptr) return fail(Result::kInvalidArgument, "%s: comm is NULL", fn);
  std::lock_guard<std::shared_mutex> lock(gMutex);
  MIXCCL_TRY(checkLive(fn, handle));
  const Communicator* c = handle->impl.get();
  // A blocking init in a group is still running too, but its ncclGroupEnd waits for it anyway,
  // and a destroy in that group runs after it.
  if (destroy && !c->options().blocking && c->state() == CommState::kInitializing) {
    return fail(
        Result::kInvalidArgument,
        "%s: communicator of rank %d is still initialising (non-blocking init); wait until "
        "ncclCommGetAsyncError no longer says ncclInProgress, or call ncclCommAbort to stop the init and free it",
        fn, c->rank());
  }
  gLive->erase(handle);
  *out = handle->impl.get();
  return Result::kSuccess;
}

Result lookupCallerComm(const char* fn, ncclComm_t handle, Communicator** out) {
  MIXCCL_TRY(lookupComm(fn, handle, out));
  Communicator* c = *out;
  if (c->claimCallerInto(&callComms().claimed)) return Result::kSuccess;
  return fail(Result::kInvalidUsage,
              "%s: two threads called on communicator of rank %d at the same time; NCCL allows one thread at a time "
              "per communicator (this call was refused and changed nothing; the other one goes on)",
              fn, c->rank());
}

void unpinCallComms() noexcept {
  // Slots first: the pin is what keeps the communicator alive.
  CallComms* calls = PerThread<CallComms>::peek();
  if (calls == nullptr) return;
  CallComms& call = *calls;
  for (Communicator* c : call.claimed) c->releaseCaller();
  call.claimed.clear();
  for (Communicator* c : call.pinned) c->leaveCall();
  call.pinned.clear();
}

Result lookupReadyComm(const char* fn, ncclComm_t handle, Communicator** out) {
  // The slot before the join below: two threads must not join one init thread.
  MIXCCL_TRY(lookupCallerComm(fn, handle, out));
  Communicator* c = *out;
  // A non-blocking init may still run: operations wait for it rather than fail.
  if (c->state() == CommState::kInitializing && c->initThread().joinable()) c->initThread().join();
  // From the finalize call on, not only once it is done: a non-blocking one still under way keeps
  // the async error at kInProgress, which below would answer ncclInProgress, as if this operation
  // had been queued.
  if (c->finalizeCalled()) {
    return fail(Result::kInvalidUsage, "%s: communicator of rank %d was finalized", fn, c->rank());
  }
  switch (c->state()) {
    case CommState::kInitializing:
      return fail(Result::kInvalidUsage, "%s: communicator of rank %d is still initialising", fn, c->rank());
    case CommState::kFailed:
      return fail(Result::kInvalidUsage, "%s: communicator of rank %d failed to initialise (%s); destroy it", fn,
                  c->rank(), resultString(c->asyncError()));
    case CommState::kFinalized:
      return fail(Result::kInvalidUsage, "%s: communicator of rank %d was finalized", fn, c->rank());
    case CommState::kReady:
      break;
  }
  if (c->aborted() || c->revoked()) {
    return fail(Result::kInvalidUsage, "%s: communicator of rank %d was %s", fn, c->rank(),
                c->aborted() ? "aborted" : "revoked");
  }
  Result async = c->asyncError();
  if (async != Result::kSuccess) {
    return fail(async, "%s: communicator of rank %d has an earlier error (%s); abort it and create a new one", fn,
                c->rank(), resultString(async));
  }
  return Result::kSuccess;
}

namespace {

// NCCL_COMM_BLOCKING: 0 or 1 replaces what the config (or its default) says, as NCCL's
// envConfigOverride does after reading the config. Splits and shrinks without a config inherit
// their parent's options, which had it applied.
void applyBlockingOverride(CommOptions* out) {
  const int64_t env = config::getInt(config::Knob::kCommBlocking);
  if (env == 0 || env == 1) out->blocking = env == 1;
}

}  // namespace

Result parseConfig(const char* fn, const ncclConfig_t* config, CommOptions* out) {
  *out = CommOptions{};
  if (config == nullptr) {
    applyBlockingOverride(out);
    return Result::kSuccess;
  }
  // Only fields that lie inside the caller's struct are read (an older caller has a smaller one);
  // the others keep their NCCL_CONFIG_INITIALIZER values, as NCCL copies min(size, its sizeof).
  auto has = [config](size_t offset, size_t bytes) { return offset + bytes <= config->size; };
  if (!has(offsetof(ncclConfig_t, magic), sizeof(unsigned))) {
    return fail(Result::kInvalidArgument,
                "%s: config size is %zu, too small to hold its magic: initialise ncclConfig_t with "
                "NCCL_CONFIG_INITIALIZER",
                fn, config->size);
  }
  if (config->magic != kConfigMagic) {
    return fail(Result::kInvalidArgument,
                "%s: config magic is 0x%x, not 0x%x: initialise ncclConfig_t with "
                "NCCL_CONFIG_INITIALIZER",
                fn, config->magic, kConfigMagic);
  }
  // An old version is not refused: as in NCCL, the fields it predates keep their defaults.
  const unsigned version = has(offsetof(ncclConfig_t, version), sizeof(unsigned)) ? config->version : NCCL_VERSION_CODE;
  int value[kNumIntFields];
  for (size_t i = 0; i < kNumIntFields; ++i) {
    const IntField& f = kIntFields[i];
    value[i] = NCCL_CONFIG_UNDEF_INT;
    if (!has(f.offset, sizeof(int)) || version < f.since) continue;
    memcpy(&value[i], reinterpret_cast<const char*>(config) + f.offset, sizeof(int));
    const int v = value[i];
    if (v != NCCL_CONFIG_UNDEF_INT && (v < f.min || v > f.max)) {
      if (f.max == INT_MAX) {
        return fail(Result::kInvalidArgument, "%s: config %s must be at least %d (or NCCL_CONFIG_UNDEF_INT), got %d",
                    fn, f.name, f.min, v);
      }
      return fail(Result::kInvalidArgument, "%s: config %s must be in [%d, %d] (or NCCL_CONFIG_UNDEF_INT), got %d", fn,
                  f.name, f.min, f.max, v);
    }
  }
  const int minCTAs = value[2], maxCTAs = value[3];
  if (minCTAs != NCCL_CONFIG_UNDEF_INT && maxCTAs == NCCL_CONFIG_UNDEF_INT) {
    // NCCL compares the two as they are, and the unset maxCTAs (INT_MIN) is below any minCTAs.
    return fail(Result::kInvalidArgument,
                "%s: config minCTAs is %d but maxCTAs is unset, which NCCL refuses; set maxCTAs as well", fn, minCTAs);
  }
  if (minCTAs > maxCTAs) {
    return fail(Result::kInvalidArgument, "%s: config minCTAs %d is larger than maxCTAs %d", fn, minCTAs, maxCTAs);
  }
  out->blocking = value[0] != 0;  // unset (NCCL_CONFIG_UNDEF_INT) is blocking, NCCL's default
  if (has(offsetof(ncclConfig_t, commName), sizeof(const char*)) && config->commName != nullptr) {
    out->name = config->commName;
  }
  applyBlockingOverride(out);
  return Result::kSuccess;
}

}  // namespace mixccl::api
