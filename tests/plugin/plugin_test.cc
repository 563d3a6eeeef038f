// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// The device backend plugin ABI end to end: the loader against a real out-of-tree plugin
// (test_plugin.c) and its broken variants, and MIXCCL_DEVICE_BACKEND selecting a backend for
// communicators and ncclMemAlloc.
//
// The backend is chosen once per process, so each Select* suite runs as its own ctest entry with
// its own MIXCCL_DEVICE_BACKEND (tests/plugin/CMakeLists.txt); every suite first checks that the
// variable is what it expects, so running it under the wrong setting fails instead of passing.

#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/result.h"
#include "mixccl/device_backend.h"
#include "src/device/device_backend.h"
#include "src/device/plugin/plugin_loader.h"
#include "src/device/select.h"
#include "tests/support/rank_threads.h"

namespace mixccl {
namespace {

using ::testing::HasSubstr;

// Opens a plugin for the test's own use: reads its counters, and keeps it loaded while the
// loader's copy comes and goes, so the counters are not reset by an unload.
class PluginHandle {
 public:
  explicit PluginHandle(const char* path) : handle_(dlopen(path, RTLD_NOW | RTLD_LOCAL)) {
    if (handle_ != nullptr) {
      count_ = reinterpret_cast<int64_t (*)(const char*)>(dlsym(handle_, "mixcclTestPluginCount"));
    }
  }
  ~PluginHandle() {
    if (handle_ != nullptr) dlclose(handle_);
  }
  bool ok() const { return count_ != nullptr; }
  int64_t count(const char* name) const { return count_(name); }
  std::string error() const {
    const char* e = dlerror();
    return e != nullptr ? e : "";
  }

 private:
  void* handle_;
  int64_t (*count_)(const char*) = nullptr;
};

bool backendVariableIs(const char* expected) {
  const char* v = getenv("MIXCCL_DEVICE_BACKEND");
  if (expected == nullptr) return v == nullptr;
  return v != nullptr && strcmp(v, expected) == 0;
}

ReduceSpec specOf(DataType dtype, RedOpKind op) {
  ReduceSpec s;
  s.dtype = dtype;
  s.op = op;
  return s;
}

// ---- the loader, with no MIXCCL_DEVICE_BACKEND ----

class PluginLoader : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(backendVariableIs(nullptr)) << "run with MIXCCL_DEVICE_BACKEND unset (see CMakeLists.txt)";
    ASSERT_TRUE(plugin_.ok()) << plugin_.error();
    clearLastError();
  }

  PluginHandle plugin_{MIXCCL_TEST_PLUGIN};
};

TEST_F(PluginLoader, LoadsThePluginAndReportsWhatItAnnounces) {
  const int64_t inits = plugin_.count("init");
  const int64_t finalizes = plugin_.count("finalize");
  std::unique_ptr<DeviceBackend> b;
  ASSERT_EQ(loadPluginBackend(MIXCCL_TEST_PLUGIN, &b), Result::kSuccess) << lastError();
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(plugin_.count("init"), inits + 1);
  EXPECT_STREQ(b->name(), "testplugin");
  EXPECT_STREQ(b->vendor(), "mixccl tests");
  EXPECT_EQ(b->wireId(), MIXCCL_DEVICE_BACKEND_FIRST_PLUGIN_WIRE_ID);  // the plugin left it 0
  EXPECT_EQ(b->caps().dtypes, (1u << int(DataType::kInt32)) | (1u << int(DataType::kFloat32)));
  EXPECT_EQ(b->caps().ops, (1u << int(RedOpKind::kSum)) | (1u << int(RedOpKind::kProd)) | (1u << int(RedOpKind::kMax)) |
                               (1u << int(RedOpKind::kMin)));
  EXPECT_EQ(b->caps().flags, 0u);
  EXPECT_EQ(b->deviceIndex(), 0);
  int x = 0;
  EXPECT_EQ(b->memKind(&x), MemKind::kHost);
  b.reset();
  EXPECT_EQ(plugin_.count("finalize"), finalizes + 1);
}

