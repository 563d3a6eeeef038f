// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "perf/common/values.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace mixccl::perf {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64's finaliser: cheap and well spread
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

void movedElement(int rank, size_t idx, size_t size, unsigned char* out) {
  const uint64_t h = mix((static_cast<uint64_t>(rank) << 40) ^ idx);
  std::memcpy(out, &h, size);  // size <= 8
}

// How many ranks may add a value up to 2 (then doubled by mulsum) and stay exact and in range.
int sumLimitFor(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
      return 31;
    case ncclUint8:
      return 63;
    case ncclFloat8e5m2:
      return 2;  // exact integers up to 8
    case ncclFloat8e4m3:
      return 4;  // up to 16
    case ncclBfloat16:
      return 32;  // up to 256
    case ncclFloat16:
      return 256;  // up to 2048
    default:
      return 1 << 20;
  }
}

// True when n ranks each contributing v to a float avg give exactly v, for the ways a library may
// compute it: v * round(1/n) or round(v/n) per rank, then a sum in any order.
bool avgExact(ncclDataType_t t, int n, double v) {
  // long double holds k*s exactly for k < 2^11 even when s is a double (53 + 11 bits), so it can
  // tell whether the type itself represents each partial sum.
  const double inv = roundToType(t, 1.0 / n);
  for (double s : {roundToType(t, v * inv), roundToType(t, v / n)}) {
    if (static_cast<long double>(s) * n != v) return false;
    for (int k = 1; k <= n; ++k) {
      const long double exact = static_cast<long double>(s) * k;
      if (static_cast<long double>(roundToType(t, static_cast<double>(exact))) != exact) return false;
    }
  }
  return true;
}

}  // namespace

ValuePlan::ValuePlan(const CollDesc& desc, OpKind op, const TypeInfo& type, int nranks)
    : desc_(desc), op_(op), type_(type), nranks_(nranks), sumLimit_(sumLimitFor(type.type)) {
  if (desc.reduces && op == OpKind::kAvg && type.isFloat) {
    for (double w : {1.0, 2.0, 4.0, 3.0, 0.5}) {
      for (double v : {w * nranks, w}) {
        if (std::find(avgGood_.begin(), avgGood_.end(), v) == avgGood_.end() && avgExact(type.type, nranks, v)) {
          avgGood_.push_back(v);
        }
      }
    }
    avgGood_.push_back(0.0);  // always exact; keeps the pattern non-constant
  }
}

double ValuePlan::reduceInput(int rank, size_t idx) const {
  switch (op_) {
    case OpKind::kProd:
      return (rank < 6 && (idx + rank) % 3 == 0) ? 2.0 : 1.0;
    case OpKind::kMax:
    case OpKind::kMin: {
      const double v = static_cast<double>((idx * 3 + static_cast<size_t>(rank) * 5) % 7);
      return type_.isSigned ? v - 3 : v;
    }
    case OpKind::kAvg:
      if (type_.isFloat) return avgGood_[idx % avgGood_.size()];
      [[fallthrough]];
    case OpKind::kSum:
    case OpKind::kMulSum:
      return rank < sumLimit_ ? static_cast<double>((idx + 2 * static_cast<size_t>(rank)) % 3) : 0.0;
  }
  return 0;
}

double ValuePlan::reduceExpected(size_t idx) const {
  double acc = reduceInput(0, idx);
  for (int r = 1; r < nranks_; ++r) {
    const double v = reduceInput(r, idx);
    switch (op_) {
      case OpKind::kProd:
        acc *= v;
        break;
      case OpKind::kMax:
        acc = std::max(acc, v);
        break;
      case OpKind::kMin:
        acc = std::min(acc, v);
        break;
      default:
        acc += v;
        break;
    }
  }
  switch (op_) {
    case OpKind::kMulSum:
      return acc * kMulSumScalar;
    case OpKind::kAvg:
      return type_.isFloat ? acc / nranks_ : std::trunc(acc / nranks_);
    default:
      return acc;
  }
}

void ValuePlan::fillInput(void* buf, size_t n, int rank) const {
  auto* p = static_cast<unsigned char*>(buf);
  for (size_t i = 0; i < n; ++i, p += type_.size) {
    if (desc_.reduces) {
      encodeValue(type_.type, reduceInput(rank, i), p);
    } else {
      movedElement(rank, i, type_.size, p);
    }
  }
}

size_t ValuePlan::countWrong(const void* recv, size_t recvCount, int rank, int root, size_t param) const {
  const auto* p = static_cast<const unsigned char*>(recv);
  size_t wrong = 0;
  unsigned char want[8];
  for (size_t j = 0; j < recvCount; ++j, p += type_.size) {
    const Source src = desc_.source(rank, nranks_, root, param, j);
    if (src.kind == Source::kMove) {
      movedElement(src.rank, src.index, type_.size, want);
      wrong += std::memcmp(p, want, type_.size) != 0;
    } else if (src.kind == Source::kReduce) {
      wrong += decodeValue(type_.type, p) != reduceExpected(src.index);
    }
  }
  return wrong;
}

}  // namespace mixccl::perf
