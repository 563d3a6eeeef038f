// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// Bad input over every exported entry point. One table row per case: the entry point, a call with
// one bad argument (or one bad communicator state) and otherwise valid arguments, and the code an
// NCCL 2.28.9 user gets for it. One parameterised test runs every row and checks the exact code,
// that ncclGetLastError explains a failure (naming the call and what was wrong), that the call left
// no group open on the thread, and, by getting that far, that nothing crashed. A second test checks
// that the table reaches every symbol of tests/abi/nccl_2.28.9_exports.txt.
//
// The codes follow NCCL's own checks: a bad pointer or value is ncclInvalidArgument (NCCL's PtrCheck
// and ArgsCheck), ncclGroupEnd outside a group, work on a revoked communicator and a registration
// handle the communicator does not hold are ncclInvalidUsage, and NULL communicators are accepted
// where NCCL accepts them (destroy, abort, finalize, revoke). Rows whose code is a choice of ours
// say why just above them. mixccl differs from NCCL where NCCL's answer is undefined behaviour (a
// destroyed or aborted handle, a NULL buffer at count > 0, a pointer ncclMemAlloc never returned):
// those calls are refused, never followed.
//
// Valid arguments come from a 1-rank communicator made before each row, or a 2-rank one (both ranks
// driven from this thread) where a second rank is needed; every bad call fails before any
// communication, so nothing waits on a peer.

#include <gtest/gtest.h>
#include <nccl.h>

#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "common/result.h"
#include "mixccl/device_api.h"
#include "src/api/handle.h"
#include "src/core/group.h"
#include "tests/support/env_guard.h"

namespace mixccl::testing {
namespace {

// The arguments a row starts from, and places for what its call hands back.
struct Env {
  ncclComm_t comm = nullptr;  // live 1-rank communicator
  ncclComm_t pairComms[2] = {nullptr, nullptr};
  float buf[64] = {};
  float out[64] = {};
  double scalar = 2;
  int exclude[1] = {1};
  ncclUniqueId idStore[2];
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  ncclDevCommRequirements_t reqs = {};
  uint64_t devCommStorage[64] = {};  // stands in for the opaque ncclDevComm_t
  ncclTeam_t team = {1, 0, 1};
  ncclLsaBarrierHandle_t lsa = {};
  ncclGinBarrierHandle_t gin = {};
  ncclLLA2AHandle_t a2a = {};
  ncclDevResourceRequirements_t req = {};
  // Outputs. A communicator made despite a bad argument, and a registration a row left, are
  // released after the row.
  ncclComm_t made = nullptr;
  void* handle = nullptr;
  ncclComm_t handleComm = nullptr;
  ncclWindow_t win = nullptr;
  ncclRedOp_t op = ncclSum;
  ncclResult_t async = ncclSuccess;
  int value = 0;

