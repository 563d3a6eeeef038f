// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Little-endian encoding helpers for fixed-layout wire records (PROTOCOL.md). The reader never
// reads past its buffer: a short buffer yields zeros, and callers bound every length they decode.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace mixccl {

class WireWriter {
 public:
  WireWriter(uint8_t* out, size_t cap) : out_(out), cap_(cap) { memset(out_, 0, cap_); }
  void u32(uint32_t v) { put(v, 4); }
  void u64(uint64_t v) { put(v, 8); }
  void bytes(const void* data, size_t n, size_t field) {
    if (pos_ + field > cap_ || n > field) return;
    if (n > 0) memcpy(out_ + pos_, data, n);  // an empty vector's data() may be null: UB for memcpy
    pos_ += field;
  }
  void fixedString(const std::string& s, size_t field) {
    bytes(s.data(), s.size() < field ? s.size() : field - 1, field);
  }

 private:
  void put(uint64_t v, int n) {
    if (pos_ + n > cap_) return;
    for (int i = 0; i < n; ++i) out_[pos_++] = static_cast<uint8_t>(v >> (8 * i));
  }
  uint8_t* out_;
  size_t cap_;
  size_t pos_ = 0;
};

class WireReader {
 public:
  WireReader(const uint8_t* in, size_t len) : in_(in), len_(len) {}
  uint32_t u32() { return static_cast<uint32_t>(get(4)); }
  uint64_t u64() { return get(8); }
  const uint8_t* here() const { return in_ + pos_; }
  void skip(size_t n) { pos_ = pos_ + n > len_ ? len_ : pos_ + n; }
  std::string fixedString(size_t field) {
    if (pos_ + field > len_) return {};
    const char* s = reinterpret_cast<const char*>(in_ + pos_);
    pos_ += field;
    // The writer always leaves the field's last byte as the terminator; ignoring it here keeps
    // decode(encode(x)) == x for every string a reader can return.
    return std::string(s, strnlen(s, field - 1));
  }

 private:
  uint64_t get(int n) {
    if (pos_ + n > len_) return 0;
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(in_[pos_++]) << (8 * i);
    return v;
  }
  const uint8_t* in_;
  size_t len_;
  size_t pos_ = 0;
};

inline uint64_t fnv1a64(const void* data, size_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

}  // namespace mixccl