TEST_F(PluginLoader, ReducesWithThePluginsLoops) {
  std::unique_ptr<DeviceBackend> b;
  ASSERT_EQ(loadPluginBackend(MIXCCL_TEST_PLUGIN, &b), Result::kSuccess) << lastError();
  const int64_t reduces = plugin_.count("reduce");

  // Two sources: dst = a + b (the rank's own input is b).
  std::vector<float> fa = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f}, fb = {0.5f, 4.0f, -1.25f, 2.0f, 1.0f}, fd(5, -99.0f);
  ASSERT_EQ(b->reduce(fd.data(), fa.data(), fb.data(), fd.size(), specOf(DataType::kFloat32, RedOpKind::kSum), false,
                      false, nullptr),
            Result::kSuccess)
      << lastError();
  for (size_t i = 0; i < fd.size(); ++i) EXPECT_EQ(fd[i], fa[i] + fb[i]) << i;
  EXPECT_EQ(plugin_.count("maxSources"), 2);

  // One source (a == nullptr, no transform): a copy of b.
  std::vector<float> copy(5, 0.0f);
  ASSERT_EQ(b->reduce(copy.data(), nullptr, fb.data(), copy.size(), specOf(DataType::kFloat32, RedOpKind::kSum), false,
                      false, nullptr),
            Result::kSuccess);
  EXPECT_EQ(copy, fb);

  // int32 max / min / prod, in place (dst == a), as the engine does for a receive-reduce step.
  std::vector<int32_t> ia = {3, -7, 10, 0}, ib = {5, -9, 2, 0};
  std::vector<int32_t> mx = ia, mn = ia, pr = ia;
  ASSERT_EQ(
      b->reduce(mx.data(), mx.data(), ib.data(), 4, specOf(DataType::kInt32, RedOpKind::kMax), false, false, nullptr),
      Result::kSuccess);
  ASSERT_EQ(
      b->reduce(mn.data(), mn.data(), ib.data(), 4, specOf(DataType::kInt32, RedOpKind::kMin), false, false, nullptr),
      Result::kSuccess);
  ASSERT_EQ(
      b->reduce(pr.data(), pr.data(), ib.data(), 4, specOf(DataType::kInt32, RedOpKind::kProd), false, false, nullptr),
      Result::kSuccess);
  EXPECT_EQ(mx, (std::vector<int32_t>{5, -7, 10, 0}));
  EXPECT_EQ(mn, (std::vector<int32_t>{3, -9, 2, 0}));
  EXPECT_EQ(pr, (std::vector<int32_t>{15, 63, 20, 0}));
  EXPECT_EQ(plugin_.count("reduce"), reduces + 5);
}

TEST_F(PluginLoader, MemoryQueuesFencesAndGatesGoThroughThePlugin) {
  std::unique_ptr<DeviceBackend> b;
  ASSERT_EQ(loadPluginBackend(MIXCCL_TEST_PLUGIN, &b), Result::kSuccess) << lastError();
  const int64_t handles = plugin_.count("liveHandles");
  const int64_t allocs = plugin_.count("liveAllocs");

  void* mem = nullptr;
  void* staging = nullptr;
  ASSERT_EQ(b->alloc(256, &mem), Result::kSuccess);
  ASSERT_EQ(b->allocStaging(256, &staging), Result::kSuccess);
  EXPECT_EQ(plugin_.count("liveAllocs"), allocs + 2);

  HostRegistration* reg = nullptr;
  ASSERT_EQ(b->registerHost(staging, 256, &reg), Result::kSuccess);
  EXPECT_NE(reg, nullptr);
  WorkQueue* q = nullptr;
  ASSERT_EQ(b->openQueue(nullptr, &q), Result::kSuccess);
  EXPECT_NE(q, nullptr);  // the plugin's handle comes back as the queue

  memset(mem, 0x5a, 256);
  ASSERT_EQ(b->copy(staging, mem, 256, q), Result::kSuccess) << lastError();
  EXPECT_EQ(static_cast<unsigned char*>(staging)[255], 0x5a);

  Fence* f = nullptr;
  Fence* start = nullptr;
  StreamGate* gate = nullptr;
  ASSERT_EQ(b->record(q, &f), Result::kSuccess);
  ASSERT_EQ(b->markStart(nullptr, &start), Result::kSuccess);
  ASSERT_EQ(b->holdStream(nullptr, &gate), Result::kSuccess);
  EXPECT_EQ(plugin_.count("liveHandles"), handles + 5);
  EXPECT_EQ(b->query(f), Result::kSuccess);
  EXPECT_EQ(b->query(start), Result::kSuccess);
  EXPECT_EQ(b->query(nullptr), Result::kSuccess);  // answered by the adapter
  b->releaseFence(f);
  b->releaseFence(start);
  b->releaseFence(nullptr);
  EXPECT_EQ(b->releaseStream(gate), Result::kSuccess);
  EXPECT_EQ(b->closeQueue(q), Result::kSuccess);
  EXPECT_EQ(b->unregisterHost(reg), Result::kSuccess);
  EXPECT_EQ(plugin_.count("liveHandles"), handles);

  EXPECT_EQ(b->free(mem), Result::kSuccess);
  EXPECT_EQ(b->freeStaging(staging), Result::kSuccess);
  EXPECT_EQ(plugin_.count("liveAllocs"), allocs);
}

