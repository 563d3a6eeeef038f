// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// An asynchronous DeviceBackend over host memory, for testing the engine (docs/ENGINE.md) without
// a GPU. Its "streams" are FakeStreams: a worker thread each, running enqueued tasks in order, as
// a device runs a stream's kernels. Fences, start markers and completion gates are real tasks on
// those streams, so a test can block a stream (a Latch task, like a user event holding the kernel
// that writes the input) and watch the collective wait for it, and watch work enqueued after the
// collective wait for the gate. Arithmetic is the host backend's.
//
// The opaque handles (Fence, StreamGate, WorkQueue) are this file's own types cast to the
// backend's opaque pointers, so no definition of those structs clashes with another backend's.
// Every wait here is bounded (kBound); a gate that is never released is counted, not waited for
// forever.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "src/device/device_backend.h"

namespace mixccl::testing {

constexpr std::chrono::seconds kBound{60};

// A one-shot gate a test opens.
class Latch {
 public:
  void open() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  // False when it stayed closed for `limit`.
  bool wait(std::chrono::milliseconds limit = kBound) {
    std::unique_lock<std::mutex> lk(mu_);
    return cv_.wait_for(lk, limit, [&] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

class FakeStream {
 public:
  FakeStream() : worker_([this] { loop(); }) {}
  ~FakeStream() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
  FakeStream(const FakeStream&) = delete;
  FakeStream& operator=(const FakeStream&) = delete;

  void enqueue(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      tasks_.push_back(std::move(task));
      ++enqueued_;
    }
    cv_.notify_all();
  }
  // Waits until every task enqueued so far ran; false after `limit`.
  bool sync(std::chrono::milliseconds limit = kBound) {
    std::unique_lock<std::mutex> lk(mu_);
    const uint64_t target = enqueued_;
    return cv_.wait_for(lk, limit, [&] { return ran_ >= target; });
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return stop_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, and everything ran
      std::function<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      lk.unlock();
      task();
      lk.lock();
      ++ran_;
      cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  uint64_t enqueued_ = 0;
  uint64_t ran_ = 0;
  bool stop_ = false;
  std::thread worker_;
};

class AsyncBackend : public DeviceBackend {
 public:
  AsyncBackend() : host_(makeHostBackend()) {}
  ~AsyncBackend() override {
    for (const auto& a : allocs_) std::free(a.first);
  }

  // A user stream of this backend (owned by it).
  FakeStream* makeStream() {
    std::lock_guard<std::mutex> lk(mu_);
    streams_.push_back(std::make_unique<FakeStream>());
    return streams_.back().get();
  }
  // Takes kCapHostMemory away, as a discrete device without host access would (or OpenCL).
  void setDeviceMemoryOnly(bool only) { deviceOnly_ = only; }
  // Reports kCapSharesHostCores, as a CPU device (POCL) does.
  void setSharesHostCores(bool shares) { sharesCores_ = shares; }
  // Makes memKind() call [p, p+bytes) memory this backend cannot reach.
  void markForeign(const void* p) {
    std::lock_guard<std::mutex> lk(mu_);
    foreign_.insert(p);
  }
  int gatesHeld() const { return gatesHeld_.load(); }
  int gatesReleased() const { return gatesReleased_.load(); }
  int gateTimeouts() const { return gateTimeouts_.load(); }
  int queuesOpen() const { return queuesOpen_.load(); }

  const char* name() const override { return "async-test"; }
  const char* vendor() const override { return "mixccl tests"; }
  uint32_t wireId() const override { return host_->wireId(); }
  BackendCaps caps() const override {
    BackendCaps c = host_->caps();
    c.flags |= kCapAsync;
    if (deviceOnly_) c.flags &= ~kCapHostMemory;
    if (sharesCores_) c.flags |= kCapSharesHostCores;
    return c;
  }
  MemKind memKind(const void* ptr) const override {
    std::lock_guard<std::mutex> lk(mu_);
    if (foreign_.count(ptr) != 0) return MemKind::kUnknown;
    // Any byte of an allocation is device memory, as a real backend tells (a buffer may start at an
    // offset into one, and the library checks both ends of every buffer).
    auto it = allocs_.upper_bound(const_cast<void*>(ptr));
    if (it == allocs_.begin()) return MemKind::kHost;
    --it;
    const auto* start = static_cast<const char*>(it->first);
    const auto* p = static_cast<const char*>(ptr);
    return p < start + it->second ? MemKind::kDevice : MemKind::kHost;
  }
  Result checkStream(void* stream) const override {
    if (stream == nullptr) return Result::kSuccess;
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto& s : streams_) {
      if (s.get() == stream) return Result::kSuccess;
    }
    return fail(Result::kInvalidArgument, "async-test backend: stream %p is not one of its streams", stream);
  }
  Result alloc(size_t bytes, void** ptr) override {
    const size_t size = std::max<size_t>(bytes, 1);
    *ptr = std::malloc(size);
    std::lock_guard<std::mutex> lk(mu_);
    allocs_[*ptr] = size;
    return Result::kSuccess;
  }
  Result free(void* ptr) override {
    std::lock_guard<std::mutex> lk(mu_);
    if (allocs_.erase(ptr) != 0) std::free(ptr);
    return Result::kSuccess;
  }
  Result allocStaging(size_t bytes, void** ptr) override {
    *ptr = std::malloc(std::max<size_t>(bytes, 1));
    return Result::kSuccess;
  }
  Result freeStaging(void* ptr) override {
    std::free(ptr);
    return Result::kSuccess;
  }
  Result registerHost(void* ptr, size_t bytes, HostRegistration** reg) override {
    *reg = reinterpret_cast<HostRegistration*>(new int(0));
    return Result::kSuccess;
  }
  Result unregisterHost(HostRegistration* reg) override {
    delete reinterpret_cast<int*>(reg);
    return Result::kSuccess;
  }
  Result openQueue(void* userStream, WorkQueue** queue) override {
    ++queuesOpen_;
    *queue = reinterpret_cast<WorkQueue*>(new FakeStream());
    return Result::kSuccess;
  }
  Result closeQueue(WorkQueue* queue) override {
    --queuesOpen_;
    delete reinterpret_cast<FakeStream*>(queue);
    return Result::kSuccess;
  }
  Result copy(void* dst, const void* src, size_t bytes, WorkQueue* queue) override {
    if (queue == nullptr) return host_->copy(dst, src, bytes, nullptr);
    ++commands_;
    reinterpret_cast<FakeStream*>(queue)->enqueue([=, this] {
      delay();
      std::memcpy(dst, src, bytes);
    });
    return Result::kSuccess;
  }
  Result reduce(void* dst, const void* a, const void* b, size_t count, const ReduceSpec& spec, bool applyPre,
                bool applyPost, WorkQueue* queue) override {
    if (queue == nullptr) return host_->reduce(dst, a, b, count, spec, applyPre, applyPost, nullptr);
    ++commands_;
    DeviceBackend* host = host_.get();
    reinterpret_cast<FakeStream*>(queue)->enqueue([=, this] {
      delay();
      if (host->reduce(dst, a, b, count, spec, applyPre, applyPost, nullptr) != Result::kSuccess) ++kernelErrors_;
    });
    return Result::kSuccess;
  }
  int kernelErrors() const { return kernelErrors_.load(); }
  // Copies and reductions enqueued on work queues so far (reduceDual: a reduction and a copy).
  int commands() const { return commands_.load(); }
  // Each copy/reduce task on a work queue first sleeps this long (a slow device), so a test can
  // watch the engine keep several steps in flight.
  void setTaskDelay(std::chrono::microseconds d) { taskDelayUs_ = d.count(); }
  // The most fences of record() that were outstanding (recorded, not yet released) at once.
  int maxFencesInFlight() const { return maxFences_.load(); }

  Result record(WorkQueue* queue, Fence** fence) override {
    MIXCCL_TRY(fenceOn(reinterpret_cast<FakeStream*>(queue), fence));
    std::lock_guard<std::mutex> lk(mu_);
    recorded_.insert(*fence);
    maxFences_ = std::max<int>(maxFences_.load(), static_cast<int>(recorded_.size()));
    return Result::kSuccess;
  }
  Result markStart(void* stream, Fence** fence) override { return fenceOn(static_cast<FakeStream*>(stream), fence); }
  Result query(Fence* fence) override {
    if (fence == nullptr) return Result::kSuccess;
    return (*reinterpret_cast<std::shared_ptr<std::atomic<bool>>*>(fence))->load() ? Result::kSuccess
                                                                                   : Result::kInProgress;
  }
  void releaseFence(Fence* fence) override {
    {
      std::lock_guard<std::mutex> lk(mu_);
      recorded_.erase(fence);
    }
    delete reinterpret_cast<std::shared_ptr<std::atomic<bool>>*>(fence);
  }

  Result holdStream(void* stream, StreamGate** gate) override {
    auto state = std::make_shared<Latch>();
    ++gatesHeld_;
    static_cast<FakeStream*>(stream)->enqueue([this, state] {
      if (!state->wait()) ++gateTimeouts_;
    });
    *gate = reinterpret_cast<StreamGate*>(new std::shared_ptr<Latch>(std::move(state)));
    return Result::kSuccess;
  }
  Result releaseStream(StreamGate* gate) override {
    auto* state = reinterpret_cast<std::shared_ptr<Latch>*>(gate);
    ++gatesReleased_;  // before the stream moves on, so a test that synced sees it
    (*state)->open();
    delete state;
    return Result::kSuccess;
  }

 private:
  void delay() const {
    if (taskDelayUs_.load() > 0) std::this_thread::sleep_for(std::chrono::microseconds(taskDelayUs_.load()));
  }
  Result fenceOn(FakeStream* s, Fence** fence) {
    auto* state = new std::shared_ptr<std::atomic<bool>>(std::make_shared<std::atomic<bool>>(s == nullptr));
    if (s != nullptr) s->enqueue([done = *state] { done->store(true); });
    *fence = reinterpret_cast<Fence*>(state);
    return Result::kSuccess;
  }

  std::unique_ptr<DeviceBackend> host_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<FakeStream>> streams_;
  std::map<void*, size_t> allocs_;  // start -> bytes
  std::set<const void*> foreign_;
  std::set<Fence*> recorded_;
  std::atomic<int64_t> taskDelayUs_{0};
  std::atomic<int> maxFences_{0};
  std::atomic<bool> deviceOnly_{false};
  std::atomic<bool> sharesCores_{false};
  std::atomic<int> commands_{0};
  std::atomic<int> gatesHeld_{0}, gatesReleased_{0}, gateTimeouts_{0}, queuesOpen_{0}, kernelErrors_{0};
};

}  // namespace mixccl::testing