  ncclUniqueId id() {
    ncclUniqueId u;
    EXPECT_EQ(ncclGetUniqueId(&u), ncclSuccess) << ncclGetLastError(nullptr);
    return u;
  }
  // n fresh ids in a row, for ncclCommInitRankScalable.
  ncclUniqueId* ids(int n = 1) {
    for (int i = 0; i < n; ++i) idStore[i] = id();
    return idStore;
  }
  ncclConfig_t* badMagic() {
    config.magic = 0;
    return &config;
  }
  ncclDevComm_t* devComm() { return reinterpret_cast<ncclDevComm_t*>(devCommStorage); }
  // `comm` after ncclCommDestroy / ncclCommAbort: a stale handle (no communicator is created
  // between here and the row's call, so the address cannot have been reused).
  ncclComm_t destroyed() {
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
    ncclComm_t stale = comm;
    comm = nullptr;
    return stale;
  }
  ncclComm_t aborted() {
    EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
    ncclComm_t stale = comm;
    comm = nullptr;
    return stale;
  }
  ncclComm_t revoked() {
    EXPECT_EQ(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT), ncclSuccess) << ncclGetLastError(comm);
    return comm;
  }
  ncclComm_t finalized() {
    EXPECT_EQ(ncclCommFinalize(comm), ncclSuccess) << ncclGetLastError(comm);
    return comm;
  }
  // A 2-rank communicator; rank r is pair()[r].
  ncclComm_t* pair() {
    if (pairComms[0] == nullptr) {
      EXPECT_EQ(ncclCommInitAll(pairComms, 2, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
    }
    return pairComms;
  }
  // A PreMulSum operator of `comm` that has been destroyed again.
  ncclRedOp_t destroyedOp() {
    EXPECT_EQ(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, comm), ncclSuccess);
    EXPECT_EQ(ncclRedOpDestroy(op, comm), ncclSuccess);
    return op;
  }
  // buf registered with `c`.
  void* registered(ncclComm_t c) {
    EXPECT_EQ(ncclCommRegister(c, buf, sizeof(buf), &handle), ncclSuccess) << ncclGetLastError(nullptr);
    handleComm = c;
    return handle;
  }
  void* deregistered() {
    void* h = registered(comm);
    EXPECT_EQ(ncclCommDeregister(comm, h), ncclSuccess);
    handle = nullptr;
    return h;
  }
  ncclWindow_t window() {
    EXPECT_EQ(ncclCommWindowRegister(comm, buf, sizeof(buf), &win, NCCL_WIN_DEFAULT), ncclSuccess);
    return win;
  }
  ncclWindow_t deregisteredWindow() {
    ncclWindow_t w = window();
    EXPECT_EQ(ncclCommWindowDeregister(comm, w), ncclSuccess);
    win = nullptr;
    return w;
  }
};

using Call = std::function<ncclResult_t(Env&)>;

struct Row {
  std::string entry;  // the exported function the row calls
  std::string what;   // what is wrong, CamelCase (the test is named entry_what)
  Call call;
  ncclResult_t expected;
  // Words ncclGetLastError must contain after a failure, besides the entry point's name.
  std::vector<std::string> mentions;
};

// gtest prints the parameter of a failed test; the row's name says it all.
void PrintTo(const Row& row, std::ostream* os) { *os << row.entry << " " << row.what; }

// The entry point's NCCL name: messages name ncclX also when pncclX was called.
std::string baseName(const std::string& entry) { return entry.rfind("pnccl", 0) == 0 ? entry.substr(1) : entry; }

struct Rows {
  std::vector<Row> all;
  void operator()(const char* entry, const char* what, Call call, ncclResult_t code,
                  std::vector<std::string> mentions) {
    all.push_back({entry, what, std::move(call), code, std::move(mentions)});
  }
};

const char* const kStale = "not a live communicator";  // the message for a destroyed or aborted handle

// ---- Collectives and point-to-point ----------------------------------------------------------

struct Coll {
  const char* name;
  bool hasOp, hasRoot, p2p, hasSend, hasRecv;
  // (sendbuff, recvbuff, count, datatype, op, root-or-peer, comm)
  std::function<ncclResult_t(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t)> call;
};

std::vector<Coll> collectives() {
  using T = ncclDataType_t;
  using O = ncclRedOp_t;
  return {
      {"ncclAllReduce", true, false, false, true, true,
       [](const void* s, void* r, size_t n, T t, O op, int, ncclComm_t c) {
         return ncclAllReduce(s, r, n, t, op, c, nullptr);
       }},
      {"ncclReduce", true, true, false, true, true,
       [](const void* s, void* r, size_t n, T t, O op, int root, ncclComm_t c) {
         return ncclReduce(s, r, n, t, op, root, c, nullptr);
       }},
      {"ncclBroadcast", false, true, false, true, true,
       [](const void* s, void* r, size_t n, T t, O, int root, ncclComm_t c) {
         return ncclBroadcast(s, r, n, t, root, c, nullptr);
       }},
      // In place: its one buffer stands in the send slot.
      {"ncclBcast", false, true, false, true, false,
       [](const void* s, void*, size_t n, T t, O, int root, ncclComm_t c) {
         return ncclBcast(const_cast<void*>(s), n, t, root, c, nullptr);
       }},
      {"ncclAllGather", false, false, false, true, true,
       [](const void* s, void* r, size_t n, T t, O, int, ncclComm_t c) {
         return ncclAllGather(s, r, n, t, c, nullptr);
       }},
      {"ncclReduceScatter", true, false, false, true, true,
       [](const void* s, void* r, size_t n, T t, O op, int, ncclComm_t c) {
         return ncclReduceScatter(s, r, n, t, op, c, nullptr);
       }},
      {"ncclAlltoAll", false, false, false, true, true,
       [](const void* s, void* r, size_t n, T t, O, int, ncclComm_t c) {
         return ncclAlltoAll(s, r, n, t, c, nullptr);
       }},
      {"ncclGather", false, true, false, true, true,
       [](const void* s, void* r, size_t n, T t, O, int root, ncclComm_t c) {
         return ncclGather(s, r, n, t, root, c, nullptr);
       }},
      {"ncclScatter", false, true, false, true, true,
       [](const void* s, void* r, size_t n, T t, O, int root, ncclComm_t c) {
         return ncclScatter(s, r, n, t, root, c, nullptr);
       }},
      {"ncclSend", false, true, true, true, false,
       [](const void* s, void*, size_t n, T t, O, int peer, ncclComm_t c) {
         return ncclSend(s, n, t, peer, c, nullptr);
       }},
      {"ncclRecv", false, true, true, false, true,
       [](const void*, void* r, size_t n, T t, O, int peer, ncclComm_t c) {
         return ncclRecv(r, n, t, peer, c, nullptr);
       }},
  };
}

// The valid call: 1 float32 from buf to out, Sum, root/peer 0, on the 1-rank communicator. Each
// row changes one of these.
struct Args {
  const void* send;
  void* recv;
  size_t count = 1;
  ncclDataType_t type = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  int root = 0;
  ncclComm_t comm;
};

void addCollectiveRows(Rows& rows) {
  for (const Coll& k : collectives()) {
    auto add = [&](const char* what, std::function<void(Env&, Args&)> change, ncclResult_t code,
                   std::vector<std::string> mentions) {
      auto fn = k.call;
      rows(
          k.name, what,
          [fn, change](Env& e) {
            Args a{e.buf, e.out, 1, ncclFloat32, ncclSum, 0, e.comm};
            change(e, a);
            return fn(a.send, a.recv, a.count, a.type, a.op, a.root, a.comm);
          },
          code, mentions);
    };
    const char* rootWord = k.p2p ? "peer" : "root";
    // The valid call itself, to show the rows differ from it in one thing only (a send or a
    // receive alone would wait for its partner).
    if (!k.p2p) add("Valid", [](Env&, Args&) {}, ncclSuccess, {});
    add("NullComm", [](Env&, Args& a) { a.comm = nullptr; }, ncclInvalidArgument, {"comm"});
    // NCCL frees the communicator: using it afterwards is undefined there; mixccl's handle table
    // recognises the stale handle and refuses it as an invalid argument.
    add("DestroyedComm", [](Env& e, Args& a) { a.comm = e.destroyed(); }, ncclInvalidArgument, {kStale});
    add("AbortedComm", [](Env& e, Args& a) { a.comm = e.aborted(); }, ncclInvalidArgument, {kStale});
    // NCCL's enqueue check refuses a revoked communicator with ncclInvalidUsage.
    add("RevokedComm", [](Env& e, Args& a) { a.comm = e.revoked(); }, ncclInvalidUsage, {"revoked"});
    // A finalized communicator can only be destroyed: work on it is misuse, as on a revoked one.
    add("FinalizedComm", [](Env& e, Args& a) { a.comm = e.finalized(); }, ncclInvalidUsage, {"finalized"});
    // NCCL dereferences NULL buffers on the device (or refuses them as invalid arguments with
    // NCCL_CHECK_POINTERS=1); with host memory it would crash, so mixccl always refuses them.
    if (k.hasSend) add("NullSendbuff", [](Env&, Args& a) { a.send = nullptr; }, ncclInvalidArgument, {"buff"});
    if (k.hasRecv) add("NullRecvbuff", [](Env&, Args& a) { a.recv = nullptr; }, ncclInvalidArgument, {"recvbuff"});
    add("DatatypeNumTypes", [](Env&, Args& a) { a.type = ncclNumTypes; }, ncclInvalidArgument, {"datatype"});
    add("DatatypeNegative", [](Env&, Args& a) { a.type = static_cast<ncclDataType_t>(-1); }, ncclInvalidArgument,
        {"datatype"});
    if (k.hasOp) {
      add("OpNegative", [](Env&, Args& a) { a.op = static_cast<ncclRedOp_t>(-1); }, ncclInvalidArgument,
          {"reduction op"});
      // ncclNumOps is the first handle of user operators: with none created it names nothing.
      add("OpNumOpsNotCreated", [](Env&, Args& a) { a.op = ncclNumOps; }, ncclInvalidArgument, {"reduction op"});
      add("OpDestroyedPreMulSum", [](Env& e, Args& a) { a.op = e.destroyedOp(); }, ncclInvalidArgument,
          {"reduction op"});
      add("OpPreMulSumOfOtherDatatype",
          [](Env& e, Args& a) {
            EXPECT_EQ(ncclRedOpCreatePreMulSum(&a.op, &e.scalar, ncclFloat64, ncclScalarHostImmediate, e.comm),
                      ncclSuccess);
          },
          ncclInvalidArgument, {"datatype"});
    }
    if (k.hasRoot) {
      add("RootNegative", [](Env&, Args& a) { a.root = -1; }, ncclInvalidArgument, {rootWord});
      add("RootIsNranks", [](Env&, Args& a) { a.root = 1; }, ncclInvalidArgument, {rootWord});
      add("RootIsNranksOf2Ranks",
          [](Env& e, Args& a) {
            a.comm = e.pair()[0];
            a.root = 2;
          },
          ncclInvalidArgument, {rootWord, "2"});
    }
    // count * sizeof(float) wraps around size_t.
    add("CountBytesOverflow", [](Env&, Args& a) { a.count = SIZE_MAX / 2; }, ncclInvalidArgument, {"count"});
    // 2^63 bytes fit in size_t but in no process's address space; NCCL would let the device fault.
    add("CountBeyondAddressSpace", [](Env&, Args& a) { a.count = size_t{1} << 61; }, ncclInvalidArgument, {"count"});
  }
}

// ---- Communicator creation -------------------------------------------------------------------

// A 128-byte id filled with `fill`, or with pseudo-random bytes when fill < 0.
ncclUniqueId filledId(int fill) {
  ncclUniqueId id;
  for (size_t i = 0; i < sizeof(id.internal); ++i) {
    id.internal[i] = static_cast<char>(fill >= 0 ? fill : (i * 2654435761u) >> 13);
  }
  return id;
}

// ncclCommInitRankConfig of rank 0 of 1 with a fresh id and NCCL_CONFIG_INITIALIZER changed by `change`.
Call initWithConfig(std::function<void(ncclConfig_t&)> change) {
  return [change](Env& e) {
    change(e.config);
    e.made = reinterpret_cast<ncclComm_t>(0x1);
    ncclResult_t r = ncclCommInitRankConfig(&e.made, 1, e.id(), 0, &e.config);
    if (r != ncclSuccess) {
      EXPECT_EQ(e.made, nullptr) << "a failed init must leave *comm NULL";
    }
    return r;
  };
}

void addInitRows(Rows& add) {
  ncclComm_t* const kNoOut = nullptr;
  add("ncclGetVersion", "NullVersion", [](Env&) { return ncclGetVersion(nullptr); }, ncclInvalidArgument, {"version"});
  add("ncclGetUniqueId", "NullUniqueId", [](Env&) { return ncclGetUniqueId(nullptr); }, ncclInvalidArgument,
      {"uniqueId"});

  add("ncclCommInitRank", "NullComm", [kNoOut](Env& e) { return ncclCommInitRank(kNoOut, 1, e.id(), 0); },
      ncclInvalidArgument, {"comm"});
  add("ncclCommInitRank", "NranksZero", [](Env& e) { return ncclCommInitRank(&e.made, 0, e.id(), 0); },
      ncclInvalidArgument, {"nranks"});
  add("ncclCommInitRank", "NranksNegative", [](Env& e) { return ncclCommInitRank(&e.made, -3, e.id(), 0); },
      ncclInvalidArgument, {"nranks"});
  add("ncclCommInitRank", "RankNegative", [](Env& e) { return ncclCommInitRank(&e.made, 2, e.id(), -1); },
      ncclInvalidArgument, {"rank -1"});
  add("ncclCommInitRank", "RankIsNranks", [](Env& e) { return ncclCommInitRank(&e.made, 2, e.id(), 2); },
      ncclInvalidArgument, {"rank 2"});
  add("ncclCommInitRank", "RandomBytesId", [](Env& e) { return ncclCommInitRank(&e.made, 1, filledId(-1), 0); },
      ncclInvalidArgument, {"ncclUniqueId"});
  add("ncclCommInitRank", "ZeroedId", [](Env& e) { return ncclCommInitRank(&e.made, 1, filledId(0), 0); },
      ncclInvalidArgument, {"ncclUniqueId"});
  // A mixccl id of another bootstrap protocol version (bytes 4..7) comes from a build that cannot
  // talk to this one: the arguments are well formed, running mismatched builds is the misuse.
  add("ncclCommInitRank", "IdOfOtherProtocolVersion",
      [](Env& e) {
        ncclUniqueId id = e.id();
        id.internal[4] ^= 0x7f;
        return ncclCommInitRank(&e.made, 1, id, 0);
      },
      ncclInvalidUsage, {"ncclUniqueId", "protocol"});
  // A well-formed id whose root nobody serves (port 1 on the loopback refuses connections): the
  // init gives up after MIXCCL_TIMEOUT with the network error NCCL reports for an unreachable root.
  add("ncclCommInitRank", "IdOfUnreachableRoot",
      [](Env& e) {
        EnvGuard timeout("MIXCCL_TIMEOUT", "1");
        ncclUniqueId id;
        {
          EnvGuard commId("NCCL_COMM_ID", "127.0.0.1:1");
          EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
        }
        auto start = std::chrono::steady_clock::now();
        ncclResult_t r = ncclCommInitRank(&e.made, 2, id, 1);
        EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
        return r;
      },
      ncclRemoteError, {"root"});

  add("ncclCommInitRankConfig", "NullComm",
      [kNoOut](Env& e) { return ncclCommInitRankConfig(kNoOut, 1, e.id(), 0, &e.config); }, ncclInvalidArgument,
      {"comm"});
  add("ncclCommInitRankConfig", "RankIsNranks",
      [](Env& e) { return ncclCommInitRankConfig(&e.made, 1, e.id(), 1, &e.config); }, ncclInvalidArgument, {"rank 1"});
  add("ncclCommInitRankConfig", "CorruptId",
      [](Env& e) { return ncclCommInitRankConfig(&e.made, 1, filledId(0xa5), 0, &e.config); }, ncclInvalidArgument,
      {"ncclUniqueId"});
  // The ncclConfig_t header and fields: NCCL's parseCommConfig refuses the same values.
  using C = ncclConfig_t&;
  add("ncclCommInitRankConfig", "ConfigBadMagic", initWithConfig([](C c) { c.magic = 0x12345678; }),
      ncclInvalidArgument, {"magic"});
  // NCCL copies min(size, its sizeof) bytes: a size too small to hold the magic leaves it unset,
  // which NCCL refuses as an uninitialised config.
  add("ncclCommInitRankConfig", "ConfigSizeZero", initWithConfig([](C c) { c.size = 0; }), ncclInvalidArgument,
      {"size"});
  add("ncclCommInitRankConfig", "ConfigSizeOfHeaderOnly", initWithConfig([](C c) { c.size = 8; }), ncclInvalidArgument,
      {"size"});
  // A size that holds the magic but not the version reads as the current version, the other
  // fields as unset.
  add("ncclCommInitRankConfig", "ConfigSizeOfMagicOnly", initWithConfig([](C c) { c.size = 12; }), ncclSuccess, {});
  // An old version is accepted, and the fields it predates keep their defaults, whatever they hold.
  add("ncclCommInitRankConfig", "ConfigVersionZero", initWithConfig([](C c) { c.version = 0; }), ncclSuccess, {});
  add("ncclCommInitRankConfig", "ConfigVersionBefore2_14", initWithConfig([](C c) { c.version = 21399; }), ncclSuccess,
      {});
  add("ncclCommInitRankConfig", "ConfigVersion2_16IgnoresMinCTAs",
      initWithConfig([](C c) { c.version = 21600, c.minCTAs = 0; }), ncclSuccess, {});
  add("ncclCommInitRankConfig", "ConfigVersion2_27IgnoresNChannelsPerNetPeer",
      initWithConfig([](C c) { c.version = 22700, c.nChannelsPerNetPeer = 1000; }), ncclSuccess, {});
  add("ncclCommInitRankConfig", "ConfigVersion2_27ChecksCTAPolicy",
      initWithConfig([](C c) { c.version = 22700, c.CTAPolicy = 3; }), ncclInvalidArgument, {"CTAPolicy"});
  add("ncclCommInitRankConfig", "ConfigBlockingTwo", initWithConfig([](C c) { c.blocking = 2; }), ncclInvalidArgument,
      {"blocking"});
  add("ncclCommInitRankConfig", "ConfigCgaClusterSizeNegative", initWithConfig([](C c) { c.cgaClusterSize = -5; }),
      ncclInvalidArgument, {"cgaClusterSize"});
  add("ncclCommInitRankConfig", "ConfigMinCTAsZero", initWithConfig([](C c) { c.minCTAs = 0; }), ncclInvalidArgument,
      {"minCTAs"});
  add("ncclCommInitRankConfig", "ConfigMaxCTAsNegative", initWithConfig([](C c) { c.maxCTAs = -3; }),
      ncclInvalidArgument, {"maxCTAs"});
  add("ncclCommInitRankConfig", "ConfigMinCTAsAboveMaxCTAs", initWithConfig([](C c) { c.minCTAs = 8, c.maxCTAs = 4; }),
      ncclInvalidArgument, {"minCTAs"});
  // NCCL compares minCTAs with the unset maxCTAs (INT_MIN) as it is, so minCTAs alone is refused.
  add("ncclCommInitRankConfig", "ConfigMinCTAsWithoutMaxCTAs", initWithConfig([](C c) { c.minCTAs = 4; }),
      ncclInvalidArgument, {"maxCTAs"});
  add("ncclCommInitRankConfig", "ConfigMaxCTAsWithoutMinCTAs", initWithConfig([](C c) { c.maxCTAs = 4; }), ncclSuccess,
      {});
  add("ncclCommInitRankConfig", "ConfigSplitShareTwo", initWithConfig([](C c) { c.splitShare = 2; }),
      ncclInvalidArgument, {"splitShare"});
  add("ncclCommInitRankConfig", "ConfigCollnetEnableTwo", initWithConfig([](C c) { c.collnetEnable = 2; }),
      ncclInvalidArgument, {"collnetEnable"});
  add("ncclCommInitRankConfig", "ConfigCTAPolicyUnknownBits", initWithConfig([](C c) { c.CTAPolicy = 64; }),
      ncclInvalidArgument, {"CTAPolicy"});
  // NCCL takes CTAPolicy as one value up to NCCL_CTA_POLICY_ZERO, not as a set of flags.
  add("ncclCommInitRankConfig", "ConfigCTAPolicyEfficiencyAndZero",
      initWithConfig([](C c) { c.CTAPolicy = NCCL_CTA_POLICY_EFFICIENCY | NCCL_CTA_POLICY_ZERO; }), ncclInvalidArgument,
      {"CTAPolicy"});
  add("ncclCommInitRankConfig", "ConfigCTAPolicyZero", initWithConfig([](C c) { c.CTAPolicy = NCCL_CTA_POLICY_ZERO; }),
      ncclSuccess, {});
  add("ncclCommInitRankConfig", "ConfigShrinkShareNegative", initWithConfig([](C c) { c.shrinkShare = -7; }),
      ncclInvalidArgument, {"shrinkShare"});
  add("ncclCommInitRankConfig", "ConfigNvlsCTAsZero", initWithConfig([](C c) { c.nvlsCTAs = 0; }), ncclInvalidArgument,
      {"nvlsCTAs"});
  add("ncclCommInitRankConfig", "ConfigNChannelsPerNetPeerZero", initWithConfig([](C c) { c.nChannelsPerNetPeer = 0; }),
      ncclInvalidArgument, {"nChannelsPerNetPeer"});
  // NCCL's limit is its channel count, MAXCHANNELS (64).
  add("ncclCommInitRankConfig", "ConfigNChannelsPerNetPeerAboveMaxChannels",
      initWithConfig([](C c) { c.nChannelsPerNetPeer = 65; }), ncclInvalidArgument, {"nChannelsPerNetPeer"});
  add("ncclCommInitRankConfig", "ConfigNChannelsPerNetPeerMaxChannels",
      initWithConfig([](C c) { c.nChannelsPerNetPeer = 64; }), ncclSuccess, {});
  add("ncclCommInitRankConfig", "ConfigNvlinkCentricSchedThree", initWithConfig([](C c) { c.nvlinkCentricSched = 3; }),
      ncclInvalidArgument, {"nvlinkCentricSched"});

  add("ncclCommInitRankScalable", "NullNewcomm",
      [kNoOut](Env& e) { return ncclCommInitRankScalable(kNoOut, 1, 0, 1, e.ids(), nullptr); }, ncclInvalidArgument,
      {"comm"});
  add("ncclCommInitRankScalable", "NullCommIds",
      [](Env& e) { return ncclCommInitRankScalable(&e.made, 1, 0, 1, nullptr, nullptr); }, ncclInvalidArgument,
      {"commIds"});
  add("ncclCommInitRankScalable", "NIdZero",
      [](Env& e) { return ncclCommInitRankScalable(&e.made, 1, 0, 0, e.ids(), nullptr); }, ncclInvalidArgument,
      {"nId"});
  add("ncclCommInitRankScalable", "NIdAboveNranks",
      [](Env& e) { return ncclCommInitRankScalable(&e.made, 1, 0, 2, e.ids(2), nullptr); }, ncclInvalidArgument,
      {"nId"});
  add("ncclCommInitRankScalable", "RankNegative",
      [](Env& e) { return ncclCommInitRankScalable(&e.made, 1, -1, 1, e.ids(), nullptr); }, ncclInvalidArgument,
      {"rank -1"});
  add("ncclCommInitRankScalable", "CorruptId",
      [](Env& e) {
        e.idStore[0] = filledId(-1);
        return ncclCommInitRankScalable(&e.made, 1, 0, 1, e.idStore, nullptr);
      },
      ncclInvalidArgument, {"ncclUniqueId"});
  add("ncclCommInitRankScalable", "ConfigBadMagic",
      [](Env& e) { return ncclCommInitRankScalable(&e.made, 1, 0, 1, e.ids(), e.badMagic()); }, ncclInvalidArgument,
      {"magic"});

  add("ncclCommInitAll", "NullComms", [kNoOut](Env&) { return ncclCommInitAll(kNoOut, 1, nullptr); },
      ncclInvalidArgument, {"comms"});
  add("ncclCommInitAll", "NdevNegative", [](Env& e) { return ncclCommInitAll(&e.made, -1, nullptr); },
      ncclInvalidArgument, {"ndev"});
  // As in NCCL: no ranks asked for, none made, and comms is left as it was.
  add("ncclCommInitAll", "NdevZero",
      [](Env& e) {
        e.made = reinterpret_cast<ncclComm_t>(0x1);
        const ncclResult_t r = ncclCommInitAll(&e.made, 0, nullptr);
        EXPECT_EQ(e.made, reinterpret_cast<ncclComm_t>(0x1)) << "ncclCommInitAll wrote comms[0] for ndev 0";
        return r;
      },
      ncclSuccess, {});
  add("ncclCommInitAll", "DevlistNegative",
      [](Env& e) {
        int devs[1] = {-1};
        return ncclCommInitAll(&e.made, 1, devs);
      },
      ncclInvalidArgument, {"devlist"});
  // NCCL's duplicate device check answers invalid usage.
  add("ncclCommInitAll", "DevlistDuplicate",
      [](Env& e) {
        ncclComm_t comms[3] = {};
        int devs[3] = {0, 1, 0};
        return ncclCommInitAll(comms, 3, devs);
      },
      ncclInvalidUsage, {"devlist[0] and devlist[2]", "device 0"});
}

// ---- Communicator life cycle and queries ----------------------------------------------------

// ncclCommShrink of rank 0 of the 2-rank communicator (or of the 1-rank one), excluding `excluded`
// (or passing a NULL list); *newcomm must stay NULL when it fails.
Call shrink(std::vector<int> excluded, int count, int flags, bool pair = true, bool nullList = false) {
  return [=](Env& e) mutable {
    ncclComm_t parent = pair ? e.pair()[0] : e.comm;
    e.made = reinterpret_cast<ncclComm_t>(0x1);
    ncclResult_t r = ncclCommShrink(parent, nullList ? nullptr : excluded.data(), count, &e.made, nullptr, flags);
    if (r != ncclSuccess) {
      EXPECT_EQ(e.made, nullptr) << "a failed shrink must leave *newcomm NULL";
    }
    return r;
  };
}

void addLifecycleRows(Rows& add) {
  ncclComm_t* const kNoOut = nullptr;
  add("ncclCommSplit", "NullComm", [](Env& e) { return ncclCommSplit(nullptr, 0, 0, &e.made, nullptr); },
      ncclInvalidArgument, {"comm"});
  add("ncclCommSplit", "NullNewcomm", [kNoOut](Env& e) { return ncclCommSplit(e.comm, 0, 0, kNoOut, nullptr); },
      ncclInvalidArgument, {"newcomm"});
  add("ncclCommSplit", "DestroyedComm", [](Env& e) { return ncclCommSplit(e.destroyed(), 0, 0, &e.made, nullptr); },
      ncclInvalidArgument, {kStale});
  // A revoked communicator may be split (NCCL's nccl.h; api_test.cc,
  // RevokedCommunicatorSplitsAndGroupedSplitErrorsReachGroupEnd); an aborted one is gone.
  // Negative colors other than NCCL_SPLIT_NOCOLOR (-1) mean nothing.
  add("ncclCommSplit", "ColorBelowNoColor", [](Env& e) { return ncclCommSplit(e.comm, -2, 0, &e.made, nullptr); },
      ncclInvalidArgument, {"color"});
  add("ncclCommSplit", "ConfigBadMagic", [](Env& e) { return ncclCommSplit(e.comm, 0, 0, &e.made, e.badMagic()); },
      ncclInvalidArgument, {"magic"});

  add("ncclCommShrink", "NullComm",
      [](Env& e) { return ncclCommShrink(nullptr, e.exclude, 1, &e.made, nullptr, NCCL_SHRINK_DEFAULT); },
      ncclInvalidArgument, {"comm"});
  add("ncclCommShrink", "NullNewcomm",
      [kNoOut](Env& e) { return ncclCommShrink(e.pair()[0], e.exclude, 1, kNoOut, nullptr, NCCL_SHRINK_DEFAULT); },
      ncclInvalidArgument, {"newcomm"});
  add("ncclCommShrink", "DestroyedComm",
      [](Env& e) { return ncclCommShrink(e.destroyed(), e.exclude, 1, &e.made, nullptr, NCCL_SHRINK_DEFAULT); },
      ncclInvalidArgument, {kStale});
  add("ncclCommShrink", "NullExcludeList", shrink({}, 1, NCCL_SHRINK_DEFAULT, true, true), ncclInvalidArgument,
      {"excludeRanksList"});
  // NCCL requires excludeRanksCount > 0: a shrink that excludes nobody is refused.
  add("ncclCommShrink", "ExcludeCountZero", shrink({1}, 0, NCCL_SHRINK_DEFAULT), ncclInvalidArgument,
      {"excludeRanksCount"});
  add("ncclCommShrink", "ExcludeCountNegative", shrink({1}, -1, NCCL_SHRINK_DEFAULT), ncclInvalidArgument,
      {"excludeRanksCount"});
  add("ncclCommShrink", "ExcludeRankOutOfRange", shrink({2}, 1, NCCL_SHRINK_DEFAULT), ncclInvalidArgument, {"rank 2"});
  // NCCL refuses a caller that appears in its own exclude list as an invalid argument.
  add("ncclCommShrink", "ExcludesCaller", shrink({0}, 1, NCCL_SHRINK_DEFAULT), ncclInvalidArgument, {"exclude"});
  add("ncclCommShrink", "ExcludesEveryRankOf1", shrink({0}, 1, NCCL_SHRINK_DEFAULT, false), ncclInvalidArgument,
      {"exclude"});
  add("ncclCommShrink", "UnknownFlags", shrink({1}, 1, 0x40), ncclInvalidArgument, {"shrinkFlags"});
  // A bad config must be refused before NCCL_SHRINK_ABORT touches the parent.
  add("ncclCommShrink", "ConfigBadMagicWithAbortFlag",
      [](Env& e) {
        ncclComm_t parent = e.pair()[0];
        ncclResult_t r = ncclCommShrink(parent, e.exclude, 1, &e.made, e.badMagic(), NCCL_SHRINK_ABORT);
        EXPECT_FALSE(parent->impl->revoked()) << "a refused shrink left its parent revoked";
        return r;
      },
      ncclInvalidArgument, {"magic"});

  // NCCL returns success for a NULL communicator in finalize, destroy, abort and revoke.
  add("ncclCommFinalize", "NullComm", [](Env&) { return ncclCommFinalize(nullptr); }, ncclSuccess, {});
  // NCCL: "prevent double finalize", with ncclInvalidArgument.
  add("ncclCommFinalize", "Twice", [](Env& e) { return ncclCommFinalize(e.finalized()); }, ncclInvalidArgument,
      {"finalize"});
  add("ncclCommFinalize", "DestroyedComm", [](Env& e) { return ncclCommFinalize(e.destroyed()); }, ncclInvalidArgument,
      {kStale});
  add("ncclCommDestroy", "NullComm", [](Env&) { return ncclCommDestroy(nullptr); }, ncclSuccess, {});
  add("ncclCommDestroy", "Twice", [](Env& e) { return ncclCommDestroy(e.destroyed()); }, ncclInvalidArgument, {kStale});
  add("ncclCommDestroy", "AfterAbort", [](Env& e) { return ncclCommDestroy(e.aborted()); }, ncclInvalidArgument,
      {kStale});
  add("ncclCommAbort", "NullComm", [](Env&) { return ncclCommAbort(nullptr); }, ncclSuccess, {});
  add("ncclCommAbort", "Twice", [](Env& e) { return ncclCommAbort(e.aborted()); }, ncclInvalidArgument, {kStale});
  add("ncclCommAbort", "AfterDestroy", [](Env& e) { return ncclCommAbort(e.destroyed()); }, ncclInvalidArgument,
      {kStale});
  add("ncclCommRevoke", "NullComm", [](Env&) { return ncclCommRevoke(nullptr, NCCL_REVOKE_DEFAULT); }, ncclSuccess, {});
  add("ncclCommRevoke", "UnknownFlags", [](Env& e) { return ncclCommRevoke(e.comm, 3); }, ncclInvalidArgument,
      {"revokeFlags"});
  // NCCL refuses a second revoke, and a revoke after finalize, as invalid arguments.
  add("ncclCommRevoke", "Twice", [](Env& e) { return ncclCommRevoke(e.revoked(), NCCL_REVOKE_DEFAULT); },
      ncclInvalidArgument, {"revoked"});
  add("ncclCommRevoke", "AfterFinalize", [](Env& e) { return ncclCommRevoke(e.finalized(), NCCL_REVOKE_DEFAULT); },
      ncclInvalidArgument, {"finalize"});
  add("ncclCommRevoke", "DestroyedComm", [](Env& e) { return ncclCommRevoke(e.destroyed(), NCCL_REVOKE_DEFAULT); },
      ncclInvalidArgument, {kStale});

  add("ncclCommGetAsyncError", "NullComm", [](Env& e) { return ncclCommGetAsyncError(nullptr, &e.async); },
      ncclInvalidArgument, {"comm"});
  add("ncclCommGetAsyncError", "NullAsyncError", [](Env& e) { return ncclCommGetAsyncError(e.comm, nullptr); },
      ncclInvalidArgument, {"asyncError"});
  add("ncclCommGetAsyncError", "DestroyedComm", [](Env& e) { return ncclCommGetAsyncError(e.destroyed(), &e.async); },
      ncclInvalidArgument, {kStale});
  struct Query {
    const char* name;
    ncclResult_t (*fn)(const ncclComm_t, int*);
    const char* out;
  };
  for (const Query& q :
       {Query{"ncclCommCount", ncclCommCount, "count"}, Query{"ncclCommCuDevice", ncclCommCuDevice, "device"},
        Query{"ncclCommUserRank", ncclCommUserRank, "rank"}}) {
    auto fn = q.fn;
    add(q.name, "NullComm", [fn](Env& e) { return fn(nullptr, &e.value); }, ncclInvalidArgument, {"comm"});
    add(q.name, "NullOut", [fn](Env& e) { return fn(e.comm, nullptr); }, ncclInvalidArgument, {q.out});
    add(q.name, "DestroyedComm", [fn](Env& e) { return fn(e.destroyed(), &e.value); }, ncclInvalidArgument, {kStale});
  }
  // Neither returns a code: the rows turn the answer into one. An unknown code gets NCCL's text.
  add("ncclGetErrorString", "UnknownCode",
      [](Env&) {
        const std::string unknown = "unknown result code";
        bool ok = ncclGetErrorString(static_cast<ncclResult_t>(-1)) == unknown &&
                  ncclGetErrorString(static_cast<ncclResult_t>(1000)) == unknown;
        return ok ? ncclSuccess : ncclInternalError;
      },
      ncclSuccess, {});
  // The comm argument is unused (as in NCCL): a garbage handle is not dereferenced.
  add("ncclGetLastError", "GarbageComm",
      [](Env&) { return ncclGetLastError(reinterpret_cast<ncclComm_t>(0x10)) ? ncclSuccess : ncclInternalError; },
      ncclSuccess, {});
}

// ---- Groups ---------------------------------------------------------------------------------

void addGroupRows(Rows& add) {
  add("ncclGroupEnd", "WithoutGroupStart", [](Env&) { return ncclGroupEnd(); }, ncclInvalidUsage, {"ncclGroupStart"});
  // NCCL keeps the error of a call made inside the group (the last one: ncclGroupErrCheck) and
  // returns it from ncclGroupEnd, without running the group's work.
  add("ncclGroupEnd", "AfterAFailedCallInTheGroup",
      [](Env& e) {
        EXPECT_EQ(ncclGroupStart(), ncclSuccess);
        EXPECT_EQ(ncclAllReduce(e.buf, e.out, 4, ncclFloat32, ncclSum, e.comm, nullptr), ncclSuccess);
        EXPECT_EQ(ncclAllReduce(nullptr, e.out, 4, ncclFloat32, ncclSum, e.comm, nullptr), ncclInvalidArgument);
        e.buf[0] = 42;
        ncclResult_t r = ncclGroupEnd();
        EXPECT_NE(e.out[0], 42) << "ncclGroupEnd ran the work of a failed group";
        return r;
      },
      ncclInvalidArgument, {"sendbuff"});
  // Two failed calls: the result is the last one's, as NCCL's; the message names both.
  add("ncclGroupEnd", "AfterTwoFailedCallsInTheGroup",
      [](Env& e) {
        ncclComm_t done = e.finalized();
        EXPECT_EQ(ncclGroupStart(), ncclSuccess);
        EXPECT_EQ(ncclAllReduce(e.buf, e.out, 4, ncclFloat32, ncclSum, nullptr, nullptr), ncclInvalidArgument);
        EXPECT_EQ(ncclAllReduce(e.buf, e.out, 4, ncclFloat32, ncclSum, done, nullptr), ncclInvalidUsage);
        return ncclGroupEnd();
      },
      ncclInvalidUsage, {"2 calls", "finalized", "comm is NULL"});
  add("ncclGroupSimulateEnd", "WithoutGroupStart", [](Env& e) { return ncclGroupSimulateEnd(&e.sim); },
      ncclInvalidUsage, {"ncclGroupStart"});
  add("ncclGroupSimulateEnd", "NullSimInfoWithoutGroupStart", [](Env&) { return ncclGroupSimulateEnd(nullptr); },
      ncclInvalidUsage, {"ncclGroupStart"});
  // NCCL ends the group (dropping its work) before it refuses the uninitialised simInfo.
  add("ncclGroupSimulateEnd", "SimInfoBadMagic",
      [](Env& e) {
        EXPECT_EQ(ncclGroupStart(), ncclSuccess);
        EXPECT_EQ(ncclAllReduce(e.buf, e.out, 4, ncclFloat32, ncclSum, e.comm, nullptr), ncclSuccess);
        e.sim.magic = 0;
        return ncclGroupSimulateEnd(&e.sim);
      },
      ncclInvalidArgument, {"magic"});
  // As in NCCL, only simInfo->size bytes are the caller's: a size short of the magic reads as
  // uninitialised, and a size short of estimatedTime leaves it unwritten.
  add("ncclGroupSimulateEnd", "SimInfoSizeZero",
      [](Env& e) {
        EXPECT_EQ(ncclGroupStart(), ncclSuccess);
        EXPECT_EQ(ncclAllReduce(e.buf, e.out, 4, ncclFloat32, ncclSum, e.comm, nullptr), ncclSuccess);
        e.sim.size = 0;
        return ncclGroupSimulateEnd(&e.sim);
      },
      ncclInvalidArgument, {"NCCL_SIM_INFO_INITIALIZER", "size 0"});
  add("ncclGroupSimulateEnd", "SimInfoSizeShortOfTheEstimate",
      [](Env& e) {
        EXPECT_EQ(ncclGroupStart(), ncclSuccess);
        EXPECT_EQ(ncclAllReduce(e.buf, e.out, 4, ncclFloat32, ncclSum, e.comm, nullptr), ncclSuccess);
        e.sim.size = offsetof(ncclSimInfo_t, estimatedTime);
        e.sim.estimatedTime = -7;
        ncclResult_t r = ncclGroupSimulateEnd(&e.sim);
        EXPECT_EQ(e.sim.estimatedTime, -7) << "wrote beyond simInfo->size";
        return r;
      },
      ncclSuccess, {});
}

// ---- Memory, registration, user operators ---------------------------------------------------

void addMemoryRows(Rows& add) {
  add("ncclMemAlloc", "NullPtr", [](Env&) { return ncclMemAlloc(nullptr, 64); }, ncclInvalidArgument, {"ptr"});
  // No host can provide SIZE_MAX bytes: the allocation fails as a system error, as out-of-memory does.
  add("ncclMemAlloc", "SizeMax",
      [](Env& e) {
        e.handle = reinterpret_cast<void*>(0x1);
        ncclResult_t r = ncclMemAlloc(&e.handle, SIZE_MAX);
        EXPECT_EQ(e.handle, nullptr);
        return r;
      },
      ncclSystemError, {"bytes"});
  add("ncclMemFree", "NullPtr", [](Env&) { return ncclMemFree(nullptr); }, ncclSuccess, {});
  // NCCL hands a foreign pointer to the CUDA runtime, which refuses it; free() would crash.
  add("ncclMemFree", "NotFromMemAlloc", [](Env& e) { return ncclMemFree(e.buf); }, ncclInvalidArgument, {"ptr"});
  add("ncclMemFree", "Twice",
      [](Env& e) {
        void* p = nullptr;
        EXPECT_EQ(ncclMemAlloc(&p, 64), ncclSuccess);
        EXPECT_EQ(ncclMemFree(p), ncclSuccess);
        return ncclMemFree(p);
      },
      ncclInvalidArgument, {"ptr"});

  const size_t kBytes = sizeof(Env::buf);
  add("ncclCommRegister", "NullComm", [=](Env& e) { return ncclCommRegister(nullptr, e.buf, kBytes, &e.handle); },
      ncclInvalidArgument, {"comm"});
  add("ncclCommRegister", "DestroyedComm",
      [=](Env& e) { return ncclCommRegister(e.destroyed(), e.buf, kBytes, &e.handle); }, ncclInvalidArgument, {kStale});
  add("ncclCommRegister", "NullHandle", [=](Env& e) { return ncclCommRegister(e.comm, e.buf, kBytes, nullptr); },
      ncclInvalidArgument, {"handle"});
  add("ncclCommRegister", "NullBuffWithSize", [](Env& e) { return ncclCommRegister(e.comm, nullptr, 64, &e.handle); },
      ncclInvalidArgument, {"buff"});
  add("ncclCommDeregister", "NullComm", [](Env& e) { return ncclCommDeregister(nullptr, e.registered(e.comm)); },
      ncclInvalidArgument, {"comm"});
  // NCCL hands out NULL handles where it does not register, and takes them back.
  add("ncclCommDeregister", "NullHandle", [](Env& e) { return ncclCommDeregister(e.comm, nullptr); }, ncclSuccess, {});
  add("ncclCommDeregister", "NullCommAndHandle", [](Env&) { return ncclCommDeregister(nullptr, nullptr); },
      ncclInvalidArgument, {"comm"});
  // A handle the communicator does not hold: NCCL's "Could not find handle", ncclInvalidUsage.
  add("ncclCommDeregister", "GarbageHandle", [](Env& e) { return ncclCommDeregister(e.comm, e.buf); }, ncclInvalidUsage,
      {"handle"});
  add("ncclCommDeregister", "Twice", [](Env& e) { return ncclCommDeregister(e.comm, e.deregistered()); },
      ncclInvalidUsage, {"handle"});
  add("ncclCommDeregister", "HandleOfAnotherComm",
      [](Env& e) { return ncclCommDeregister(e.pair()[1], e.registered(e.pair()[0])); }, ncclInvalidUsage, {"handle"});
  add("ncclCommDeregister", "HandleOfDestroyedComm",
      [](Env& e) {
        ncclComm_t other = nullptr;
        EXPECT_EQ(ncclCommInitAll(&other, 1, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
        void* h = e.registered(other);
        EXPECT_EQ(ncclCommDestroy(other), ncclSuccess);
        e.handle = nullptr;
        return ncclCommDeregister(e.comm, h);
      },
      ncclInvalidUsage, {"destroyed"});
  add("ncclCommWindowRegister", "NullComm",
      [=](Env& e) { return ncclCommWindowRegister(nullptr, e.buf, kBytes, &e.win, NCCL_WIN_DEFAULT); },
      ncclInvalidArgument, {"comm"});
  add("ncclCommWindowRegister", "NullWin",
      [=](Env& e) { return ncclCommWindowRegister(e.comm, e.buf, kBytes, nullptr, NCCL_WIN_DEFAULT); },
      ncclInvalidArgument, {"win"});
  add("ncclCommWindowRegister", "UnknownFlags",
      [=](Env& e) { return ncclCommWindowRegister(e.comm, e.buf, kBytes, &e.win, 0x80); }, ncclInvalidArgument,
      {"winFlags"});
  add("ncclCommWindowRegister", "NullBuffWithSize",
      [](Env& e) { return ncclCommWindowRegister(e.comm, nullptr, 4096, &e.win, NCCL_WIN_DEFAULT); },
      ncclInvalidArgument, {"buff"});
  // No bytes, no window: success with NULL, which deregisters as nothing (NCCL 2.28.9 registers
  // nothing there either).
  add("ncclCommWindowRegister", "SizeZero",
      [](Env& e) {
        e.win = reinterpret_cast<ncclWindow_t>(&e);  // must be overwritten
        ncclResult_t r = ncclCommWindowRegister(e.comm, e.buf, 0, &e.win, NCCL_WIN_DEFAULT);
        EXPECT_EQ(e.win, nullptr);
        EXPECT_EQ(ncclCommWindowDeregister(e.comm, e.win), ncclSuccess);
        return r;
      },
      ncclSuccess, {});
  add("ncclCommWindowDeregister", "NullComm", [](Env& e) { return ncclCommWindowDeregister(nullptr, e.window()); },
      ncclInvalidArgument, {"comm"});
  // NCCL returns for a NULL window before it looks at the communicator.
  add("ncclCommWindowDeregister", "NullWin", [](Env& e) { return ncclCommWindowDeregister(e.comm, nullptr); },
      ncclSuccess, {});
  add("ncclCommWindowDeregister", "NullCommAndWin", [](Env&) { return ncclCommWindowDeregister(nullptr, nullptr); },
      ncclSuccess, {});
  add("ncclCommWindowDeregister", "GarbageWin",
      [](Env& e) { return ncclCommWindowDeregister(e.comm, reinterpret_cast<ncclWindow_t>(e.buf)); }, ncclInvalidUsage,
      {"win"});
  add("ncclCommWindowDeregister", "Twice",
      [](Env& e) { return ncclCommWindowDeregister(e.comm, e.deregisteredWindow()); }, ncclInvalidUsage, {"win"});

  const auto host = ncclScalarHostImmediate;
  add("ncclRedOpCreatePreMulSum", "NullOp",
      [=](Env& e) { return ncclRedOpCreatePreMulSum(nullptr, &e.scalar, ncclFloat64, host, e.comm); },
      ncclInvalidArgument, {"op"});
  add("ncclRedOpCreatePreMulSum", "NullScalar",
      [=](Env& e) { return ncclRedOpCreatePreMulSum(&e.op, nullptr, ncclFloat64, host, e.comm); }, ncclInvalidArgument,
      {"scalar"});
  add("ncclRedOpCreatePreMulSum", "NullComm",
      [=](Env& e) { return ncclRedOpCreatePreMulSum(&e.op, &e.scalar, ncclFloat64, host, nullptr); },
      ncclInvalidArgument, {"comm"});
  add("ncclRedOpCreatePreMulSum", "DestroyedComm",
      [=](Env& e) { return ncclRedOpCreatePreMulSum(&e.op, &e.scalar, ncclFloat64, host, e.destroyed()); },
      ncclInvalidArgument, {kStale});
  add("ncclRedOpCreatePreMulSum", "DatatypeNumTypes",
      [=](Env& e) { return ncclRedOpCreatePreMulSum(&e.op, &e.scalar, ncclNumTypes, host, e.comm); },
      ncclInvalidArgument, {"datatype"});
  add("ncclRedOpCreatePreMulSum", "DatatypeNegative",
      [=](Env& e) { return ncclRedOpCreatePreMulSum(&e.op, &e.scalar, static_cast<ncclDataType_t>(-1), host, e.comm); },
      ncclInvalidArgument, {"datatype"});
  add("ncclRedOpCreatePreMulSum", "UnknownResidence",
      [](Env& e) {
        return ncclRedOpCreatePreMulSum(&e.op, &e.scalar, ncclFloat64, static_cast<ncclScalarResidence_t>(9), e.comm);
      },
      ncclInvalidArgument, {"residence"});
  add("ncclRedOpDestroy", "BuiltinOp", [](Env& e) { return ncclRedOpDestroy(ncclMax, e.comm); }, ncclInvalidArgument,
      {"built-in"});
  add("ncclRedOpDestroy", "NegativeOp", [](Env& e) { return ncclRedOpDestroy(static_cast<ncclRedOp_t>(-4), e.comm); },
      ncclInvalidArgument, {"invalid reduction op"});
  add("ncclRedOpDestroy", "NeverCreated",
      [](Env& e) { return ncclRedOpDestroy(static_cast<ncclRedOp_t>(ncclNumOps + 100), e.comm); }, ncclInvalidArgument,
      {"op"});
  add("ncclRedOpDestroy", "Twice", [](Env& e) { return ncclRedOpDestroy(e.destroyedOp(), e.comm); },
      ncclInvalidArgument, {"op"});
  add("ncclRedOpDestroy", "NullComm", [](Env& e) { return ncclRedOpDestroy(e.destroyedOp(), nullptr); },
      ncclInvalidArgument, {"comm"});
  add("ncclRedOpDestroy", "DestroyedComm",
      [](Env& e) {
        ncclRedOp_t op = e.destroyedOp();
        return ncclRedOpDestroy(op, e.destroyed());
      },
      ncclInvalidArgument, {kStale});
}

// ---- Device API (no device backend: every call fails, bad arguments first) ------------------

void addDeviceRows(Rows& add) {
  add("ncclDevCommCreate", "NullComm", [](Env& e) { return ncclDevCommCreate(nullptr, &e.reqs, e.devComm()); },
      ncclInvalidArgument, {"comm"});
  // The stubs never look the communicator up (tests/abi passes them a fake one): a stale handle is
  // not dereferenced, and the call fails for want of a device backend as any other does.
  add("ncclDevCommCreate", "DestroyedComm",
      [](Env& e) { return ncclDevCommCreate(e.destroyed(), &e.reqs, e.devComm()); }, ncclInvalidUsage,
      {"device backend"});
  add("ncclDevCommCreate", "NullReqs", [](Env& e) { return ncclDevCommCreate(e.comm, nullptr, e.devComm()); },
      ncclInvalidArgument, {"reqs"});
  add("ncclDevCommCreate", "NullOutDevComm", [](Env& e) { return ncclDevCommCreate(e.comm, &e.reqs, nullptr); },
      ncclInvalidArgument, {"outDevComm"});
  // Valid arguments, but there is no device backend to create a device communicator with.
  add("ncclDevCommCreate", "NoDeviceBackend", [](Env& e) { return ncclDevCommCreate(e.comm, &e.reqs, e.devComm()); },
      ncclInvalidUsage, {"device backend"});
  add("ncclDevCommDestroy", "NullComm", [](Env& e) { return ncclDevCommDestroy(nullptr, e.devComm()); },
      ncclInvalidArgument, {"comm"});
  add("ncclDevCommDestroy", "NullDevComm", [](Env& e) { return ncclDevCommDestroy(e.comm, nullptr); },
      ncclInvalidArgument, {"devComm"});
  // The team and slot queries return no code: an empty team or -1 means "unavailable", which the
  // rows report as ncclInvalidUsage; the reason is still recorded for ncclGetLastError.
  auto unavailable = [](bool empty) { return empty ? ncclInvalidUsage : ncclSuccess; };
  add("ncclTeamWorld", "NullComm", [=](Env&) { return unavailable(ncclTeamWorld(nullptr).nRanks == 0); },
      ncclInvalidUsage, {"device backend"});
  add("ncclTeamLsa", "NullComm", [=](Env&) { return unavailable(ncclTeamLsa(nullptr).nRanks == 0); }, ncclInvalidUsage,
      {"device backend"});
  add("ncclTeamRail", "NullComm", [=](Env&) { return unavailable(ncclTeamRail(nullptr).nRanks == 0); },
      ncclInvalidUsage, {"device backend"});
  add("ncclTeamRankToWorld", "RankNegative",
      [=](Env& e) { return unavailable(ncclTeamRankToWorld(e.comm, e.team, -5) == -1); }, ncclInvalidUsage,
      {"device backend"});
  add("ncclTeamRankToLsa", "RankNegative",
      [=](Env& e) { return unavailable(ncclTeamRankToLsa(e.comm, e.team, -5) == -1); }, ncclInvalidUsage,
      {"device backend"});
  add("ncclLLA2ACalcSlots", "MaxEltsNegative", [=](Env&) { return unavailable(ncclLLA2ACalcSlots(-1, 8) == -1); },
      ncclInvalidUsage, {"device backend"});
  add("ncclLsaBarrierCreateRequirement", "NBarriersZero",
      [](Env& e) { return ncclLsaBarrierCreateRequirement(e.team, 0, &e.lsa, &e.req); }, ncclInvalidArgument,
      {"nBarriers"});
  add("ncclLsaBarrierCreateRequirement", "NullOutHandle",
      [](Env& e) { return ncclLsaBarrierCreateRequirement(e.team, 1, nullptr, &e.req); }, ncclInvalidArgument,
      {"outHandle"});
  add("ncclLsaBarrierCreateRequirement", "NullOutReq",
      [](Env& e) { return ncclLsaBarrierCreateRequirement(e.team, 1, &e.lsa, nullptr); }, ncclInvalidArgument,
      {"outReq"});
  add("ncclGinBarrierCreateRequirement", "NullComm",
      [](Env& e) { return ncclGinBarrierCreateRequirement(nullptr, e.team, 1, &e.gin, &e.req); }, ncclInvalidArgument,
      {"comm"});
  add("ncclGinBarrierCreateRequirement", "NBarriersNegative",
      [](Env& e) { return ncclGinBarrierCreateRequirement(e.comm, e.team, -1, &e.gin, &e.req); }, ncclInvalidArgument,
      {"nBarriers"});
  add("ncclLLA2ACreateRequirement", "NBlocksZero",
      [](Env& e) { return ncclLLA2ACreateRequirement(0, 4, &e.a2a, &e.req); }, ncclInvalidArgument, {"nBlocks"});
  add("ncclLLA2ACreateRequirement", "NSlotsNegative",
      [](Env& e) { return ncclLLA2ACreateRequirement(1, -4, &e.a2a, &e.req); }, ncclInvalidArgument, {"nSlots"});
  add("ncclLLA2ACreateRequirement", "NullOutReq",
      [](Env& e) { return ncclLLA2ACreateRequirement(1, 4, &e.a2a, nullptr); }, ncclInvalidArgument, {"outReq"});
}

// ---- The pncclX aliases: the same checks answer through the profiling names -----------------

void addAliasRows(Rows& add) {
  add("pncclGetVersion", "NullVersion", [](Env&) { return pncclGetVersion(nullptr); }, ncclInvalidArgument,
      {"version"});
  add("pncclCommInitRank", "NranksZero", [](Env& e) { return pncclCommInitRank(&e.made, 0, e.id(), 0); },
      ncclInvalidArgument, {"nranks"});
  add("pncclCommCount", "NullOut", [](Env& e) { return pncclCommCount(e.comm, nullptr); }, ncclInvalidArgument,
      {"count"});
  add("pncclCommDestroy", "Twice", [](Env& e) { return pncclCommDestroy(e.destroyed()); }, ncclInvalidArgument,
      {kStale});
  add("pncclAllReduce", "DatatypeNumTypes",
      [](Env& e) { return pncclAllReduce(e.buf, e.out, 1, ncclNumTypes, ncclSum, e.comm, nullptr); },
      ncclInvalidArgument, {"datatype"});
  add("pncclSend", "PeerIsNranks", [](Env& e) { return pncclSend(e.buf, 1, ncclFloat32, 1, e.comm, nullptr); },
      ncclInvalidArgument, {"peer"});
  add("pncclGroupEnd", "WithoutGroupStart", [](Env&) { return pncclGroupEnd(); }, ncclInvalidUsage, {"ncclGroupStart"});
  add("pncclMemFree", "NotFromMemAlloc", [](Env& e) { return pncclMemFree(e.buf); }, ncclInvalidArgument, {"ptr"});
  add("pncclRedOpDestroy", "BuiltinOp", [](Env& e) { return pncclRedOpDestroy(ncclSum, e.comm); }, ncclInvalidArgument,
      {"built-in"});
  add("pncclDevCommCreate", "NullReqs", [](Env& e) { return pncclDevCommCreate(e.comm, nullptr, e.devComm()); },
      ncclInvalidArgument, {"reqs"});
}

const std::vector<Row>& table() {
  static const std::vector<Row> rows = [] {
    Rows r;
    addCollectiveRows(r);
    addInitRows(r);
    addLifecycleRows(r);
    addGroupRows(r);
    addMemoryRows(r);
    addDeviceRows(r);
    addAliasRows(r);
    return r.all;
  }();
  return rows;
}

class BadInputTest : public ::testing::TestWithParam<Row> {
 protected:
  void SetUp() override {
    unsetenv("NCCL_COMM_ID");
    // Roots of ids that rows make and never use give up after this long.
    setenv("MIXCCL_TIMEOUT", "5", 1);
    config::resetForTesting();
    ASSERT_EQ(ncclCommInitAll(&env_.comm, 1, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  }
  void TearDown() override {
    while (group::active()) (void)ncclGroupEnd();
    if (env_.handle != nullptr && env_.handleComm != nullptr) (void)ncclCommDeregister(env_.handleComm, env_.handle);
    if (env_.win != nullptr && env_.comm != nullptr) (void)ncclCommWindowDeregister(env_.comm, env_.win);
    if (env_.made != nullptr && env_.made != reinterpret_cast<ncclComm_t>(0x1)) (void)ncclCommDestroy(env_.made);
    for (ncclComm_t c : {env_.comm, env_.pairComms[0], env_.pairComms[1]}) {
      if (c != nullptr) {
        EXPECT_EQ(ncclCommDestroy(c), ncclSuccess) << ncclGetLastError(nullptr);
      }
    }
    unsetenv("MIXCCL_TIMEOUT");
    config::resetForTesting();
  }
  Env env_;
};

TEST_P(BadInputTest, ReturnsTheNcclCodeWithAMessage) {
  const Row& row = GetParam();
  clearLastError();
  const ncclResult_t got = row.call(env_);
  const std::string message = ncclGetLastError(nullptr);
  EXPECT_EQ(got, row.expected) << row.entry << " returned " << ncclGetErrorString(got) << " (" << got
                               << "); message: " << message;
  EXPECT_FALSE(group::active()) << row.entry << " left a group open on this thread";
  if (row.expected == ncclSuccess) return;
  ASSERT_FALSE(message.empty()) << row.entry << " failed without a message for ncclGetLastError";
  EXPECT_NE(message.find(baseName(row.entry)), std::string::npos)
      << "the message does not name " << baseName(row.entry) << ": " << message;
  for (const std::string& word : row.mentions) {
    EXPECT_NE(message.find(word), std::string::npos) << "the message does not mention \"" << word << "\": " << message;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryEntryPoint, BadInputTest, ::testing::ValuesIn(table()),
                         [](const ::testing::TestParamInfo<Row>& info) {
                           return info.param.entry + "_" + info.param.what;
                         });

// Entry points with no argument that can be wrong and no state in which they fail.
const std::set<std::string> kNothingToGetWrong = {"ncclGroupStart", "ncclResetDebugInit", "ncclResetDebugInitInternal"};

TEST(BadInputTableTest, CoversEveryExportedEntryPoint) {
  // The export list lies beside this suite's sources: tests/abi/ next to tests/unit/.
  std::string path = __FILE__;
  path = path.substr(0, path.rfind("/unit/")) + "/abi/nccl_2.28.9_exports.txt";
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << "cannot read " << path;
  std::set<std::string> covered;
  for (const Row& row : table()) covered.insert(row.entry);
  int checked = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("nccl", 0) != 0) continue;  // comments and the pncclX aliases
    ++checked;
    if (kNothingToGetWrong.count(line) == 0) {
      EXPECT_EQ(covered.count(line), 1u) << line << " has no row in the table";
    }
  }
  EXPECT_GT(checked, 40) << "the export list looks truncated: " << path;
}

}  // namespace
}  // namespace mixccl::testing