TEST_F(PluginLoader, PluginErrorsKeepTheirCodeAndMessage) {
  std::unique_ptr<DeviceBackend> b;
  ASSERT_EQ(loadPluginBackend(MIXCCL_TEST_PLUGIN, &b), Result::kSuccess) << lastError();

  int notAStream = 0;
  EXPECT_EQ(b->checkStream(&notAStream), Result::kInvalidArgument);
  EXPECT_THAT(lastError(), HasSubstr("checkStream failed"));
  EXPECT_THAT(lastError(), HasSubstr("testplugin: this backend has no streams"));
  EXPECT_THAT(lastError(), HasSubstr(MIXCCL_TEST_PLUGIN));

  // A handle the plugin never gave out: refused by the plugin, not dereferenced by mixccl.
  int fake = 0;
  EXPECT_EQ(b->query(reinterpret_cast<Fence*>(&fake)), Result::kInvalidArgument);
  EXPECT_THAT(lastError(), HasSubstr("query: not a fence"));

  // A type outside the caps: the adapter refuses it before calling the plugin.
  const int64_t reduces = plugin_.count("reduce");
  double d[2] = {1, 2};
  EXPECT_EQ(b->reduce(d, d, d + 1, 1, specOf(DataType::kFloat64, RedOpKind::kSum), false, false, nullptr),
            Result::kInvalidArgument);
  EXPECT_THAT(lastError(), HasSubstr("cannot reduce"));
  EXPECT_EQ(plugin_.count("reduce"), reduces);

  // PreMulSum is within the announced op bits of neither, so the plugin refuses it itself.
  float x[2] = {1, 2};
  ReduceSpec pre = specOf(DataType::kFloat32, RedOpKind::kSum);
  pre.preMul = true;
  EXPECT_EQ(b->reduce(x, nullptr, x + 1, 1, pre, true, false, nullptr), Result::kInvalidArgument);
  EXPECT_THAT(lastError(), HasSubstr("PreMulSum and Avg are not supported"));
}

TEST_F(PluginLoader, InitFailureIsReportedAndNothingIsFinalized) {
  const int64_t finalizes = plugin_.count("finalize");
  setenv("MIXCCL_TEST_PLUGIN_FAIL_INIT", "1", 1);
  std::unique_ptr<DeviceBackend> b;
  Result r = loadPluginBackend(MIXCCL_TEST_PLUGIN, &b);
  unsetenv("MIXCCL_TEST_PLUGIN_FAIL_INIT");
  EXPECT_EQ(r, Result::kSystemError);
  EXPECT_EQ(b, nullptr);
  EXPECT_THAT(lastError(), HasSubstr("init failed"));
  EXPECT_THAT(lastError(), HasSubstr("init refused because MIXCCL_TEST_PLUGIN_FAIL_INIT=1"));
  EXPECT_EQ(plugin_.count("finalize"), finalizes);
}

struct BadPlugin {
  const char* path;
  std::vector<std::string> mentions;  // what the message must say
};

TEST_F(PluginLoader, RefusesBrokenPluginsWithAMessageSayingWhy) {
  const std::string v1Size = std::to_string(sizeof(mixcclDeviceBackend_v1_t));
  const BadPlugin bad[] = {
      {MIXCCL_TEST_PLUGIN_NO_TABLE, {"no table symbol mixcclDeviceBackend_v1", "undefined symbol"}},
      {MIXCCL_TEST_PLUGIN_NEWER_MAJOR, {"declares ABI version 2.0", "supports device backend ABI version 1.x"}},
      {MIXCCL_TEST_PLUGIN_ONLY_V2, {"offers only mixcclDeviceBackend_v2", "supports device backend ABI version 1"}},
      {MIXCCL_TEST_PLUGIN_NULL_FN, {"mandatory function reduce", "is NULL"}},
      {MIXCCL_TEST_PLUGIN_SMALL_SIZE, {"less than the " + v1Size + " bytes of version 1.0"}},
  };
  for (const BadPlugin& p : bad) {
    SCOPED_TRACE(p.path);
    PluginHandle own(p.path);
    ASSERT_TRUE(own.ok()) << own.error();
    clearLastError();
    std::unique_ptr<DeviceBackend> b;
    EXPECT_EQ(loadPluginBackend(p.path, &b), Result::kInvalidUsage);
    EXPECT_EQ(b, nullptr);
    EXPECT_THAT(lastError(), HasSubstr(p.path));
    for (const std::string& m : p.mentions) EXPECT_THAT(lastError(), HasSubstr(m));
    EXPECT_EQ(own.count("init"), 0) << "a refused plugin must not be initialised";
  }
}

