// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// The peer-info record (PROTOCOL.md, "Peer info"): round trip, fields a reader does not know are
// skipped, lengths that leave the record are refused naming the rank, a new transport or
// backend field keeps the record at its fixed size, and the pid-space field may be absent.

#include "src/core/peer_info.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "common/pid_space.h"
#include "common/result.h"

namespace mixccl {
namespace {

using Bytes = std::vector<uint8_t>;

PeerInfo sample() {
  PeerInfo p;
  p.protocolVersion = 4;
  p.rank = 3;
  p.nranks = 8;
  p.pid = 4242;
  p.hostHash = 0x1122334455667788ull;
  p.host = "node-7";
  p.transports.push_back({"shm", {1, 2, 3, 4, 5, 6, 7, 8, 9}});
  p.transports.push_back({"tcp", Bytes(20, 0xab)});
  p.backend.wireId = 1;
  p.backend.name = "opencl";
  p.backend.dtypes = 0x3ff;
  p.backend.ops = 0x3f;
  p.backend.flags = 7;
  for (size_t i = 0; i < p.backend.arithmetic.size(); ++i) p.backend.arithmetic[i] = 0x01020304u * (i + 1);
  return p;
}

Bytes encoded(const PeerInfo& p) {
  Bytes b(PeerInfo::kWireBytes, 0xee);
  EXPECT_EQ(p.encode(b.data(), b.size()), Result::kSuccess) << lastError();
  return b;
}

uint32_t getU32(const Bytes& b, size_t at) {
  return b[at] | (b[at + 1] << 8) | (b[at + 2] << 16) | (static_cast<uint32_t>(b[at + 3]) << 24);
}
void putU16(Bytes* b, size_t at, uint32_t v) {
  (*b)[at] = static_cast<uint8_t>(v);
  (*b)[at + 1] = static_cast<uint8_t>(v >> 8);
}
void putU32(Bytes* b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*b)[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
constexpr size_t kUsedAt = 8;

// Inserts `field` (already padded) at byte `at` of the record and grows the length in use.
void insertAt(Bytes* b, size_t at, const Bytes& field) {
  const uint32_t used = getU32(*b, kUsedAt);
  b->insert(b->begin() + static_cast<long>(at), field.begin(), field.end());
  b->resize(PeerInfo::kWireBytes);
  putU32(b, kUsedAt, used + static_cast<uint32_t>(field.size()));
}

Bytes field(uint16_t type, const Bytes& value) {
  Bytes f((4 + value.size() + 3) & ~size_t{3}, 0);
  putU16(&f, 0, type);
  putU16(&f, 2, static_cast<uint32_t>(value.size()));
  std::copy(value.begin(), value.end(), f.begin() + 4);
  return f;
}

// "ta", "tb", ...: distinct short transport names.
std::string nth(char prefix, int i) { return std::string{prefix, static_cast<char>('a' + i)}; }

Result decode(const Bytes& b, PeerInfo* out, size_t len = PeerInfo::kWireBytes) {
  return PeerInfo::decode(b.data(), len, 3, out);
}

TEST(PeerInfoTest, RoundTrip) {
  const PeerInfo p = sample();
  Bytes b = encoded(p);
  EXPECT_EQ(getU32(b, 0), PeerInfo::kMagic);
  EXPECT_EQ(getU32(b, kUsedAt), p.encodedBytes());
  // Bytes past the length in use are zero, so a record never leaks stale memory to peers.
  for (size_t i = p.encodedBytes(); i < b.size(); ++i) ASSERT_EQ(b[i], 0) << "byte " << i;
  PeerInfo q;
  ASSERT_EQ(decode(b, &q), Result::kSuccess) << lastError();
  EXPECT_EQ(q, p);
  ASSERT_NE(q.transport("tcp"), nullptr);
  EXPECT_EQ(q.transport("tcp")->blob, Bytes(20, 0xab));
  EXPECT_EQ(q.transport("rdma"), nullptr);
}

// A rank that could not set up its part sends its facts and why (the init-failure field) and
// nothing else; the reader needs no backend field then. A long message is cut, not refused.
TEST(PeerInfoTest, InitFailureRecordRoundTrip) {
  PeerInfo p = sample();
  p.transports.clear();
  p.backend = PeerBackendInfo{};
  p.initResult = static_cast<uint32_t>(Result::kInvalidUsage);
  p.initError = "cannot load device backend plugin /x.so";
  Bytes b = encoded(p);
  for (size_t i = p.encodedBytes(); i < b.size(); ++i) ASSERT_EQ(b[i], 0) << "byte " << i;
  PeerInfo q;
  ASSERT_EQ(decode(b, &q), Result::kSuccess) << lastError();
  EXPECT_EQ(q, p);

  // Whatever else the rank had set up stays off the wire.
  PeerInfo withRest = sample();
  withRest.initResult = p.initResult;
  withRest.initError = std::string(3000, 'm');
  ASSERT_EQ(decode(encoded(withRest), &q), Result::kSuccess) << lastError();
  EXPECT_TRUE(q.transports.empty());
  EXPECT_EQ(q.backend, PeerBackendInfo{});
  EXPECT_EQ(q.initError, std::string(PeerInfo::kMaxInitErrorBytes, 'm'));

  // Nor is a pid-space field read back from such a record (the fuzzer's find: a record with both
  // read back with the pid space, which encode() leaves out, so it did not re-encode the same).
  Bytes both = encoded(p);
  insertAt(&both, getU32(both, kUsedAt), field(PeerInfo::kFieldPidSpace, {1, 2, 3, 4, 5, 6, 7, 8}));
  ASSERT_EQ(decode(both, &q), Result::kSuccess) << lastError();
  EXPECT_EQ(q.pidSpace, 0u);
  EXPECT_EQ(q, p);
}

TEST(PeerInfoTest, MalformedInitFailureFieldIsRefused) {
  PeerInfo p = sample();
  p.initResult = static_cast<uint32_t>(Result::kSystemError);
  p.initError = "no memory";
  Bytes b = encoded(p);
  putU32(&b, PeerInfo::kFactsEnd + 4, 0);  // a failure without a code
  PeerInfo q;
  EXPECT_EQ(decode(b, &q), Result::kRemoteError);
  EXPECT_NE(lastError().find("init-failure field"), std::string::npos) << lastError();
  Bytes twice = encoded(p);
  insertAt(&twice, getU32(twice, kUsedAt), field(PeerInfo::kFieldInitFailure, {1, 0, 0, 0}));
  EXPECT_EQ(decode(twice, &q), Result::kRemoteError);
}

TEST(PeerInfoTest, EmptyBlobAndLongHost) {
  PeerInfo p = sample();
  p.transports[0].blob.clear();  // shm disabled on that rank
  p.host = std::string(200, 'h');
  PeerInfo q;
  ASSERT_EQ(decode(encoded(p), &q), Result::kSuccess) << lastError();
  EXPECT_EQ(q.host, std::string(PeerInfo::kHostBytes - 1, 'h'));
  ASSERT_NE(q.transport("shm"), nullptr);
  EXPECT_TRUE(q.transport("shm")->blob.empty());
}

TEST(PeerInfoTest, UnknownFieldsAreSkipped) {
  const PeerInfo p = sample();
  Bytes b = encoded(p);
  // A field of a later build between the facts and the first transport, and one at the end.
  insertAt(&b, PeerInfo::kFactsEnd, field(0x7777, Bytes(13, 0x42)));
  insertAt(&b, getU32(b, kUsedAt), field(0x0100, Bytes(0, 0)));
  PeerInfo q;
  ASSERT_EQ(decode(b, &q), Result::kSuccess) << lastError();
  EXPECT_EQ(q, p);
}

TEST(PeerInfoTest, LaterFactsBeforeTheFieldsAreSkipped) {
  const PeerInfo p = sample();
  Bytes b = encoded(p);
  insertAt(&b, PeerInfo::kFactsEnd, Bytes(8, 0x99));  // 8 bytes of facts a later format adds
  putU16(&b, 6, PeerInfo::kFactsEnd + 8);
  PeerInfo q;
  ASSERT_EQ(decode(b, &q), Result::kSuccess) << lastError();
  EXPECT_EQ(q, p);
}

TEST(PeerInfoTest, LongerBackendFieldKeepsItsPrefix) {
  const PeerInfo p = sample();
  Bytes b = encoded(p);
  const size_t backendAt = p.encodedBytes() - 4 - PeerInfo::kBackendValueBytes;
  ASSERT_EQ(b[backendAt], PeerInfo::kFieldBackend);
  // A later version of the backend field appends 8 bytes; this reader keeps what it knows.
  putU16(&b, backendAt + 2, PeerInfo::kBackendValueBytes + 8);
  insertAt(&b, p.encodedBytes(), Bytes(8, 0x11));
  PeerInfo q;
  ASSERT_EQ(decode(b, &q), Result::kSuccess) << lastError();
  EXPECT_EQ(q, p);
}

TEST(PeerInfoTest, AddingATransportKeepsTheRecordSize) {
  PeerInfo p = sample();
  const Bytes before = encoded(p);
  p.transports.push_back({"rdma", Bytes(40, 5)});
  const Bytes after = encoded(p);
  EXPECT_EQ(before.size(), after.size());
  EXPECT_GT(getU32(after, kUsedAt), getU32(before, kUsedAt));
  // A build that knows nothing of "rdma" still reads every other field of the bigger record.
  PeerInfo q;
  ASSERT_EQ(decode(after, &q), Result::kSuccess) << lastError();
  EXPECT_EQ(q.transports.size(), 3u);
  EXPECT_EQ(q.transport("tcp")->blob, Bytes(20, 0xab));
  EXPECT_EQ(q.backend, p.backend);
  // The documented room: ten transports with full blobs next to the facts and the backend.
  PeerInfo full = sample();
  full.transports.clear();
  for (int i = 0; i < 10; ++i) full.transports.push_back({nth('t', i), Bytes(64, 1)});
  EXPECT_LE(full.encodedBytes(), PeerInfo::kWireBytes);
  ASSERT_EQ(decode(encoded(full), &q), Result::kSuccess) << lastError();
  EXPECT_EQ(q, full);
}

TEST(PeerInfoTest, EncodeRefusesWhatDoesNotFit) {
  PeerInfo p = sample();
  for (int i = 0; i < 12; ++i) p.transports.push_back({nth('x', i), Bytes(64, 1)});
  Bytes b(PeerInfo::kWireBytes);
  EXPECT_EQ(p.encode(b.data(), b.size()), Result::kInternalError);
  EXPECT_NE(lastError().find("rank 3"), std::string::npos) << lastError();
  p = sample();
  p.transports[1].blob.assign(65, 0);
  EXPECT_EQ(p.encode(b.data(), b.size()), Result::kInternalError);
  p = sample();
  p.transports[1].name = "a_name_of_16_chr";
  EXPECT_EQ(p.encode(b.data(), b.size()), Result::kInternalError);
  p = sample();
  p.transports[1].name = "shm";
  EXPECT_EQ(p.encode(b.data(), b.size()), Result::kInternalError);
  EXPECT_NE(lastError().find("twice"), std::string::npos) << lastError();
  p = sample();
  p.backend.name.clear();
  EXPECT_EQ(p.encode(b.data(), b.size()), Result::kInternalError);
}

// Every malformed record is refused with an error naming the rank (slot 3 here).
void expectRefused(const Bytes& b, Result code, const char* words, size_t len = PeerInfo::kWireBytes) {
  PeerInfo q;
  EXPECT_EQ(decode(b, &q, len), code) << words;
  EXPECT_NE(lastError().find("rank 3"), std::string::npos) << lastError();
  EXPECT_NE(lastError().find(words), std::string::npos) << lastError();
}

TEST(PeerInfoTest, LengthsOutsideTheRecordAreRefused) {
  const PeerInfo p = sample();
  const Bytes good = encoded(p);
  const size_t used = getU32(good, kUsedAt);

  Bytes b = good;
  putU32(&b, kUsedAt, PeerInfo::kWireBytes + 4);  // claims more than the slot holds
  expectRefused(b, Result::kRemoteError, "bytes in use");
  expectRefused(good, Result::kRemoteError, "bytes in use", used - 4);  // the record cut short
  b = good;
  putU32(&b, kUsedAt, 50);  // less than the header
  expectRefused(b, Result::kRemoteError, "bytes in use");
  b = good;
  putU16(&b, 6, PeerInfo::kFactsEnd + 2);  // fields must start 4-aligned
  expectRefused(b, Result::kRemoteError, "bytes in use");

  // The first transport field claims more bytes than remain.
  b = good;
  putU16(&b, PeerInfo::kFactsEnd + 2, 1000);
  expectRefused(b, Result::kRemoteError, "past the");
  // A field header cut off by the length in use.
  b = good;
  putU32(&b, kUsedAt, static_cast<uint32_t>(used + 2));
  b[used] = 9;
  expectRefused(b, Result::kRemoteError, "cut off");
  // A transport blob over the limit.
  b = good;
  insertAt(&b, PeerInfo::kFactsEnd, field(PeerInfo::kFieldTransport, [] {
    Bytes v(PeerInfo::kNameBytes + 65, 0);
    v[0] = 'z';
    return v;
  }()));
  expectRefused(b, Result::kRemoteError, "65-byte blob");
  // A transport field too short for its name, and one with an unterminated name.
  b = good;
  insertAt(&b, PeerInfo::kFactsEnd, field(PeerInfo::kFieldTransport, Bytes(8, 'a')));
  expectRefused(b, Result::kRemoteError, "no valid name");
  b = good;
  insertAt(&b, PeerInfo::kFactsEnd, field(PeerInfo::kFieldTransport, Bytes(PeerInfo::kNameBytes, 'a')));
  expectRefused(b, Result::kRemoteError, "no valid name");
  // A buffer shorter than the header is the caller's bug.
  expectRefused(good, Result::kInternalError, "shorter than", 20);
}

TEST(PeerInfoTest, MalformedRecordsAreRefused) {
  const PeerInfo p = sample();
  const Bytes good = encoded(p);
  Bytes b = good;
  putU32(&b, 0, 0xdeadbeef);
  expectRefused(b, Result::kRemoteError, "magic");
  b = good;
  putU32(&b, 0, 3);  // a lane-protocol-3 build's fixed record starts with its version
  expectRefused(b, Result::kInvalidUsage, "older mixccl");
  b = good;
  putU16(&b, 4, 2);
  expectRefused(b, Result::kInvalidUsage, "format 2");
  // No backend field: the record ends before it.
  b = good;
  putU32(&b, kUsedAt, static_cast<uint32_t>(p.encodedBytes() - 4 - PeerInfo::kBackendValueBytes));
  expectRefused(b, Result::kRemoteError, "no device-backend field");
  // Two backend fields.
  b = good;
  insertAt(
      &b, PeerInfo::kFactsEnd,
      Bytes(good.begin() + (p.encodedBytes() - 4 - PeerInfo::kBackendValueBytes), good.begin() + p.encodedBytes()));
  expectRefused(b, Result::kRemoteError, "repeated");
  // The same transport twice.
  b = good;
  insertAt(&b, PeerInfo::kFactsEnd, field(PeerInfo::kFieldTransport, [] {
    Bytes v(PeerInfo::kNameBytes, 0);
    v[0] = 't', v[1] = 'c', v[2] = 'p';
    return v;
  }()));
  expectRefused(b, Result::kRemoteError, "twice");
}

// The types of the fields of a record, in order.
std::vector<uint16_t> fieldTypes(const Bytes& b) {
  std::vector<uint16_t> types;
  const size_t used = getU32(b, kUsedAt);
  for (size_t at = b[6] | (b[7] << 8); at + 4 <= used;) {
    types.push_back(static_cast<uint16_t>(b[at] | (b[at + 1] << 8)));
    at += 4 + ((static_cast<size_t>(b[at + 2] | (b[at + 3] << 8)) + 3) & ~size_t{3});
  }
  return types;
}

// The pid space (a u64 field): a same-host peer whose pid lives in another pid namespace has a pid
// that means nothing here. A record without the field (an older build of the same protocol, or
// a rank without /proc) reads as unknown: 0, "the same as mine" (samePidSpace).
TEST(PeerInfoTest, PidSpaceFieldRoundTrip) {
  PeerInfo p = sample();
  const size_t without = p.encodedBytes();
  p.pidSpace = 0xfeedface12345678ull;
  EXPECT_EQ(p.encodedBytes(), without + 12);
  const Bytes b = encoded(p);
  const std::vector<uint16_t> types = fieldTypes(b);
  EXPECT_EQ(std::count(types.begin(), types.end(), PeerInfo::kFieldPidSpace), 1);
  PeerInfo q;
  ASSERT_EQ(decode(b, &q), Result::kSuccess) << lastError();
  EXPECT_EQ(q, p);
  EXPECT_EQ(q.pidSpace, 0xfeedface12345678ull);
  EXPECT_FALSE(samePidSpace(q.pidSpace, 0xfeedface12345679ull));
  EXPECT_TRUE(samePidSpace(q.pidSpace, p.pidSpace));
}

TEST(PeerInfoTest, RecordWithoutPidSpaceReadsAsUnknown) {
  const PeerInfo p = sample();  // pidSpace 0: nothing to send
  ASSERT_EQ(p.pidSpace, 0u);
  const Bytes b = encoded(p);
  const std::vector<uint16_t> types = fieldTypes(b);
  EXPECT_EQ(std::count(types.begin(), types.end(), PeerInfo::kFieldPidSpace), 0);
  PeerInfo q;
  q.pidSpace = 99;  // decode starts from a blank record
  ASSERT_EQ(decode(b, &q), Result::kSuccess) << lastError();
  EXPECT_EQ(q, p);
  EXPECT_EQ(q.pidSpace, 0u);
  EXPECT_TRUE(samePidSpace(q.pidSpace, localPidSpace()));  // as today: pids are trusted
  EXPECT_NE(localPidSpace(), 0u) << "this test host has /proc";
}

TEST(PeerInfoTest, PidSpaceFieldVersionsAndMalformedOnes) {
  PeerInfo p = sample();
  p.pidSpace = 0x0102030405060708ull;
  // A later version of the field appends bytes; this reader keeps the first 8.
  Bytes b = encoded(sample());
  Bytes longer = {8, 7, 6, 5, 4, 3, 2, 1, 0xaa, 0xbb, 0xcc, 0xdd};
  insertAt(&b, PeerInfo::kFactsEnd, field(PeerInfo::kFieldPidSpace, longer));
  PeerInfo q;
  ASSERT_EQ(decode(b, &q), Result::kSuccess) << lastError();
  EXPECT_EQ(q, p);
  b = encoded(sample());
  insertAt(&b, PeerInfo::kFactsEnd, field(PeerInfo::kFieldPidSpace, {1, 2, 3, 4}));
  expectRefused(b, Result::kRemoteError, "pid-space field");
  b = encoded(p);
  insertAt(&b, PeerInfo::kFactsEnd, field(PeerInfo::kFieldPidSpace, Bytes(8, 1)));
  expectRefused(b, Result::kRemoteError, "repeated");
}

}  // namespace
}  // namespace mixccl
