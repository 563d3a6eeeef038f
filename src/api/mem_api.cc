// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// Memory: ncclMemAlloc/Free, buffer and window registration, user reduction operators.

#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "src/api/guard.h"
#include "src/api/handle.h"
#include "src/device/device_backend.h"
#include "src/device/select.h"

using mixccl::Communicator;
using mixccl::DataType;
using mixccl::fail;
using mixccl::Result;
using mixccl::api::apiGuard;

namespace {

// Pointers ncclMemAlloc handed out and ncclMemFree has not taken back. NCCL passes any other
// pointer to the device runtime, which refuses it; free() would abort the process instead.
// Never destroyed: an application may still call ncclMemFree from an atexit handler.
std::mutex gAllocMutex;
std::unordered_set<void*>* gAllocations = new std::unordered_set<void*>();

// A registration as the user holds it (the ncclCommRegister handle, or an ncclWindow_t).
struct Registration {
  uint64_t commSerial;  // ncclComm::serial of its communicator: a reused handle address is not it
  uint64_t regionId;    // in that communicator's UserRegions
};

// Live registrations by handle, so a bad or double deregistration is an error rather than a
// crash. A handle is a tagged count, not the address of anything: addresses are reused, so a
// handle kept past its deregistration or past its communicator's destroy could otherwise name a
// newer registration that got the same memory, and deregistering it would silently drop that
// one. The tag keeps handles clear of small integers and of user pointers (no user-space address
// has these top bits), so dereferencing one faults at once. All three guarded by gRegMutex.
static_assert(sizeof(uintptr_t) == 8, "registration handles are 64-bit tagged counts");
constexpr uintptr_t kRegHandleTag = uintptr_t{0x6d78} << 48;  // "mx"
std::mutex gRegMutex;
std::unordered_map<uintptr_t, Registration> gRegistrations;
uintptr_t gRegCount = 0;

// `outName` / `handleName` are the parameter names of the calling entry point, for messages.
// `emptyIsNull`: a registration of no bytes hands out NULL and records nothing (windows: NCCL
// 2.28.9 registers nothing there and returns success; NULL is what deregistering then takes back,
// and newer NCCLs set *win to NULL too).
Result makeRegistration(const char* fn, const char* outName, ncclComm_t comm, void* buff, size_t size,
                        ncclWindow_t* out, bool emptyIsNull) {
  Communicator* c = nullptr;
  MIXCCL_TRY(mixccl::api::lookupComm(fn, comm, &c));
  if (out == nullptr) return fail(Result::kInvalidArgument, "%s: %s (output pointer) is NULL", fn, outName);
  if (size == 0 && emptyIsNull) {
    *out = nullptr;
    return Result::kSuccess;
  }
  if (buff == nullptr && size > 0) return fail(Result::kInvalidArgument, "%s: buff is NULL with size %zu", fn, size);
  // Host buffers need no pinning for the shm and TCP transports: the registration records the
  // range, and the RDMA transport registers it with the device when a message first uses it
  // (zero-copy sends and receives, ENGINE.md).
  std::lock_guard<std::mutex> lock(gRegMutex);
  const uint64_t regionId = c->regions().add(buff, size);
  const uintptr_t key = kRegHandleTag | ++gRegCount;
  try {
    gRegistrations.emplace(key, Registration{comm->serial, regionId});
  } catch (...) {
    c->regions().remove(regionId);
    throw;  // apiGuard reports it
  }
  *out = reinterpret_cast<ncclWindow_t>(key);
  return Result::kSuccess;
}

Result dropRegistration(const char* fn, const char* handleName, ncclComm_t comm, void* handle) {
  Communicator* c = nullptr;
  MIXCCL_TRY(mixccl::api::lookupComm(fn, comm, &c));
  // NULL is what NCCL hands out where it does not register (NCCL_LOCAL_REGISTER=0, a size-0
  // window), and deregistering it succeeds there, so portable cleanup code passes it back.
  if (handle == nullptr) return Result::kSuccess;
  std::lock_guard<std::mutex> lock(gRegMutex);
  auto it = gRegistrations.find(reinterpret_cast<uintptr_t>(handle));
  if (it == gRegistrations.end() || it->second.commSerial != comm->serial) {
    // ncclInvalidUsage, as NCCL answers a handle its communicator does not hold.
    return fail(Result::kInvalidUsage,
                "%s: %s %p is not a live registration of the communicator of rank %d: it was deregistered "
                "already, belongs to another communicator, or its communicator was destroyed or aborted (which "
                "drops its registrations); nothing was deregistered",
                fn, handleName, handle, c->rank());
  }
  c->regions().remove(it->second.regionId);
  gRegistrations.erase(it);
  return Result::kSuccess;
}

}  // namespace

void mixccl::api::dropRegistrations(const ncclComm* handle) noexcept {
  // The communicator's UserRegions go with it; only the handles are left to forget.
  std::lock_guard<std::mutex> lock(gRegMutex);
  for (auto it = gRegistrations.begin(); it != gRegistrations.end();) {
    it = it->second.commSerial == handle->serial ? gRegistrations.erase(it) : std::next(it);
  }
}