TEST_F(PluginLoader, RefusesAMissingFileAndAnEmptyPath) {
  std::unique_ptr<DeviceBackend> b;
  EXPECT_EQ(loadPluginBackend("/nonexistent/libnothing.so", &b), Result::kInvalidUsage);
  EXPECT_THAT(lastError(), HasSubstr("cannot load device backend plugin /nonexistent/libnothing.so"));
  EXPECT_EQ(loadPluginBackend("", &b), Result::kInvalidArgument);
  EXPECT_EQ(loadPluginBackend(nullptr, &b), Result::kInvalidArgument);
  EXPECT_EQ(b, nullptr);
}

TEST_F(PluginLoader, LoadsTwiceSideBySide) {
  // Each load inits, each drop finalizes; the plugin counts rather than assuming one init.
  const int64_t inits = plugin_.count("init");
  const int64_t finalizes = plugin_.count("finalize");
  std::unique_ptr<DeviceBackend> a, b;
  ASSERT_EQ(loadPluginBackend(MIXCCL_TEST_PLUGIN, &a), Result::kSuccess) << lastError();
  ASSERT_EQ(loadPluginBackend(MIXCCL_TEST_PLUGIN, &b), Result::kSuccess) << lastError();
  EXPECT_EQ(plugin_.count("init"), inits + 2);
  a.reset();
  int32_t v[2] = {4, 5};
  EXPECT_EQ(b->reduce(v, v, v + 1, 1, specOf(DataType::kInt32, RedOpKind::kSum), false, false, nullptr),
            Result::kSuccess);
  EXPECT_EQ(v[0], 9);
  b.reset();
  EXPECT_EQ(plugin_.count("finalize"), finalizes + 2);
}

// ---- MIXCCL_DEVICE_BACKEND unset: the host backend ----

TEST(SelectDefault, ConcurrentFirstCallsShareOneHostBackend) {
  ASSERT_TRUE(backendVariableIs(nullptr));
  constexpr int kThreads = 4;
  DeviceBackend* seen[kThreads] = {};
  Result results[kThreads];
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) threads.emplace_back([&, i] { results[i] = processBackend(&seen[i]); });
  for (auto& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) {
    EXPECT_EQ(results[i], Result::kSuccess);
    EXPECT_EQ(seen[i], seen[0]);
  }
  ASSERT_NE(seen[0], nullptr);
  EXPECT_STREQ(seen[0]->name(), "host");
}

TEST(SelectDefault, CommunicatorsUseIt) {
  ASSERT_TRUE(backendVariableIs(nullptr));
  testing::runRanks(2, [](int rank, ncclComm_t comm) {
    std::vector<float> buf(1000, static_cast<float>(rank + 1));
    ASSERT_EQ(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr), ncclSuccess)
        << ncclGetLastError(comm);
    for (float x : buf) ASSERT_EQ(x, 3.0f);
  });
}

// ---- MIXCCL_DEVICE_BACKEND=<the test plugin> ----

class SelectPlugin : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(backendVariableIs(MIXCCL_TEST_PLUGIN)) << "run with MIXCCL_DEVICE_BACKEND=" MIXCCL_TEST_PLUGIN;
    ASSERT_TRUE(plugin_.ok()) << plugin_.error();
  }
  PluginHandle plugin_{MIXCCL_TEST_PLUGIN};
};

TEST_F(SelectPlugin, TheProcessBackendIsThePlugin) {
  DeviceBackend* b = nullptr;
  ASSERT_EQ(processBackend(&b), Result::kSuccess) << lastError();
  ASSERT_NE(b, nullptr);
  EXPECT_STREQ(b->name(), "testplugin");
  DeviceBackend* again = nullptr;
  ASSERT_EQ(processBackend(&again), Result::kSuccess);
  EXPECT_EQ(again, b);
  EXPECT_EQ(plugin_.count("init"), 1);  // once per process
}

