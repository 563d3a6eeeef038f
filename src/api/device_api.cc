// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// Host entry points of NCCL's device API (include/mixccl/device_api.h) and the logging reset hooks.
//
// The device API hands kernels direct access to peer memory; that needs a device backend able to
// map and launch, and mixccl has none active, so these functions exist only to keep the exported
// symbol set identical to libnccl.so.2. Each one checks its arguments (a bad argument is reported
// as such, so callers get the more precise error first) and then fails with ncclInvalidUsage, or
// returns a neutral value where the return type has no error code, always recording a message for
// ncclGetLastError.

#include "mixccl/device_api.h"

#include "common/log.h"
#include "common/result.h"
#include "src/api/guard.h"

namespace mixccl::api {
namespace {

// The common failure: names the call, says why, and what to use instead.
Result noDeviceBackend(const char* name) {
  return fail(Result::kInvalidUsage,
              "%s: the device-side API needs a device backend; mixccl has none active (ranks use host "
              "memory through the host backend). Use the host-side collectives and ncclSend/ncclRecv instead.",
              name);
}

// For entry points whose return type carries no error code: record the message and let the
// caller return its neutral value. noexcept like every API body.
void recordNoDeviceBackend(const char* name) noexcept {
  (void)apiGuard(name, [&] { return noDeviceBackend(name); });
}

Result checkNotNull(const char* name, const void* p, const char* what) {
  if (p == nullptr) return fail(Result::kInvalidArgument, "%s: %s is NULL", name, what);
  return Result::kSuccess;
}

Result checkPositive(const char* name, int v, const char* what) {
  if (v <= 0) return fail(Result::kInvalidArgument, "%s: %s must be positive, got %d", name, what, v);
  return Result::kSuccess;
}

constexpr ncclTeam_t kNoTeam = {0, -1, 0};

}  // namespace
}  // namespace mixccl::api

using mixccl::Result;
using mixccl::api::apiGuard;
using mixccl::api::checkNotNull;
using mixccl::api::checkPositive;
using mixccl::api::kNoTeam;
using mixccl::api::noDeviceBackend;
using mixccl::api::recordNoDeviceBackend;

MIXCCL_API(ncclResult_t, ncclDevCommCreate, ncclComm_t comm, ncclDevCommRequirements_t const* reqs,
           ncclDevComm_t* outDevComm) {
  constexpr const char* kName = "ncclDevCommCreate";
  return apiGuard(kName, [&] {
    MIXCCL_TRY(checkNotNull(kName, comm, "comm"));
    MIXCCL_TRY(checkNotNull(kName, reqs, "reqs"));
    MIXCCL_TRY(checkNotNull(kName, outDevComm, "outDevComm"));
    return noDeviceBackend(kName);
  });
}

MIXCCL_API(ncclResult_t, ncclDevCommDestroy, ncclComm_t comm, ncclDevComm_t const* devComm) {
  constexpr const char* kName = "ncclDevCommDestroy";
  return apiGuard(kName, [&] {
    MIXCCL_TRY(checkNotNull(kName, comm, "comm"));
    MIXCCL_TRY(checkNotNull(kName, devComm, "devComm"));
    return noDeviceBackend(kName);
  });
}

MIXCCL_API(ncclTeam_t, ncclTeamWorld, ncclComm_t comm) {
  recordNoDeviceBackend("ncclTeamWorld");
  return kNoTeam;
}

MIXCCL_API(ncclTeam_t, ncclTeamLsa, ncclComm_t comm) {
  recordNoDeviceBackend("ncclTeamLsa");
  return kNoTeam;
}

MIXCCL_API(ncclTeam_t, ncclTeamRail, ncclComm_t comm) {
  recordNoDeviceBackend("ncclTeamRail");
  return kNoTeam;
}

MIXCCL_API(int, ncclTeamRankToWorld, ncclComm_t comm, ncclTeam_t team, int rank) {
  recordNoDeviceBackend("ncclTeamRankToWorld");
  return -1;
}

MIXCCL_API(int, ncclTeamRankToLsa, ncclComm_t comm, ncclTeam_t team, int rank) {
  recordNoDeviceBackend("ncclTeamRankToLsa");
  return -1;
}

MIXCCL_API(ncclResult_t, ncclLsaBarrierCreateRequirement, ncclTeam_t team, int nBarriers,
           ncclLsaBarrierHandle_t* outHandle, ncclDevResourceRequirements_t* outReq) {
  constexpr const char* kName = "ncclLsaBarrierCreateRequirement";
  return apiGuard(kName, [&] {
    MIXCCL_TRY(checkPositive(kName, nBarriers, "nBarriers"));
    MIXCCL_TRY(checkNotNull(kName, outHandle, "outHandle"));
    MIXCCL_TRY(checkNotNull(kName, outReq, "outReq"));
    return noDeviceBackend(kName);
  });
}

MIXCCL_API(ncclResult_t, ncclGinBarrierCreateRequirement, ncclComm_t comm, ncclTeam_t team, int nBarriers,
           ncclGinBarrierHandle_t* outHandle, ncclDevResourceRequirements_t* outReq) {
  constexpr const char* kName = "ncclGinBarrierCreateRequirement";
  return apiGuard(kName, [&] {
    MIXCCL_TRY(checkNotNull(kName, comm, "comm"));
    MIXCCL_TRY(checkPositive(kName, nBarriers, "nBarriers"));
    MIXCCL_TRY(checkNotNull(kName, outHandle, "outHandle"));
    MIXCCL_TRY(checkNotNull(kName, outReq, "outReq"));
    return noDeviceBackend(kName);
  });
}

MIXCCL_API(int, ncclLLA2ACalcSlots, int maxElts, int maxEltSize) {
  recordNoDeviceBackend("ncclLLA2ACalcSlots");
  return -1;
}

MIXCCL_API(ncclResult_t, ncclLLA2ACreateRequirement, int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle,
           ncclDevResourceRequirements_t* outReq) {
  constexpr const char* kName = "ncclLLA2ACreateRequirement";
  return apiGuard(kName, [&] {
    MIXCCL_TRY(checkPositive(kName, nBlocks, "nBlocks"));
    MIXCCL_TRY(checkPositive(kName, nSlots, "nSlots"));
    MIXCCL_TRY(checkNotNull(kName, outHandle, "outHandle"));
    MIXCCL_TRY(checkNotNull(kName, outReq, "outReq"));
    return noDeviceBackend(kName);
  });
}

// Both reset hooks re-read NCCL_DEBUG, NCCL_DEBUG_SUBSYS and NCCL_DEBUG_FILE. They return nothing,
// so a failure (only possible when opening NCCL_DEBUG_FILE throws) is recorded and swallowed.
namespace {
void resetDebug(const char* name) noexcept {
  (void)apiGuard(name, [] {
    mixccl::log::reinit();
    return Result::kSuccess;
  });
}
}  // namespace

MIXCCL_API(void, ncclResetDebugInit) { resetDebug("ncclResetDebugInit"); }

MIXCCL_API(void, ncclResetDebugInitInternal) { resetDebug("ncclResetDebugInitInternal"); }
