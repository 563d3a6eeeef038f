// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// Our side of the ABI comparison: the same item lists expanded against include/nccl.h and
// include/mixccl/device_api.h, plus compile-time checks that need no reference header.

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <typeinfo>

#include "mixccl/device_api.h"
#include "nccl.h"
#include "tests/abi/abi_table.h"

namespace mixccl::abitest {
namespace {
#include "tests/abi/abi_prelude.inc"

// The facts the task statement fixes, checked at compile time.
static_assert(sizeof(ncclUniqueId) == 128 && NCCL_UNIQUE_ID_BYTES == 128);
static_assert(sizeof(ncclConfig_t) == 80 && std::is_same_v<ncclConfig_t, struct ncclConfig_v22800>);
static_assert(NCCL_VERSION_CODE == 22809 && NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH) == NCCL_VERSION_CODE);
static_assert(sizeof(ncclRedOp_t) == sizeof(int) && ncclMaxRedOp == 0x7fffffff);
static_assert(sizeof(ncclTeam_t) == 3 * sizeof(int));

// Each pncclX has exactly the type of its ncclX.
#define MIXCCL_SAME_AS_P(fn) static_assert(std::is_same_v<decltype(fn), decltype(p##fn)>, #fn " != p" #fn);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
MIXCCL_SAME_AS_P(ncclResetDebugInit)
#pragma GCC diagnostic pop
MIXCCL_SAME_AS_P(ncclMemAlloc)
MIXCCL_SAME_AS_P(ncclMemFree)
MIXCCL_SAME_AS_P(ncclGetVersion)
MIXCCL_SAME_AS_P(ncclGetUniqueId)
MIXCCL_SAME_AS_P(ncclCommInitRankConfig)
MIXCCL_SAME_AS_P(ncclCommInitRank)
MIXCCL_SAME_AS_P(ncclCommInitAll)
MIXCCL_SAME_AS_P(ncclCommFinalize)
MIXCCL_SAME_AS_P(ncclCommDestroy)
MIXCCL_SAME_AS_P(ncclCommAbort)
MIXCCL_SAME_AS_P(ncclCommRevoke)
MIXCCL_SAME_AS_P(ncclCommSplit)
MIXCCL_SAME_AS_P(ncclCommShrink)
MIXCCL_SAME_AS_P(ncclCommInitRankScalable)
MIXCCL_SAME_AS_P(ncclGetErrorString)
MIXCCL_SAME_AS_P(ncclGetLastError)
MIXCCL_SAME_AS_P(ncclCommGetAsyncError)
MIXCCL_SAME_AS_P(ncclCommCount)
MIXCCL_SAME_AS_P(ncclCommCuDevice)
MIXCCL_SAME_AS_P(ncclCommUserRank)
MIXCCL_SAME_AS_P(ncclCommRegister)
MIXCCL_SAME_AS_P(ncclCommDeregister)
MIXCCL_SAME_AS_P(ncclCommWindowRegister)
MIXCCL_SAME_AS_P(ncclCommWindowDeregister)
MIXCCL_SAME_AS_P(ncclRedOpCreatePreMulSum)
MIXCCL_SAME_AS_P(ncclRedOpDestroy)
MIXCCL_SAME_AS_P(ncclReduce)
MIXCCL_SAME_AS_P(ncclBcast)
MIXCCL_SAME_AS_P(ncclBroadcast)
MIXCCL_SAME_AS_P(ncclAllReduce)
MIXCCL_SAME_AS_P(ncclReduceScatter)
MIXCCL_SAME_AS_P(ncclAllGather)
MIXCCL_SAME_AS_P(ncclAlltoAll)
MIXCCL_SAME_AS_P(ncclGather)
MIXCCL_SAME_AS_P(ncclScatter)
MIXCCL_SAME_AS_P(ncclSend)
MIXCCL_SAME_AS_P(ncclRecv)
MIXCCL_SAME_AS_P(ncclGroupStart)
MIXCCL_SAME_AS_P(ncclGroupEnd)
MIXCCL_SAME_AS_P(ncclGroupSimulateEnd)
MIXCCL_SAME_AS_P(ncclDevCommCreate)
MIXCCL_SAME_AS_P(ncclDevCommDestroy)
MIXCCL_SAME_AS_P(ncclTeamWorld)
MIXCCL_SAME_AS_P(ncclTeamLsa)
MIXCCL_SAME_AS_P(ncclTeamRail)
MIXCCL_SAME_AS_P(ncclTeamRankToWorld)
MIXCCL_SAME_AS_P(ncclTeamRankToLsa)
MIXCCL_SAME_AS_P(ncclLsaBarrierCreateRequirement)
MIXCCL_SAME_AS_P(ncclGinBarrierCreateRequirement)
MIXCCL_SAME_AS_P(ncclLLA2ACalcSlots)
MIXCCL_SAME_AS_P(ncclLLA2ACreateRequirement)
MIXCCL_SAME_AS_P(ncclResetDebugInitInternal)
#undef MIXCCL_SAME_AS_P

}  // namespace

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
Table ourCoreTable() {
  static const Item kItems[] = {
#include "tests/abi/abi_items.inc"
  };
  return Table{kItems, sizeof(kItems) / sizeof(kItems[0]), true, ""};
}
#pragma GCC diagnostic pop

Table ourDeviceTable() {
  static const Item kItems[] = {
#include "tests/abi/abi_device_items.inc"
  };
  return Table{kItems, sizeof(kItems) / sizeof(kItems[0]), true, ""};
}

}  // namespace mixccl::abitest