TEST_F(SelectPlugin, AllReduceReducesThroughThePlugin) {
  constexpr int kRanks = 2;
  constexpr size_t kCount = 100003;  // several slots, and an odd tail
  const int64_t reduces = plugin_.count("reduce");
  const int64_t elements = plugin_.count("reduceElements");
  testing::runRanks(kRanks, [&](int rank, ncclComm_t comm) {
    std::vector<float> send(kCount), recv(kCount, -1.0f);
    for (size_t i = 0; i < kCount; ++i) send[i] = static_cast<float>((i % 1000) * (rank + 1)) * 0.5f;
    ASSERT_EQ(ncclAllReduce(send.data(), recv.data(), kCount, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess)
        << ncclGetLastError(comm);
    for (size_t i = 0; i < kCount; ++i) {
      // (i % 1000) * 0.5 * (1 + 2), exact in float32.
      ASSERT_EQ(recv[i], static_cast<float>(i % 1000) * 1.5f) << "rank " << rank << " element " << i;
    }
    std::vector<int32_t> iv(999, rank == 0 ? -5 : 7);
    iv[0] = rank;
    ASSERT_EQ(ncclAllReduce(iv.data(), iv.data(), iv.size(), ncclInt32, ncclMax, comm, nullptr), ncclSuccess)
        << ncclGetLastError(comm);
    EXPECT_EQ(iv[0], 1);
    EXPECT_EQ(iv[998], 7);
  });
  EXPECT_GT(plugin_.count("reduce"), reduces);
  // Every element is reduced at least once on some rank.
  EXPECT_GE(plugin_.count("reduceElements") - elements, static_cast<int64_t>(kCount));
}

TEST_F(SelectPlugin, MemAllocUsesThePlugin) {
  const int64_t allocs = plugin_.count("alloc");
  const int64_t frees = plugin_.count("free");
  void* p = nullptr;
  ASSERT_EQ(ncclMemAlloc(&p, 4096), ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(plugin_.count("alloc"), allocs + 1);
  EXPECT_EQ(ncclMemFree(p), ncclSuccess);
  EXPECT_EQ(plugin_.count("free"), frees + 1);
}

// ---- settings that cannot give a backend: every user of it fails with the same message ----

void expectEveryUserFails(ncclResult_t code, const std::vector<std::string>& mentions) {
  for (int attempt = 0; attempt < 2; ++attempt) {  // the failure is kept, not retried
    SCOPED_TRACE(attempt);
    clearLastError();
    DeviceBackend* b = reinterpret_cast<DeviceBackend*>(0x1);
    EXPECT_EQ(static_cast<int>(processBackend(&b)), static_cast<int>(code));
    EXPECT_EQ(b, nullptr);
    for (const std::string& m : mentions) EXPECT_THAT(lastError(), HasSubstr(m));
  }
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = reinterpret_cast<ncclComm_t>(0x1);
  EXPECT_EQ(ncclCommInitRank(&comm, 1, id, 0), code);
  EXPECT_EQ(comm, nullptr);
  for (const std::string& m : mentions) EXPECT_THAT(std::string(ncclGetLastError(nullptr)), HasSubstr(m));
  void* p = nullptr;
  EXPECT_EQ(ncclMemAlloc(&p, 64), code);
  EXPECT_EQ(p, nullptr);
  for (const std::string& m : mentions) EXPECT_THAT(std::string(ncclGetLastError(nullptr)), HasSubstr(m));
}

TEST(SelectBadPlugin, CommInitAndMemAllocFailWithTheLoaderMessage) {
  ASSERT_TRUE(backendVariableIs(MIXCCL_TEST_PLUGIN_NULL_FN));
  expectEveryUserFails(ncclInvalidUsage, {MIXCCL_TEST_PLUGIN_NULL_FN, "mandatory function reduce"});
}

TEST(SelectUnknown, CommInitAndMemAllocFailListingTheKnownNames) {
  ASSERT_TRUE(backendVariableIs("nosuchbackend"));
  expectEveryUserFails(ncclInvalidArgument, {"MIXCCL_DEVICE_BACKEND=nosuchbackend", "unknown device backend",
                                             "known names: host", "must contain '/'"});
}

TEST(SelectCuda, CommInitAndMemAllocSayCudaIsNotBuilt) {
  ASSERT_TRUE(backendVariableIs("cuda"));
  expectEveryUserFails(ncclInvalidUsage, {"mixccl was built without the CUDA backend"});
}

}  // namespace
}  // namespace mixccl
