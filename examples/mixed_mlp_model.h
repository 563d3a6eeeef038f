// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// The model and data of the mixed training example (mixed_mlp.cc), shared by its host and OpenCL
// workers.
//
// Model: a one-hidden-layer ReLU perceptron, out = W2 relu(W1 x + b1) + b2, trained on the
// mean-squared error 0.5 |out - y|^2 averaged over samples. No transcendental function appears
// anywhere, so every value is a chain of IEEE float adds, multiplies and compares, which the host
// (C++ built with -ffp-contract=off) and OpenCL C (FP_CONTRACT OFF, no fast-math) round the same.
//
// Bit-exactness rule: the host loops here and the OpenCL kernels (mixed_mlp_opencl.cc) compute
// each output element with the same operations in the same order: one work-item per output
// element, looping sequentially over the same index order as the C++ loop. Change one, change
// both.
//
// Parameter layout (one flat float array, so one all-reduce carries every gradient):
//   [ W1: H x D | b1: H | W2: O x H | b2: O ]      (row-major: W1[h * D + d])
// The gradient buffer has the same layout plus one trailing float: the rank's mean loss.
//
// Data: sample g (a global index) is a pure function of (seed, g): x from an integer hash, y from
// a fixed "teacher" network. So any partition of a global batch sees the same samples.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mixmlp {

struct Shape {
  int in = 32;       // D: input features
  int hidden = 64;   // H
  int out = 4;       // O: regression targets
  int teacher = 16;  // hidden width of the teacher that makes y

  size_t w1() const { return 0; }
  size_t b1() const { return w1() + static_cast<size_t>(hidden) * in; }
  size_t w2() const { return b1() + hidden; }
  size_t b2() const { return w2() + static_cast<size_t>(out) * hidden; }
  size_t params() const { return b2() + out; }
  size_t loss() const { return params(); }  // index of the loss in the gradient buffer
  size_t grads() const { return params() + 1; }
};

// Makes samples [first, first + n) of the stream `seed`: x is n x D, y is n x O (row-major).
class DataSource {
 public:
  DataSource(const Shape& shape, uint64_t seed);
  void make(uint64_t first, int n, float* x, float* y) const;

 private:
  Shape shape_;
  uint64_t seed_;
  std::vector<float> t1_;  // teacher: teacher x D
  std::vector<float> t2_;  // O x teacher
};

// Deterministic initial parameters (the same on every rank).
std::vector<float> initialParams(const Shape& shape, uint64_t seed);

// The host worker's arithmetic: scratch buffers and the reference loops.
class HostModel {
 public:
  explicit HostModel(const Shape& shape) : shape_(shape) {}

  // Mean gradient of the n samples (x, y) at params, into grad (shape.grads() floats; the last is
  // the mean loss). invN = 1.0f / n and lossScale = 0.5f * invN, computed once by the caller so
  // both workers use the same bits. n == 0 gives zeros.
  void gradients(const float* params, const float* x, const float* y, int n, float invN, float lossScale, float* grad);
  // params -= lr * grad, element by element (the loss slot is not a parameter).
  void update(float* params, const float* grad, float lr) const;

 private:
  Shape shape_;
  std::vector<float> z1_, a1_, d2_, dz1_;
};

// 64-bit FNV-1a of the bytes: the weights' fingerprint compared across ranks.
uint64_t hashBytes(const void* data, size_t bytes);

}  // namespace mixmlp
