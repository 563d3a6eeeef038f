// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// The communicator's scratch pool (src/core/scratch_pool.h): a buffer handed back serves the next
// operation that fits in it, the smallest fitting one first.

#include "src/core/scratch_pool.h"

#include <gtest/gtest.h>

#include <memory>

#include "src/device/device_backend.h"

namespace mixccl {
namespace {

class ScratchPoolTest : public ::testing::Test {
 protected:
  std::unique_ptr<DeviceBackend> dev_ = makeHostBackend();
  ScratchPool pool_;
};

TEST_F(ScratchPoolTest, AReturnedBufferServesTheNextOperationThatFits) {
  void* first = nullptr;
  {
    ScratchMemory s;
    ASSERT_EQ(s.allocate(&pool_, dev_.get(), 4096), Result::kSuccess);
    first = s.get();
    ASSERT_NE(first, nullptr);
    static_cast<char*>(first)[4095] = 1;  // all of it is ours
  }
  ScratchMemory smaller;
  ASSERT_EQ(smaller.allocate(&pool_, dev_.get(), 1000), Result::kSuccess);
  EXPECT_EQ(smaller.get(), first);
  // Taken: a second operation at the same time gets another buffer.
  ScratchMemory concurrent;
  ASSERT_EQ(concurrent.allocate(&pool_, dev_.get(), 1000), Result::kSuccess);
  EXPECT_NE(concurrent.get(), first);
}

TEST_F(ScratchPoolTest, TheSmallestFittingBufferIsTaken) {
  void* big = nullptr;
  void* small = nullptr;
  {
    ScratchMemory a, b;
    ASSERT_EQ(a.allocate(&pool_, dev_.get(), 1 << 20), Result::kSuccess);
    ASSERT_EQ(b.allocate(&pool_, dev_.get(), 1 << 12), Result::kSuccess);
    big = a.get();
    small = b.get();
  }
  ScratchMemory s;
  ASSERT_EQ(s.allocate(&pool_, dev_.get(), 100), Result::kSuccess);
  EXPECT_EQ(s.get(), small);
  ScratchMemory t;
  ASSERT_EQ(t.allocate(&pool_, dev_.get(), 1 << 19), Result::kSuccess);
  EXPECT_EQ(t.get(), big);
}

}  // namespace
}  // namespace mixccl
