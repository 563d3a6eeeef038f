// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// Behaviour of the device-API entry points of the shared library without a device backend: bad
// arguments are reported as such, valid calls fail with ncclInvalidUsage (or a neutral value) and
// leave a message that names the call. Calls go through the exported C names.

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "mixccl/device_api.h"
#include "nccl.h"

namespace {

// ncclGetLastError lives in another part of src/api; look it up at run time so this suite does
// not depend on it being linked in yet.
std::string lastError() {
  using Fn = const char* (*)(ncclComm_t);
  auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "ncclGetLastError"));
  if (fn == nullptr) return "<ncclGetLastError not available>";
  const char* msg = fn(nullptr);
  return msg ? msg : "";
}

bool haveLastError() { return dlsym(RTLD_DEFAULT, "ncclGetLastError") != nullptr; }

// The executable needs libnccl.so.2; make sure the loader picked ours and not NVIDIA's (which
// would crash on the fake communicator below). Only mixccl defines pncclResetDebugInitInternal.
class OurLibraryCheck : public ::testing::Environment {
 public:
  void SetUp() override {
    void* marker = dlsym(RTLD_DEFAULT, "pncclResetDebugInitInternal");
    Dl_info info = {};
    void* sym = dlsym(RTLD_DEFAULT, "ncclDevCommCreate");
    const char* where = (sym != nullptr && dladdr(sym, &info) != 0) ? info.dli_fname : "?";
    if (marker == nullptr) {
      std::fprintf(stderr, "libnccl.so.2 was resolved to %s, which is not mixccl; check RPATH/LD_LIBRARY_PATH\n",
                   where);
      std::abort();
    }
  }
};
const auto* const kOurLibraryCheck = ::testing::AddGlobalTestEnvironment(new OurLibraryCheck);

// Any non-null pointer will do as a communicator: the stubs never dereference it.
ncclComm_t fakeComm() { return reinterpret_cast<ncclComm_t>(static_cast<uintptr_t>(0x1000)); }

TEST(AbiDeviceApi, DevCommCreateChecksArgumentsThenRefuses) {
  ncclDevCommRequirements_t* reqs = nullptr;
  ncclDevComm_t* out = nullptr;
  EXPECT_EQ(ncclDevCommCreate(nullptr, reqs, out), ncclInvalidArgument);
  struct ncclDevCommRequirements r = {};
  alignas(64) unsigned char storage[1024] = {};
  out = reinterpret_cast<ncclDevComm_t*>(storage);
  EXPECT_EQ(ncclDevCommCreate(fakeComm(), &r, out), ncclInvalidUsage);
  EXPECT_EQ(pncclDevCommCreate(fakeComm(), &r, out), ncclInvalidUsage);
  if (haveLastError()) {
    EXPECT_NE(lastError().find("ncclDevCommCreate"), std::string::npos) << lastError();
    EXPECT_NE(lastError().find("device backend"), std::string::npos) << lastError();
  }
  EXPECT_EQ(ncclDevCommDestroy(fakeComm(), nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclDevCommDestroy(fakeComm(), out), ncclInvalidUsage);
}

TEST(AbiDeviceApi, TeamsAreEmpty) {
  for (ncclTeam_t t : {ncclTeamWorld(fakeComm()), ncclTeamLsa(fakeComm()), ncclTeamRail(fakeComm())}) {
    EXPECT_EQ(t.nRanks, 0);
    EXPECT_EQ(t.rank, -1);
    EXPECT_EQ(t.stride, 0);
  }
  if (haveLastError()) {
    EXPECT_NE(lastError().find("ncclTeamRail"), std::string::npos) << lastError();
  }
  const ncclTeam_t team = {1, 0, 1};
  EXPECT_EQ(ncclTeamRankToWorld(fakeComm(), team, 0), -1);
  EXPECT_EQ(ncclTeamRankToLsa(fakeComm(), team, 0), -1);
  EXPECT_EQ(ncclLLA2ACalcSlots(16, 8), -1);
}

TEST(AbiDeviceApi, RequirementsRefused) {
  const ncclTeam_t team = {1, 0, 1};
  ncclLsaBarrierHandle_t lsa;
  ncclGinBarrierHandle_t gin;
  ncclLLA2AHandle_t a2a;
  ncclDevResourceRequirements_t req = {};
  EXPECT_EQ(ncclLsaBarrierCreateRequirement(team, 0, &lsa, &req), ncclInvalidArgument);
  EXPECT_EQ(ncclLsaBarrierCreateRequirement(team, 1, &lsa, &req), ncclInvalidUsage);
  EXPECT_EQ(ncclGinBarrierCreateRequirement(fakeComm(), team, 1, nullptr, &req), ncclInvalidArgument);
  EXPECT_EQ(ncclGinBarrierCreateRequirement(fakeComm(), team, 1, &gin, &req), ncclInvalidUsage);
  EXPECT_EQ(ncclLLA2ACreateRequirement(1, 1, &a2a, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclLLA2ACreateRequirement(1, 1, &a2a, &req), ncclInvalidUsage);
}

TEST(AbiDeviceApi, ResetDebugInitDoesNotFail) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  ncclResetDebugInit();
  pncclResetDebugInit();
#pragma GCC diagnostic pop
  ncclResetDebugInitInternal();
}

}  // namespace