MIXCCL_API(ncclResult_t, ncclMemAlloc, void** ptr, size_t size) {
  return apiGuard("ncclMemAlloc", [&]() -> Result {
    if (ptr == nullptr) return fail(Result::kInvalidArgument, "ncclMemAlloc: ptr is NULL");
    *ptr = nullptr;
    if (size == 0) return Result::kSuccess;
    // The process's backend (MIXCCL_DEVICE_BACKEND): device memory where it has a device.
    mixccl::DeviceBackend* backend = nullptr;
    MIXCCL_TRY(mixccl::processBackend(&backend));
    Result r = backend->alloc(size, ptr);
    if (r != Result::kSuccess) {
      *ptr = nullptr;
      return fail(r, "ncclMemAlloc: %s", mixccl::lastError().c_str());
    }
    try {
      std::lock_guard<std::mutex> lock(gAllocMutex);
      gAllocations->insert(*ptr);
    } catch (...) {
      (void)backend->free(*ptr);
      *ptr = nullptr;
      throw;  // apiGuard reports it
    }
    return Result::kSuccess;
  });
}

MIXCCL_API(ncclResult_t, ncclMemFree, void* ptr) {
  return apiGuard("ncclMemFree", [&]() -> Result {
    if (ptr == nullptr) return Result::kSuccess;
    {
      std::lock_guard<std::mutex> lock(gAllocMutex);
      if (gAllocations->erase(ptr) == 0) {
        return fail(Result::kInvalidArgument,
                    "ncclMemFree: ptr %p was not returned by ncclMemAlloc, or was freed already; free other memory "
                    "the way it was allocated",
                    ptr);
      }
    }
    // Only a pointer the backend handed out gets here, so the backend exists.
    mixccl::DeviceBackend* backend = nullptr;
    MIXCCL_TRY(mixccl::processBackend(&backend));
    return backend->free(ptr);
  });
}

MIXCCL_API(ncclResult_t, ncclCommRegister, const ncclComm_t comm, void* buff, size_t size, void** handle) {
  return apiGuard("ncclCommRegister", [&]() -> Result {
    ncclWindow_t reg = nullptr;
    MIXCCL_TRY(makeRegistration("ncclCommRegister", "handle", comm, buff, size, handle == nullptr ? nullptr : &reg,
                                /*emptyIsNull=*/false));
    *handle = reg;
    return Result::kSuccess;
  });
}

MIXCCL_API(ncclResult_t, ncclCommDeregister, const ncclComm_t comm, void* handle) {
  return apiGuard("ncclCommDeregister", [&] { return dropRegistration("ncclCommDeregister", "handle", comm, handle); });
}

MIXCCL_API(ncclResult_t, ncclCommWindowRegister, ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
           int winFlags) {
  return apiGuard("ncclCommWindowRegister", [&]() -> Result {
    if (winFlags != NCCL_WIN_DEFAULT && winFlags != NCCL_WIN_COLL_SYMMETRIC) {
      return fail(Result::kInvalidArgument, "ncclCommWindowRegister: unknown winFlags 0x%x", winFlags);
    }
    return makeRegistration("ncclCommWindowRegister", "win", comm, buff, size, win, /*emptyIsNull=*/true);
  });
}

MIXCCL_API(ncclResult_t, ncclCommWindowDeregister, ncclComm_t comm, ncclWindow_t win) {
  return apiGuard("ncclCommWindowDeregister", [&]() -> Result {
    // NCCL returns before it looks at the communicator here (ncclCommDeregister checks it first).
    if (win == nullptr) return Result::kSuccess;
    return dropRegistration("ncclCommWindowDeregister", "win", comm, win);
  });
}

MIXCCL_API(ncclResult_t, ncclRedOpCreatePreMulSum, ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
           ncclScalarResidence_t residence, ncclComm_t comm) {
  return apiGuard("ncclRedOpCreatePreMulSum", [&]() -> Result {
    const char* fn = "ncclRedOpCreatePreMulSum";
    Communicator* c = nullptr;
    MIXCCL_TRY(mixccl::api::lookupCallerComm(fn, comm, &c));
    if (op == nullptr) return fail(Result::kInvalidArgument, "%s: op is NULL", fn);
    if (scalar == nullptr) return fail(Result::kInvalidArgument, "%s: scalar is NULL", fn);
    if (static_cast<int>(datatype) < 0 || static_cast<int>(datatype) >= mixccl::kNumDataTypes) {
      return fail(Result::kInvalidArgument, "%s: invalid datatype %d", fn, static_cast<int>(datatype));
    }
    if (residence != ncclScalarHostImmediate && residence != ncclScalarDevice) {
      return fail(Result::kInvalidArgument, "%s: invalid scalar residence %d", fn, static_cast<int>(residence));
    }
    int handle = 0;
    MIXCCL_TRY(
        c->createPreMulSum(static_cast<DataType>(datatype), scalar, residence == ncclScalarHostImmediate, &handle));
    *op = static_cast<ncclRedOp_t>(handle);
    return Result::kSuccess;
  });
}

MIXCCL_API(ncclResult_t, ncclRedOpDestroy, ncclRedOp_t op, ncclComm_t comm) {
  return apiGuard("ncclRedOpDestroy", [&]() -> Result {
    // The operator is checked first, as NCCL does.
    if (static_cast<int>(op) < 0) {
      return fail(Result::kInvalidArgument, "ncclRedOpDestroy: invalid reduction operator %d", static_cast<int>(op));
    }
    if (static_cast<int>(op) < mixccl::kNumBuiltinOps) {
      return fail(Result::kInvalidArgument, "ncclRedOpDestroy: operator %d is built-in and cannot be destroyed",
                  static_cast<int>(op));
    }
    Communicator* c = nullptr;
    MIXCCL_TRY(mixccl::api::lookupCallerComm("ncclRedOpDestroy", comm, &c));
    return c->destroyRedOp(static_cast<int>(op));
  });
}
