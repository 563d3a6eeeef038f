// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// Host arithmetic of the mixed training example; see mixed_mlp_model.h for the rules it follows.
// The loops below are the reference the OpenCL kernels (mixed_mlp_opencl.cc) mirror one to one:
// the innermost loop of each is the sequential loop of one work-item.

#include "mixed_mlp_model.h"

#include <cmath>
#include <cstring>

namespace mixmlp {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A float in [-1, 1) from the top 24 bits of a hash: k * 2^-23 - 1 is exact in float.
float unitFloat(uint64_t h) { return static_cast<float>(static_cast<int32_t>(h >> 40)) * 0x1p-23f - 1.0f; }

// Distinct hash streams for inputs, teacher and initial weights.
constexpr uint64_t kInputStream = 0x1000000000000000ULL;
constexpr uint64_t kTeacherStream = 0x2000000000000000ULL;
constexpr uint64_t kInitStream = 0x3000000000000000ULL;

float relu(float z) { return z > 0.0f ? z : 0.0f; }

}  // namespace

DataSource::DataSource(const Shape& shape, uint64_t seed) : shape_(shape), seed_(seed) {
  t1_.resize(static_cast<size_t>(shape.teacher) * shape.in);
  t2_.resize(static_cast<size_t>(shape.out) * shape.teacher);
  for (size_t i = 0; i < t1_.size(); ++i) t1_[i] = unitFloat(splitmix64(seed ^ kTeacherStream ^ i));
  for (size_t i = 0; i < t2_.size(); ++i) t2_[i] = unitFloat(splitmix64(seed ^ kTeacherStream ^ (i + t1_.size())));
}

void DataSource::make(uint64_t first, int n, float* x, float* y) const {
  const int D = shape_.in, T = shape_.teacher, O = shape_.out;
  std::vector<float> hidden(T);
  for (int i = 0; i < n; ++i) {
    const uint64_t g = first + static_cast<uint64_t>(i);
    float* xi = x + static_cast<size_t>(i) * D;
    for (int d = 0; d < D; ++d)
      xi[d] = unitFloat(splitmix64(seed_ ^ kInputStream ^ (g * static_cast<uint64_t>(D) + d)));
    for (int j = 0; j < T; ++j) {
      float acc = 0.0f;
      for (int d = 0; d < D; ++d) acc += t1_[static_cast<size_t>(j) * D + d] * xi[d];
      hidden[j] = relu(acc);
    }
    for (int o = 0; o < O; ++o) {
      float acc = 0.0f;
      for (int j = 0; j < T; ++j) acc += t2_[static_cast<size_t>(o) * T + j] * hidden[j];
      y[static_cast<size_t>(i) * O + o] = 0.25f * acc;  // keeps targets near unit scale
    }
  }
}

std::vector<float> initialParams(const Shape& shape, uint64_t seed) {
  std::vector<float> p(shape.params(), 0.0f);  // biases start at zero
  const float s1 = static_cast<float>(1.0 / std::sqrt(static_cast<double>(shape.in)));
  const float s2 = static_cast<float>(1.0 / std::sqrt(static_cast<double>(shape.hidden)));
  for (size_t i = shape.w1(); i < shape.b1(); ++i) p[i] = s1 * unitFloat(splitmix64(seed ^ kInitStream ^ i));
  for (size_t i = shape.w2(); i < shape.b2(); ++i) p[i] = s2 * unitFloat(splitmix64(seed ^ kInitStream ^ i));
  return p;
}

void HostModel::gradients(const float* params, const float* x, const float* y, int n, float invN, float lossScale,
                          float* grad) {
  const int D = shape_.in, H = shape_.hidden, O = shape_.out;
  const float* W1 = params + shape_.w1();
  const float* b1 = params + shape_.b1();
  const float* W2 = params + shape_.w2();
  const float* b2 = params + shape_.b2();
  if (n == 0) {
    std::memset(grad, 0, shape_.grads() * sizeof(float));
    return;
  }
  const size_t nH = static_cast<size_t>(n) * H, nO = static_cast<size_t>(n) * O;
  z1_.resize(nH);
  a1_.resize(nH);
  dz1_.resize(nH);
  d2_.resize(nO);
  // Kernel mlp_hidden: one item per (i, h).
  for (size_t g = 0; g < nH; ++g) {
    const size_t i = g / H, h = g % H;
    float acc = 0.0f;
    for (int d = 0; d < D; ++d) acc += W1[h * D + d] * x[i * D + d];
    const float z = acc + b1[h];
    z1_[g] = z;
    a1_[g] = relu(z);
  }
  // Kernel mlp_output: one item per (i, o); d2 = out - y is also dLoss/dout.
  for (size_t g = 0; g < nO; ++g) {
    const size_t i = g / O, o = g % O;
    float acc = 0.0f;
    for (int h = 0; h < H; ++h) acc += W2[o * H + h] * a1_[i * H + h];
    d2_[g] = (acc + b2[o]) - y[g];
  }
  // Kernel mlp_loss: a single item, sequential over every (i, o).
  {
    float acc = 0.0f;
    for (size_t g = 0; g < nO; ++g) acc += d2_[g] * d2_[g];
    grad[shape_.loss()] = acc * lossScale;
  }
  // Kernel mlp_back_hidden: one item per (i, h).
  for (size_t g = 0; g < nH; ++g) {
    const size_t i = g / H, h = g % H;
    float acc = 0.0f;
    for (int o = 0; o < O; ++o) acc += W2[o * H + h] * d2_[i * O + o];
    dz1_[g] = z1_[g] > 0.0f ? acc : 0.0f;
  }
  // Kernel mlp_grad_layer, layer 1: one item per W1 element, then one per b1 element.
  for (size_t g = 0; g < static_cast<size_t>(H) * D + H; ++g) {
    float acc = 0.0f;
    if (g < static_cast<size_t>(H) * D) {
      const size_t h = g / D, d = g % D;
      for (int i = 0; i < n; ++i) acc += dz1_[i * H + h] * x[i * D + d];
    } else {
      const size_t h = g - static_cast<size_t>(H) * D;
      for (int i = 0; i < n; ++i) acc += dz1_[i * H + h];
    }
    grad[shape_.w1() + g] = acc * invN;
  }
  // Kernel mlp_grad_layer, layer 2: one item per W2 element, then one per b2 element.
  for (size_t g = 0; g < static_cast<size_t>(O) * H + O; ++g) {
    float acc = 0.0f;
    if (g < static_cast<size_t>(O) * H) {
      const size_t o = g / H, h = g % H;
      for (int i = 0; i < n; ++i) acc += d2_[i * O + o] * a1_[i * H + h];
    } else {
      const size_t o = g - static_cast<size_t>(O) * H;
      for (int i = 0; i < n; ++i) acc += d2_[i * O + o];
    }
    grad[shape_.w2() + g] = acc * invN;
  }
}

void HostModel::update(float* params, const float* grad, float lr) const {
  for (size_t g = 0; g < shape_.params(); ++g) params[g] = params[g] - lr * grad[g];
}

uint64_t hashBytes(const void* data, size_t bytes) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

}  // namespace mixmlp
