// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// The reference side of the ABI comparison: expands the item lists against NVIDIA's nccl.h and
// nccl_device headers. Built with only the CUDA include directory on its path, so <nccl.h> here is
// NVIDIA's. Without that header (MIXCCL_HAVE_REAL_NCCL undefined) the tables report why.

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <typeinfo>

#include "tests/abi/abi_table.h"

#ifdef MIXCCL_HAVE_REAL_NCCL
#include <nccl.h>
#if __has_include(<nccl_device/core.h>)
#define MIXCCL_HAVE_REAL_NCCL_DEVICE 1
#include <nccl_device/core.h>
#include <nccl_device/gin_barrier.h>
#include <nccl_device/impl/core__types.h>
#include <nccl_device/impl/gin_barrier__types.h>
#include <nccl_device/impl/ll_a2a__types.h>
#include <nccl_device/impl/lsa_barrier__types.h>
#include <nccl_device/ll_a2a.h>
#include <nccl_device/lsa_barrier.h>
#endif
#endif

namespace mixccl::abitest {

#ifdef MIXCCL_HAVE_REAL_NCCL
namespace {
#include "tests/abi/abi_prelude.inc"
}  // namespace

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
Table realCoreTable() {
  static const Item kItems[] = {
#include "tests/abi/abi_items.inc"
  };
  return Table{kItems, sizeof(kItems) / sizeof(kItems[0]), true, ""};
}
#pragma GCC diagnostic pop

#ifdef MIXCCL_HAVE_REAL_NCCL_DEVICE
Table realDeviceTable() {
  static const Item kItems[] = {
#include "tests/abi/abi_device_items.inc"
  };
  return Table{kItems, sizeof(kItems) / sizeof(kItems[0]), true, ""};
}
#else
Table realDeviceTable() { return Table{nullptr, 0, false, "NVIDIA's nccl_device/core.h was not found next to nccl.h"}; }
#endif

#else
Table realCoreTable() {
  return Table{nullptr, 0, false,
               "NVIDIA's nccl.h (and cuda_runtime.h) was not found at configure time; set CUDA_HOME or "
               "MIXCCL_REAL_NCCL_INCLUDE_DIR to compare against it"};
}
Table realDeviceTable() { return realCoreTable(); }
#endif

}  // namespace mixccl::abitest
