// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// Owed closing tokens (src/core/owed_tokens.h): a root reads each peer's tokens in the order it
// became owed them, and anything else where a token is due is a mismatch that names the earlier
// operation.

#include "src/core/owed_tokens.h"

#include <gtest/gtest.h>

#include <string>

#include "src/core/op_stamp.h"

namespace mixccl {
namespace {

OpIdentity broadcast(uint64_t seq, int root) {
  OpIdentity op;
  op.kind = CollKind::kBroadcast;
  op.seq = seq;
  op.root = root;
  op.count = 1;
  op.rank = root;
  op.stamp = (seq & 0xffff) | static_cast<uint64_t>(CollKind::kBroadcast) << 16 | static_cast<uint64_t>(root) << 28;
  return op;
}

TEST(OwedTokens, TokensAreReadPerPeerInOrder) {
  OwedTokens owed;
  EXPECT_TRUE(owed.empty());
  EXPECT_EQ(owed.oldestPeer(), -1);
  owed.add(3, broadcast(7, 0), 6);
  owed.add(5, broadcast(8, 0), 6);
  owed.add(3, broadcast(9, 0), 6);
  EXPECT_EQ(owed.size(), 3u);
  EXPECT_TRUE(owed.from(3));
  EXPECT_FALSE(owed.from(4));
  EXPECT_EQ(owed.oldestPeer(), 3);
  EXPECT_NE(owed.describe(3).find("seq 7"), std::string::npos) << owed.describe(3);

  // Peer 5's token may arrive first: lanes are independent.
  EXPECT_EQ(owed.match(5, 0, broadcast(8, 0).stamp), Result::kSuccess);
  EXPECT_FALSE(owed.from(5));
  // Peer 3's come in the order they were owed.
  EXPECT_EQ(owed.match(3, 0, broadcast(7, 0).stamp), Result::kSuccess);
  EXPECT_EQ(owed.match(3, 0, broadcast(9, 0).stamp), Result::kSuccess);
  EXPECT_TRUE(owed.empty());
}

TEST(OwedTokens, AnotherRootWhereTheTokenIsDueIsAMismatch) {
  OwedTokens owed;
  owed.add(1, broadcast(4, 0), 6);
  // Rank 1 took itself for the root: its data stands where its token is due.
  EXPECT_EQ(owed.match(1, 64, broadcast(4, 1).stamp), Result::kInvalidUsage);
  const std::string msg = lastError();
  EXPECT_NE(msg.find("Broadcast (seq 4) on rank 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("passed root 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("after that call returned"), std::string::npos) << msg;
}

TEST(OwedTokens, ATokenWithAPayloadIsAMismatch) {
  OwedTokens owed;
  owed.add(2, broadcast(5, 1), 6);
  EXPECT_EQ(owed.match(2, 8, broadcast(5, 1).stamp), Result::kInvalidUsage);
  EXPECT_NE(lastError().find("closing token"), std::string::npos) << lastError();
}

// The tokens left owed between calls leave the peer's lane two places (its data, a probe); with
// fewer none stays owed (the root waits for its token). A TCP or RDMA lane holds MIXCCL_FIFO_DEPTH
// messages (8 by default), a shm lane 64 empty ones (its lines).
TEST(OwedTokens, LimitLeavesTwoPlacesInTheLane) {
  EXPECT_EQ(OwedTokens::limit(8), 6u);
  EXPECT_EQ(OwedTokens::limit(64), 62u);
  EXPECT_EQ(OwedTokens::limit(3), 1u);
  EXPECT_EQ(OwedTokens::limit(2), 0u);
  EXPECT_EQ(OwedTokens::limit(1), 0u);
}

// Each peer's tokens count against the limit of its own lane: a shm neighbour may owe 62 while a
// TCP one owes 6.
TEST(OwedTokens, EachPeerHasTheLimitOfItsLane) {
  OwedTokens owed;
  EXPECT_EQ(owed.peerOverLimit(), -1);
  for (uint64_t seq = 1; seq <= 3; ++seq) owed.add(1, broadcast(seq, 0), 2);  // rank 1: a lane of 4
  for (uint64_t seq = 4; seq <= 6; ++seq) owed.add(2, broadcast(seq, 3), 62);
  EXPECT_EQ(owed.peerOverLimit(), 1) << "rank 1 owes 3 of at most 2";
  EXPECT_EQ(owed.match(1, 0, broadcast(1, 0).stamp), Result::kSuccess);
  EXPECT_EQ(owed.peerOverLimit(), -1) << "rank 1 owes 2, rank 2 owes 3 of 62";
  EXPECT_EQ(owed.oldestPeer(), 1);
  owed.add(1, broadcast(7, 0), 0);  // a root that must wait for every token of rank 1
  EXPECT_EQ(owed.peerOverLimit(), 1);
  for (uint64_t seq : {2, 3, 7}) EXPECT_EQ(owed.match(1, 0, broadcast(seq, 0).stamp), Result::kSuccess);
  EXPECT_FALSE(owed.from(1));
  EXPECT_TRUE(owed.from(2));
  EXPECT_EQ(owed.oldestPeer(), 2);
  EXPECT_EQ(owed.size(), 3u);
}

// Which calls send and read their closing token: every kClosingTokenEvery-th collective and every
// large one, from facts both sides agree on.
TEST(ClosingTokenDue, EveryEighthCollectiveAndEveryLargeOne) {
  Op op;
  op.kind = CollKind::kBroadcast;
  op.dtype = DataType::kInt32;
  op.count = 1;
  int due = 0;
  for (uint64_t seq = 0; seq < 64; ++seq) {
    op.seq = seq;
    due += closingTokenDue(op) ? 1 : 0;
    EXPECT_EQ(closingTokenDue(op), seq % 8 == 0) << "seq " << seq;
  }
  EXPECT_EQ(due, 8);
  op.seq = 3;
  op.count = kClosingTokenBytes / 4 - 1;
  EXPECT_FALSE(closingTokenDue(op));
  op.count = kClosingTokenBytes / 4;
  EXPECT_TRUE(closingTokenDue(op));
  op.dtype = DataType::kFloat64;
  op.count = kClosingTokenBytes / 8;
  EXPECT_TRUE(closingTokenDue(op));
}

}  // namespace
}  // namespace mixccl
