// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "perf/common/datatypes.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace mixccl::perf {
namespace {

// A binary floating-point format narrower than float: sign, `expBits`, `manBits`, IEEE-style bias.
// `ieeeSpecials` is false for f8e4m3 (OCP "FN": no infinities, only S.1111.111 is NaN).
struct MiniFloat {
  int expBits;
  int manBits;
  bool ieeeSpecials;
  int bias() const { return (1 << (expBits - 1)) - 1; }
};
constexpr MiniFloat kHalf{5, 10, true};
constexpr MiniFloat kBf16{8, 7, true};
constexpr MiniFloat kE4m3{4, 3, false};
constexpr MiniFloat kE5m2{5, 2, true};

uint32_t encodeMini(const MiniFloat& f, double x) {
  const uint32_t signBit = std::signbit(x) ? 1u << (f.expBits + f.manBits) : 0u;
  const uint32_t expMax = (1u << f.expBits) - 1;
  const uint32_t manOne = 1u << f.manBits;
  if (std::isnan(x)) return signBit | (expMax << f.manBits) | (manOne - 1);
  double a = std::fabs(x);
  if (a == 0) return signBit;
  // Largest finite value: all-ones exponent is reserved for IEEE-style formats; for e4m3 only the
  // all-ones mantissa at the top exponent is (NaN).
  const int topExp = f.ieeeSpecials ? static_cast<int>(expMax) - 1 : static_cast<int>(expMax);
  const double topMan = f.ieeeSpecials ? manOne - 1 : manOne - 2;
  const double maxFinite = std::ldexp(1.0 + topMan / manOne, topExp - f.bias());
  if (std::isinf(x) || a > maxFinite) {
    // Saturate like the conversion the library uses would for finite overflow of the test values.
    if (f.ieeeSpecials && std::isinf(x)) return signBit | (expMax << f.manBits);
    a = maxFinite;
  }
  int e = 0;
  std::frexp(a, &e);
  int unbiased = e - 1;  // a = 1.m * 2^unbiased
  const int minExp = 1 - f.bias();
  if (unbiased < minExp) {
    // Subnormal: a multiple of 2^(minExp - manBits); a carry into manOne is the smallest normal.
    const double q = std::nearbyint(std::ldexp(a, f.manBits - minExp));
    return signBit | static_cast<uint32_t>(q);
  }
  double q = std::nearbyint(std::ldexp(a, f.manBits - unbiased));  // in [manOne, 2*manOne]
  if (q >= 2.0 * manOne) {
    q = manOne;
    ++unbiased;
  }
  const uint32_t expField = static_cast<uint32_t>(unbiased + f.bias());
  uint32_t bits = signBit | (expField << f.manBits) | (static_cast<uint32_t>(q) - manOne);
  if (!f.ieeeSpecials && expField == expMax && (bits & (manOne - 1)) == manOne - 1) --bits;  // keep off NaN
  return bits;
}

double decodeMini(const MiniFloat& f, uint32_t bits) {
  const uint32_t manOne = 1u << f.manBits;
  const uint32_t expMax = (1u << f.expBits) - 1;
  const bool negative = (bits >> (f.expBits + f.manBits)) & 1;
  const uint32_t expField = (bits >> f.manBits) & expMax;
  const uint32_t man = bits & (manOne - 1);
  double v;
  if (f.ieeeSpecials && expField == expMax) {
    v = man ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (!f.ieeeSpecials && expField == expMax && man == manOne - 1) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (expField == 0) {
    v = std::ldexp(static_cast<double>(man), 1 - f.bias() - f.manBits);
  } else {
    v = std::ldexp(static_cast<double>(manOne + man), static_cast<int>(expField) - f.bias() - f.manBits);
  }
  return negative ? -v : v;
}

template <typename T>
void storeInt(double v, void* dst) {
  const double lo = static_cast<double>(std::numeric_limits<T>::min());
  const double hi = static_cast<double>(std::numeric_limits<T>::max());
  T t = static_cast<T>(std::clamp(std::trunc(v), lo, hi));
  std::memcpy(dst, &t, sizeof(T));
}

template <typename T>
double loadAs(const void* src) {
  T t;
  std::memcpy(&t, src, sizeof(T));
  return static_cast<double>(t);
}

}  // namespace

const std::vector<TypeInfo>& allTypes() {
  static const std::vector<TypeInfo> kTypes = {
      {ncclInt8, "int8", 1, false, true},        {ncclUint8, "uint8", 1, false, false},
      {ncclInt32, "int32", 4, false, true},      {ncclUint32, "uint32", 4, false, false},
      {ncclInt64, "int64", 8, false, true},      {ncclUint64, "uint64", 8, false, false},
      {ncclFloat16, "half", 2, true, true},      {ncclFloat32, "float", 4, true, true},
      {ncclFloat64, "double", 8, true, true},    {ncclBfloat16, "bfloat16", 2, true, true},
      {ncclFloat8e4m3, "f8e4m3", 1, true, true}, {ncclFloat8e5m2, "f8e5m2", 1, true, true},
  };
  return kTypes;
}

std::optional<TypeInfo> typeByName(const std::string& name) {
  static const std::vector<std::pair<const char*, const char*>> kAliases = {
      {"char", "int8"},     {"int", "int32"},      {"fp16", "half"},      {"float16", "half"},
      {"fp32", "float"},    {"float32", "float"},  {"fp64", "double"},    {"float64", "double"},
      {"bf16", "bfloat16"}, {"fp8e4m3", "f8e4m3"}, {"fp8e5m2", "f8e5m2"},
  };
  std::string n = name;
  for (const auto& [alias, real] : kAliases) {
    if (n == alias) n = real;
  }
  for (const TypeInfo& t : allTypes()) {
    if (n == t.name) return t;
  }
  return std::nullopt;
}

const TypeInfo& typeInfo(ncclDataType_t type) {
  for (const TypeInfo& t : allTypes()) {
    if (t.type == type) return t;
  }
  return allTypes()[0];  // unreachable for the types above
}

const std::vector<OpInfo>& allOps() {
  static const std::vector<OpInfo> kOps = {{OpKind::kSum, "sum"}, {OpKind::kProd, "prod"}, {OpKind::kMax, "max"},
                                           {OpKind::kMin, "min"}, {OpKind::kAvg, "avg"},   {OpKind::kMulSum, "mulsum"}};
  return kOps;
}

std::optional<OpInfo> opByName(const std::string& name) {
  for (const OpInfo& o : allOps()) {
    if (name == o.name) return o;
  }
  return std::nullopt;
}

void encodeValue(ncclDataType_t type, double value, void* dst) {
  uint32_t bits = 0;
  switch (type) {
    case ncclInt8:
      return storeInt<int8_t>(value, dst);
    case ncclUint8:
      return storeInt<uint8_t>(value, dst);
    case ncclInt32:
      return storeInt<int32_t>(value, dst);
    case ncclUint32:
      return storeInt<uint32_t>(value, dst);
    case ncclInt64:
      return storeInt<int64_t>(value, dst);
    case ncclUint64:
      return storeInt<uint64_t>(value, dst);
    case ncclFloat32: {
      const float f = static_cast<float>(value);
      std::memcpy(dst, &f, sizeof f);
      return;
    }
    case ncclFloat64:
      std::memcpy(dst, &value, sizeof value);
      return;
    case ncclFloat16:
      bits = encodeMini(kHalf, value);
      break;
    case ncclBfloat16:
      bits = encodeMini(kBf16, value);
      break;
    case ncclFloat8e4m3:
      bits = encodeMini(kE4m3, value);
      break;
    case ncclFloat8e5m2:
      bits = encodeMini(kE5m2, value);
      break;
    default:
      return;
  }
  if (typeInfo(type).size == 2) {
    const uint16_t b = static_cast<uint16_t>(bits);
    std::memcpy(dst, &b, 2);
  } else {
    *static_cast<uint8_t*>(dst) = static_cast<uint8_t>(bits);
  }
}

double decodeValue(ncclDataType_t type, const void* src) {
  uint16_t b16 = 0;
  switch (type) {
    case ncclInt8:
      return loadAs<int8_t>(src);
    case ncclUint8:
      return loadAs<uint8_t>(src);
    case ncclInt32:
      return loadAs<int32_t>(src);
    case ncclUint32:
      return loadAs<uint32_t>(src);
    case ncclInt64:
      return loadAs<int64_t>(src);
    case ncclUint64:
      return loadAs<uint64_t>(src);
    case ncclFloat32:
      return loadAs<float>(src);
    case ncclFloat64:
      return loadAs<double>(src);
    case ncclFloat16:
      std::memcpy(&b16, src, 2);
      return decodeMini(kHalf, b16);
    case ncclBfloat16:
      std::memcpy(&b16, src, 2);
      return decodeMini(kBf16, b16);
    case ncclFloat8e4m3:
      return decodeMini(kE4m3, *static_cast<const uint8_t*>(src));
    case ncclFloat8e5m2:
      return decodeMini(kE5m2, *static_cast<const uint8_t*>(src));
    default:
      return 0;
  }
}

double roundToType(ncclDataType_t type, double value) {
  unsigned char buf[8];
  encodeValue(type, value, buf);
  return decodeValue(type, buf);
}

}  // namespace mixccl::perf
