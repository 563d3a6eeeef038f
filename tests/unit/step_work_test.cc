// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// Which described steps one device command may cover (src/core/step_work.h): adjacent pieces of
// one kind whose operands continue each other's, never a step that reads what the run writes.

#include "src/core/step_work.h"

#include <gtest/gtest.h>

#include <vector>

namespace mixccl {
namespace {

constexpr size_t kPiece = 4096;

// A receive-reduce-send of piece k: slot-in + input -> output and slot-out, all in big buffers.
struct Buffers {
  std::vector<char> in = std::vector<char>(8 * kPiece), out = std::vector<char>(8 * kPiece),
                    slotIn = std::vector<char>(8 * kPiece), slotOut = std::vector<char>(8 * kPiece);
  StepWork relay(size_t k) {
    StepWork w;
    w.out = out.data() + k * kPiece;
    w.outBuf = algo::Buf::kOutput;
    w.out2 = slotOut.data() + k * kPiece;
    w.a = slotIn.data() + k * kPiece;
    w.b = in.data() + k * kPiece;
    w.bBuf = algo::Buf::kInput;
    w.bytes = kPiece;
    return w;
  }
};

StepWork runOf(StepWork first, size_t steps) {
  first.bytes *= steps;
  return first;
}

TEST(StepWork, AdjacentPiecesOfOneKindContinueARun) {
  Buffers b;
  EXPECT_TRUE(continues(b.relay(0), b.relay(1)));
  EXPECT_TRUE(continues(runOf(b.relay(2), 3), b.relay(5)));
}

TEST(StepWork, AGapAnotherKindOrOtherFlagsEndTheRun) {
  Buffers b;
  EXPECT_FALSE(continues(b.relay(0), b.relay(2)));  // a slot or a piece between
  StepWork copy = b.relay(1);
  copy.copy = true;
  EXPECT_FALSE(continues(b.relay(0), copy));
  StepWork last = b.relay(1);
  last.finalize = true;
  EXPECT_FALSE(continues(b.relay(0), last));
  StepWork noSend = b.relay(1);
  noSend.out2 = nullptr;
  EXPECT_FALSE(continues(b.relay(0), noSend));
  StepWork otherBuf = b.relay(1);
  otherBuf.outBuf = algo::Buf::kScratch;  // adjacent bytes of another buffer
  EXPECT_FALSE(continues(b.relay(0), otherBuf));
  StepWork none;
  EXPECT_FALSE(continues(b.relay(0), none));
  EXPECT_FALSE(continues(none, b.relay(0)));
}

// In place the output and the input are the same bytes, element for element: one command reads
// each element before it writes it, as the separate steps do.
TEST(StepWork, InPlacePiecesContinue) {
  Buffers b;
  StepWork w0 = b.relay(0), w1 = b.relay(1);
  w0.b = w0.out;
  w1.b = w1.out;
  EXPECT_TRUE(continues(w0, w1));
}

// A step that reads what the run writes (at another element) must wait for it: a new command.
TEST(StepWork, AStepReadingWhatTheRunWritesStartsANewCommand) {
  Buffers b;
  StepWork w0 = b.relay(0), w1 = b.relay(1);
  // Each piece reads the output one piece ahead of what it writes: separately fine, but as one
  // command piece 0's reads race with piece 1's writes.
  w0.b = b.out.data() + kPiece;
  w1.b = b.out.data() + 2 * kPiece;
  EXPECT_FALSE(continues(w0, w1));
  // A copy whose source overlaps the run's destination the same way.
  StepWork c0, c1;
  c0.copy = c1.copy = true;
  c0.bytes = c1.bytes = kPiece;
  c0.out = b.out.data() + kPiece;
  c1.out = b.out.data() + 2 * kPiece;
  c0.b = b.out.data();
  c1.b = b.out.data() + kPiece;
  EXPECT_FALSE(continues(c0, c1));
}

}  // namespace
}  // namespace mixccl
