// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "common/config.h"

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>

#include "common/log.h"

namespace mixccl::config {
namespace {

enum class Type { kInt, kBool, kString };

struct KnobDecl {
  Knob knob;
  const char* env;
  Type type;
  const char* defaultValue;
  const char* doc;
  // Never logged: the value authenticates a job, and logs travel (bug reports, shared files).
  bool secret = false;
  // Integer knobs: a value outside [minValue, maxValue] is clamped into it, with a warning.
  int64_t minValue = std::numeric_limits<int64_t>::min();
  int64_t maxValue = std::numeric_limits<int64_t>::max();
};

// The most seconds MIXCCL_TIMEOUT may say (about 31 years, "never" in practice). Every wait adds
// the timeout to a steady_clock time in nanoseconds, which overflows past about 292 years: a
// larger value would put the deadline in the past and fail every wait at once.
constexpr int64_t kMaxTimeoutSeconds = 1000000000;

// The table: every knob, declared once. docs/TUNING.md ("Every knob") lists the same knobs with the
// same defaults for users, and README.md's configuration table names each (tests/unit/config_test.cc).
constexpr KnobDecl kTable[] = {
    {Knob::kDebug, "NCCL_DEBUG", Type::kString, "",
     "log level: VERSION, WARN, INFO or TRACE (NCCL's ABORT reads as INFO)"},
    {Knob::kDebugSubsys, "NCCL_DEBUG_SUBSYS", Type::kString, "INIT,BOOTSTRAP,ENV",
     "comma list of subsystems to log at INFO (INIT,COLL,P2P,SHM,NET,TUNING,ENV,ALLOC,CALL,BOOTSTRAP,ALL); ^ negates"},
    {Knob::kDebugFile, "NCCL_DEBUG_FILE", Type::kString, "",
     "log to this file instead of stdout (%h host, %p pid, %% a percent sign)"},
    {Knob::kCommId, "NCCL_COMM_ID", Type::kString, "", "host:port of the bootstrap root, instead of the unique id's"},
    {Knob::kSocketIfname, "NCCL_SOCKET_IFNAME", Type::kString, "",
     "interfaces for bootstrap and TCP: prefix list, ^ excludes, = exact"},
    {Knob::kSocketFamily, "NCCL_SOCKET_FAMILY", Type::kString, "", "AF_INET or AF_INET6 to force an address family"},
    {Knob::kShmDisable, "NCCL_SHM_DISABLE", Type::kBool, "0", "1 = never use shared memory (use TCP on one host)"},
    {Knob::kAlgo, "NCCL_ALGO", Type::kString, "",
     "algorithms the tuner may choose: NCCL's list syntax (Ring,Tree / ^Tree / broadcast:tree;allgather:ring) with "
     "NCCL's and mixccl's names (docs/TUNING.md); the same on every rank"},
    {Knob::kProto, "NCCL_PROTO", Type::kString, "",
     "protocols the tuner may choose (LL, LL128, Simple; ^ excludes; per collective as NCCL_ALGO); only Simple "
     "exists today"},
    {Knob::kIbHca, "NCCL_IB_HCA", Type::kString, "",
     "RDMA devices (and ports) the RDMA transport may use: prefix list rxe,mlx5_0:1; = exact names; ^ excludes"},
    {Knob::kIbDisable, "NCCL_IB_DISABLE", Type::kBool, "0", "1 = never use the RDMA transport (TCP between hosts)"},
    {Knob::kIbGidIndex, "NCCL_IB_GID_INDEX", Type::kInt, "-1",
     "RoCE: the GID index whose IPv4 address each RDMA device is used through; -1 = the first IPv4 address of the "
     "device's interface (rdma_cm then picks the GID)"},
    {Knob::kNet, "NCCL_NET", Type::kString, "",
     "network transport between hosts: IB (RDMA; init fails without a usable device) or Socket (TCP); empty = RDMA "
     "where both ranks have a device, else TCP"},
    // 1-31: the field has 5 bits, and 0, which the verbs read as "retransmit forever", would let a
    // dead link hang a lane (NCCL passes 0 through; every wait of ours is bounded).
    {Knob::kIbTimeout, "NCCL_IB_TIMEOUT", Type::kInt, "20",
     "RDMA retransmission timeout: 4.096 us * 2^value per try, 7 tries (20: about 4 s, NCCL's default for large "
     "fabrics); 1-31",
     /*secret=*/false, /*minValue=*/1, /*maxValue=*/31},
    {Knob::kIbZcopyMin, "MIXCCL_IB_ZCOPY_MIN", Type::kInt, "65536",
     "smallest RDMA message sent zero-copy (the receiver reads it from the sender's buffer) when the buffers are "
     "registered with ncclCommRegister; smaller ones, and unregistered buffers, are copied through slots"},
    {Knob::kIbRegCache, "MIXCCL_IB_REG_CACHE", Type::kInt, "4294967296",
     "bytes of registered user memory the RDMA transport keeps pinned per communicator and device; the least "
     "recently used regions beyond it are unpinned, and a larger one is sent through slots"},
    // At least 1: a zero or negative timeout would fail every wait the moment it had to wait.
    {Knob::kTimeout, "MIXCCL_TIMEOUT", Type::kInt, "1800",
     "seconds any blocking wait may last before it fails with ncclRemoteError; 1 to 10^9 (about 31 years)",
     /*secret=*/false, /*minValue=*/1, /*maxValue=*/kMaxTimeoutSeconds},
    {Knob::kChunkSize, "MIXCCL_CHUNK_SIZE", Type::kInt, "524288", "bytes per message slot of a connection"},
    {Knob::kFifoDepth, "MIXCCL_FIFO_DEPTH", Type::kInt, "8", "message slots per connection"},
    {Knob::kSpinCount, "MIXCCL_SPIN_COUNT", Type::kInt, "-1",
     "polls of an idle wait before yielding the CPU; -1 = automatic (long when every local rank has a core)"},
    {Knob::kQueueDepth, "MIXCCL_QUEUE_DEPTH", Type::kInt, "64",
     "collectives on device streams (a group counts once) that may wait in a communicator's queue besides the "
     "one its progress thread runs; a further call waits for room, as a full CUDA launch queue blocks the host"},
    {Knob::kHostId, "MIXCCL_HOST_ID", Type::kString, "",
     "host identity used to decide which ranks share memory (default: hostname + boot id)"},
    {Knob::kDumpOnSignal, "MIXCCL_DUMP_ON_SIGNAL", Type::kBool, "0",
     "1 = SIGUSR1 makes every communicator of the process log a hang report (docs/DEBUGGING.md)"},
    {Knob::kCommSecret, "MIXCCL_COMM_SECRET", Type::kString, "",
     "shared secret of a job that rendezvouses through NCCL_COMM_ID (the same random string on every rank; "
     "mixcclrun sets one)",
     /*secret=*/true},
    // 20 s: TCP retransmits after 0.2, 0.6, 1.4, 3.0, 6.2, 12.6 s, so a connection carrying data
    // survives a link flap of up to ~12 s and an idle one (keepalive probes every 5 s) up to ~15 s;
    // a dead link still fails every waiting rank well within 30 s.
    {Knob::kNetTimeout, "MIXCCL_NET_TIMEOUT", Type::kInt, "20",
     "seconds a TCP peer (bootstrap or transport) may acknowledge nothing, keepalive probes included, before "
     "it counts as unreachable; rides out 5-10 s link flaps; 0 = leave it to the kernel (minutes)"},
    {Knob::kDeviceBackend, "MIXCCL_DEVICE_BACKEND", Type::kString, "host",
     "the device backend of this process: host, opencl, cuda (when built in) or the path of a plugin .so "
     "(include/mixccl/device_backend.h; a path contains '/'); chosen once per process"},
    {Knob::kOpenclDevice, "MIXCCL_OPENCL_DEVICE", Type::kString, "0:0",
     "platform:device indexes (as clinfo -l lists them) of the device the OpenCL backend uses"},
    {Knob::kOpenclSvm, "MIXCCL_OPENCL_SVM", Type::kString, "coarse",
     "SVM kind of device buffers the OpenCL backend allocates: coarse or fine (fine needs device support)"},
    {Knob::kOpenclHostMemory, "MIXCCL_OPENCL_HOST_MEMORY", Type::kString, "auto",
     "how OpenCL commands reach registered host memory (the transports' slots): auto = through zero-copy buffers "
     "where the device shares host memory (a CPU, an integrated GPU), through copies to and from device memory "
     "elsewhere; staged = through copies always, as on a discrete GPU (runs that path on a CPU device)"},
    {Knob::kDeterministic, "MIXCCL_DETERMINISTIC", Type::kBool, "0",
     "1 = AllReduce, ReduceScatter and Reduce fold every element over ranks 0..p-1 in rank order: bitwise the same "
     "result whatever the algorithm, size, chunking or transport (docs/TUNING.md has the cost); the same on every "
     "rank"},
    // As NCCL's envConfigOverride: 0 or 1 replaces what the config (or its default) says; any other
    // value leaves the config's choice.
    {Knob::kCommBlocking, "NCCL_COMM_BLOCKING", Type::kInt, "-1",
     "1 = every communicator is blocking, 0 = non-blocking, whatever ncclConfig_t.blocking says (also for "
     "ncclCommInitRank without a config, splits and shrinks); other values leave the config's choice"},
};
static_assert(std::size(kTable) == static_cast<size_t>(Knob::kCount_), "every knob needs a table row");

struct Cache {
  std::once_flag once;
  // Set (release) once load() finished: the getters' fast path. std::call_once alone costs two
  // thread-local stores (libstdc++ passes the callable through TLS) on every call, and a small
  // collective reads several knobs.
  std::atomic<bool> loaded{false};
  std::array<std::string, std::size(kTable)> strings;
  std::array<int64_t, std::size(kTable)> ints{};
  std::array<bool, std::size(kTable)> isDefault{};
  // The cache this one replaced (resetForTesting). Kept, and reachable from gCache so leak
  // checkers do not report it: a racing reader may still hold a reference into it.
  Cache* replaced = nullptr;
};

// Never freed on purpose: knobs are read from destructors at exit. Atomic: resetForTesting() may
// swap it while a library thread (a detached bootstrap root) reads knobs; the replaced caches stay.
std::atomic<Cache*> gCache{new Cache()};
std::mutex gResetMutex;

// Base 0 as NCCL's parameters: 0x.. is hex, a leading 0 octal. A number beyond int64 is no
// number (NCCL also falls back to the default on ERANGE), rather than silently INT64_MAX/MIN.
// The first getter may run between a failed call and the caller's read of errno: keep it.
int64_t parseInt(const char* text, bool* okOut) {
  const int savedErrno = errno;
  char* end = nullptr;
  errno = 0;
  long long v = strtoll(text, &end, 0);
  *okOut = end != text && *end == '\0' && errno != ERANGE;
  errno = savedErrno;
  return v;
}

// A knob's environment variable when it is set to something, else nullptr (empty means unset).
const char* envValue(const KnobDecl& d) {
  const char* env = getenv(d.env);
  return env != nullptr && *env != '\0' ? env : nullptr;
}

void load(Cache* c) {
  for (size_t i = 0; i < std::size(kTable); ++i) {
    const KnobDecl& d = kTable[i];
    const char* env = envValue(d);
    const bool useEnv = env != nullptr;
    c->strings[i] = useEnv ? env : d.defaultValue;
    c->isDefault[i] = !useEnv || c->strings[i] == d.defaultValue;
    if (d.type != Type::kString) {
      bool parsed = false;
      int64_t v = parseInt(c->strings[i].c_str(), &parsed);
      if (!parsed) {
        bool dummy;
        v = parseInt(d.defaultValue, &dummy);
        fprintf(stderr, "mixccl: ignoring %s=%s (not a 64-bit integer), using %s\n", d.env, d.secret ? "(hidden)" : env,
                d.defaultValue);
        c->strings[i] = d.defaultValue;
        c->isDefault[i] = true;
      } else if (v < d.minValue || v > d.maxValue) {
        const int64_t clamped = v < d.minValue ? d.minValue : d.maxValue;
        fprintf(stderr, "mixccl: %s=%s is out of range (%lld..%lld), using %lld\n", d.env, d.secret ? "(hidden)" : env,
                static_cast<long long>(d.minValue), static_cast<long long>(d.maxValue),
                static_cast<long long>(clamped));
        v = clamped;
        c->strings[i] = std::to_string(v);
      }
      c->ints[i] = d.type == Type::kBool ? (v != 0) : v;
    }
  }
}

Cache& cache() {
  Cache* c = gCache.load(std::memory_order_acquire);
  if (c->loaded.load(std::memory_order_acquire)) return *c;
  std::call_once(c->once, [c] {
    load(c);
    c->loaded.store(true, std::memory_order_release);
  });
  return *c;
}

}  // namespace

int64_t getInt(Knob k) { return cache().ints[static_cast<size_t>(k)]; }
bool getBool(Knob k) { return cache().ints[static_cast<size_t>(k)] != 0; }
const std::string& getString(Knob k) { return cache().strings[static_cast<size_t>(k)]; }
const char* name(Knob k) { return kTable[static_cast<size_t>(k)].env; }
const char* defaultValue(Knob k) { return kTable[static_cast<size_t>(k)].defaultValue; }

std::string getStringFresh(Knob k) {
  const KnobDecl& d = kTable[static_cast<size_t>(k)];
  const char* env = envValue(d);
  return env != nullptr ? env : d.defaultValue;
}

void resetForTesting() {
  std::lock_guard<std::mutex> lock(gResetMutex);
  Cache* c = new Cache();
  c->replaced = gCache.load(std::memory_order_relaxed);
  gCache.store(c, std::memory_order_release);
  log::reinit();
}

void logNonDefaults() {
  static std::once_flag logged;
  std::call_once(logged, [] {
    Cache& c = cache();
    for (size_t i = 0; i < std::size(kTable); ++i) {
      if (c.isDefault[i]) continue;
      if (kTable[i].secret) {
        MIXCCL_INFO(log::kEnv, "%s set by environment (value hidden)", kTable[i].env);
      } else {
        MIXCCL_INFO(log::kEnv, "%s set by environment to %s", kTable[i].env, c.strings[i].c_str());
      }
    }
  });
}

}  // namespace mixccl::config
