// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "src/core/arith_check.h"

#include <string>

namespace mixccl {
namespace {

// Odd and above any vector width, so both the vector body and the scalar tail of a kernel run.
constexpr size_t kCount = 1031;

// The fixed input: xorshift64 from a constant seed per type and operand, as raw bits. Random bit
// patterns of the float types cover NaNs, infinities, denormals and both zeros; the check is
// about bits, not about sensible values.
std::vector<uint8_t> fixedInput(DataType t, int operand) {
  std::vector<uint8_t> out(kCount * dataTypeSize(t));
  uint64_t x = 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(t) << 8) ^ static_cast<uint64_t>(operand);
  for (uint8_t& byte : out) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    byte = static_cast<uint8_t>(x >> 32);
  }
  return out;
}

// FNV-1a over the result bytes. NaNs are hashed as they are: every backend stores the canonical
// NaN (PROTOCOL.md, "Arithmetic"), and the random inputs make plenty of them (inf - inf, 0 * inf,
// NaN operands), so a backend that passes on the hardware's own NaN fails the check.
void hashInto(const std::vector<uint8_t>& bytes, uint32_t* h) {
  for (uint8_t byte : bytes) {
    *h ^= byte;
    *h *= 16777619u;
  }
}

// The backend's device memory for the three operands, freed on every path.
struct DeviceBuffers {
  DeviceBackend& dev;
  void* p[3] = {};
  ~DeviceBuffers() {
    for (void* q : p) {
      if (q != nullptr) (void)dev.free(q);
    }
  }
};

// One reduction of the fixed inputs under `spec`, hashed into *h.
struct Variant {
  RedOpKind op;
  bool preMul;
  bool pre;
  bool post;
  bool withA;  // false: dst = post(pre(b)), the first step of a chain
};

Result printType(DeviceBackend& dev, DataType t, uint32_t ops, uint32_t* out) {
  const size_t bytes = kCount * dataTypeSize(t);
  DeviceBuffers buf{dev};
  for (void*& q : buf.p) MIXCCL_TRY(dev.alloc(bytes, &q));
  const std::vector<uint8_t> a = fixedInput(t, 0), b = fixedInput(t, 1);
  MIXCCL_TRY(dev.copy(buf.p[0], a.data(), bytes, nullptr));
  MIXCCL_TRY(dev.copy(buf.p[1], b.data(), bytes, nullptr));

  const bool isInt = !isFloatType(t);
  const Variant variants[] = {
      {RedOpKind::kSum, false, false, false, true}, {RedOpKind::kProd, false, false, false, true},
      {RedOpKind::kMax, false, false, false, true}, {RedOpKind::kMin, false, false, false, true},
      {RedOpKind::kSum, true, true, false, true},   {RedOpKind::kSum, true, true, false, false},
      {RedOpKind::kSum, false, false, isInt, true},
  };
  uint32_t h = 2166136261u;
  std::vector<uint8_t> result(bytes);
  for (const Variant& v : variants) {
    if ((ops & (1u << static_cast<int>(v.op))) == 0) continue;
    if (v.preMul && (ops & (1u << static_cast<int>(RedOpKind::kPreMulSum))) == 0) continue;
    if (v.post && (ops & (1u << static_cast<int>(RedOpKind::kAvg))) == 0) continue;
    ReduceSpec spec;
    spec.dtype = t;
    spec.op = v.op;
    spec.preMul = v.preMul;
    // Avg's multiplier for 3 ranks on float types; an integer PreMulSum scalar otherwise.
    if (v.preMul) encodeScalar(t, isInt ? 3.0 : 1.0 / 3.0, spec.scalar);
    spec.divisor = v.post ? 3 : 0;
    MIXCCL_TRY(dev.reduce(buf.p[2], v.withA ? buf.p[0] : nullptr, buf.p[1], kCount, spec, v.pre, v.post, nullptr));
    MIXCCL_TRY(dev.copy(result.data(), buf.p[2], bytes, nullptr));
    hashInto(result, &h);
  }
  *out = h == 0 ? 1 : h;  // 0 means "type not supported"
  return Result::kSuccess;
}

}  // namespace

Result arithmeticPrint(DeviceBackend& backend, ArithPrint* out) {
  out->fill(0);
  const BackendCaps caps = backend.caps();
  for (int t = 0; t < kNumDataTypes; ++t) {
    if ((caps.dtypes & (1u << t)) == 0) continue;
    Result r = printType(backend, static_cast<DataType>(t), caps.ops, &(*out)[t]);
    if (r != Result::kSuccess) {
      return fail(r, "the %s backend failed its arithmetic check for %s: %s", backend.name(),
                  dataTypeName(static_cast<DataType>(t)), lastError().c_str());
    }
  }
  return Result::kSuccess;
}

Result compareArithmetic(const std::vector<ArithFacts>& ranks, int self) {
  // Every rank compares every pair (not just itself against the others), so all ranks reach the
  // same verdict and name the same pair. Ranks with identical facts form one class; only the first
  // rank of each class is compared, which keeps this linear in ranks for the usual one or two
  // backends.
  std::vector<size_t> firsts;
  for (size_t r = 0; r < ranks.size(); ++r) {
    bool known = false;
    for (size_t f : firsts) {
      known = known || (ranks[f].dtypes == ranks[r].dtypes && ranks[f].print == ranks[r].print);
    }
    if (!known) firsts.push_back(r);
  }
  for (size_t x = 0; x < firsts.size(); ++x) {
    for (size_t y = x + 1; y < firsts.size(); ++y) {
      const ArithFacts& i = ranks[firsts[x]];
      const ArithFacts& j = ranks[firsts[y]];
      std::string types;
      const uint32_t both = i.dtypes & j.dtypes;
      for (int t = 0; t < kNumDataTypes; ++t) {
        if ((both & (1u << t)) == 0 || i.print[t] == j.print[t]) continue;
        if (!types.empty()) types += ", ";
        types += dataTypeName(static_cast<DataType>(t));
      }
      if (types.empty()) continue;
      return fail(Result::kInvalidUsage,
                  "rank %d: the arithmetic of rank %zu (backend %s) and rank %zu (backend %s) differs for %s: their "
                  "reductions would give different bits, so this communicator cannot be created; fix or replace the "
                  "backend that rounds differently (PROTOCOL.md, \"Arithmetic\")",
                  self, firsts[x], i.backend.c_str(), firsts[y], j.backend.c_str(), types.c_str());
    }
  }
  return Result::kSuccess;
}

}  // namespace mixccl
