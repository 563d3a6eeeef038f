// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// The host worker of the mixed training example: HostModel's loops on malloc'd memory, NULL
// stream (so the all-reduce has completed when it returns and update() can run at once).

#include "mixed_mlp_worker.h"

namespace mixmlp {
namespace {

class HostWorker final : public Worker {
 public:
  HostWorker(const Shape& shape, const std::vector<float>& initial)
      : model_(shape), params_(initial), grad_(shape.grads(), 0.0f), lossIndex_(shape.loss()) {}

  const char* kind() const override { return "host"; }
  float* gradBuffer() override { return grad_.data(); }
  cudaStream_t stream() override { return nullptr; }

  bool compute(const float* x, const float* y, int n, float invN, float lossScale) override {
    model_.gradients(params_.data(), x, y, n, invN, lossScale, grad_.data());
    return true;
  }
  bool finish() override { return true; }
  bool update(float lr, float* loss) override {
    model_.update(params_.data(), grad_.data(), lr);
    *loss = grad_[lossIndex_];
    return true;
  }
  bool readParams(std::vector<float>* out) override {
    *out = params_;
    return true;
  }

 private:
  HostModel model_;
  std::vector<float> params_;
  std::vector<float> grad_;
  size_t lossIndex_;
};

}  // namespace

std::unique_ptr<Worker> makeHostWorker(int rank, const Shape& shape, int capacity, const std::vector<float>& initial) {
  (void)rank;
  (void)capacity;  // HostModel grows its scratch on demand
  return std::make_unique<HostWorker>(shape, initial);
}

}  // namespace mixmlp
