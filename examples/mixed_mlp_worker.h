// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Where a rank of the mixed training example computes: on the host (C++ loops, malloc'd buffers,
// NULL stream) or on an OpenCL device (kernels, SVM from ncclMemAlloc, a cl_command_queue as the
// stream). The training loop (mixed_mlp.cc) sees only this interface, so both kinds run the same
// sequence of calls:
//
//   compute(batch) -> ncclAllReduce(gradBuffer(), ..., PreMulSum, stream()) -> update(lr)
//
// Every method prints a message naming the rank and returns false on failure.

#include <nccl.h>

#include <memory>
#include <vector>

#include "mixed_mlp_model.h"

namespace mixmlp {

class Worker {
 public:
  virtual ~Worker() = default;
  virtual const char* kind() const = 0;

  // The gradient buffer (shape.grads() floats: gradients, then the mean loss) to all-reduce in
  // place, and the stream to pass with it (NULL on the host).
  virtual float* gradBuffer() = 0;
  virtual cudaStream_t stream() = 0;

  // Loads n samples (host arrays x: n x D, y: n x O; n <= the capacity given at creation) and
  // computes the mean gradient and loss into gradBuffer(). Asynchronous on stream().
  virtual bool compute(const float* x, const float* y, int n, float invN, float lossScale) = 0;
  // Waits until the work issued so far is done (timing of the warm-up).
  virtual bool finish() = 0;
  // After the gradient all-reduce was issued on stream(): params -= lr * grad; then waits and
  // returns the reduced loss.
  virtual bool update(float lr, float* loss) = 0;
  // A host copy of the current parameters (waits).
  virtual bool readParams(std::vector<float>* out) = 0;
};

// capacity: the most samples one compute() call gets. initial: the parameters to start from.
std::unique_ptr<Worker> makeHostWorker(int rank, const Shape& shape, int capacity, const std::vector<float>& initial);
// Needs the process's mixccl backend to be OpenCL (MIXCCL_DEVICE_BACKEND=opencl): it computes on
// the library's context and device (mixcclOpenclGetContext). Returns nullptr after printing why.
std::unique_ptr<Worker> makeOpenclWorker(int rank, const Shape& shape, int capacity, const std::vector<float>& initial);

}  // namespace mixmlp
