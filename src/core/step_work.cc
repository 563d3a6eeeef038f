// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

#include "src/core/step_work.h"

#include <type_traits>

#include "src/core/communicator.h"

namespace mixccl {
namespace {

const char* at(const void* p, size_t bytes) { return static_cast<const char*>(p) + bytes; }

// `next` operand continues the run's: both absent, or right behind the run's bytes.
bool follows(const void* run, size_t bytes, const void* next) {
  return run == nullptr ? next == nullptr : next == at(run, bytes);
}

// A write range and a read range of the merged command: the same start (each element is read
// before it is written, as within one step) or apart.
bool safe(const void* w, const void* r, size_t bytes) {
  if (w == nullptr || r == nullptr || w == r) return true;
  return at(w, bytes) <= static_cast<const char*>(r) || at(r, bytes) <= static_cast<const char*>(w);
}

}  // namespace

bool continues(const StepWork& run, const StepWork& next) {
  if (run.bytes == 0 || next.bytes == 0) return false;
  if (run.copy != next.copy || run.pre != next.pre || run.finalize != next.finalize) return false;
  if (run.outBuf != next.outBuf || run.bBuf != next.bBuf) return false;
  if (!follows(run.out, run.bytes, next.out) || !follows(run.out2, run.bytes, next.out2) ||
      !follows(run.a, run.bytes, next.a) || !follows(run.b, run.bytes, next.b)) {
    return false;
  }
  const size_t total = run.bytes + next.bytes;
  for (const void* w : {static_cast<const void*>(run.out), static_cast<const void*>(run.out2)}) {
    if (!safe(w, run.a, total) || !safe(w, run.b, total)) return false;
  }
  return safe(run.out, run.out2, total);
}

void alignToRun(const StepWork& run, StepWork* next, const SendConnection* sconn, const RecvConnection* rconn) {
  if (run.bytes == 0 || next->bytes == 0) return;
  auto align = [&](const void* runPtr, auto** ptr, const auto* conn) {
    if (conn == nullptr || runPtr == nullptr || *ptr == nullptr || *ptr == at(runPtr, run.bytes)) return;
    const void* alias = conn->ringAlias(*ptr);
    using T = std::remove_pointer_t<std::remove_pointer_t<decltype(ptr)>>;
    if (alias == at(runPtr, run.bytes)) *ptr = static_cast<T*>(const_cast<void*>(alias));
  };
  // Slots: the send slot is out2 or, without a destination buffer, out; received data is a, or b
  // when it does not come from a schedule buffer.
  if (next->outBuf == algo::Buf::kNone) align(run.out, &next->out, sconn);
  align(run.out2, &next->out2, sconn);
  align(run.a, &next->a, rconn);
  if (next->bBuf == algo::Buf::kNone) align(run.b, &next->b, rconn);
}

Result issueWork(const Op& op, const StepWork& w) {
  DeviceBackend* dev = op.comm->backend();
  if (w.copy) {
    if (w.b != nullptr) MIXCCL_TRY(dev->copy(w.out, w.b, w.bytes, op.queue));
    return w.out2 != nullptr ? dev->copy(w.out2, w.out, w.bytes, op.queue) : Result::kSuccess;
  }
  const size_t count = w.bytes / dataTypeSize(op.dtype);
  if (w.out2 != nullptr) return dev->reduceDual(w.out, w.out2, w.a, w.b, count, op.spec, w.pre, w.finalize, op.queue);
  return dev->reduce(w.out, w.a, w.b, count, op.spec, w.pre, w.finalize, op.queue);
}

}  // namespace mixccl
