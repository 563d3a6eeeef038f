// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// The OpenCL worker of the mixed training example. It computes on the context and device the
// library uses (mixcclOpenclGetContext), in SVM from ncclMemAlloc (the only device memory the
// library's engine accepts with a stream), and hands its in-order cl_command_queue to every
// collective as the stream: the kernels that produce the gradient, the all-reduce and the update
// kernel are ordered by that queue alone; the host waits only to read the loss.
//
// Each kernel mirrors a loop of HostModel::gradients (mixed_mlp_model.cc) one to one: one
// work-item per output element, the same sequential inner loop, FP_CONTRACT OFF and no fast-math
// build option, so the gradient bits equal the host's.

#include <mixccl/opencl.h>

#include <cstdio>
#include <string>

#include "mixed_mlp_worker.h"

namespace mixmlp {
namespace {

const char* const kSource = R"CLC(
#pragma OPENCL FP_CONTRACT OFF

/* z1 = W1 x + b1, a1 = relu(z1); one item per (sample i, hidden h). */
__kernel void mlp_hidden(__global const float* W1, __global const float* b1, __global const float* x, uint D, uint H,
                         __global float* z1, __global float* a1) {
  const uint g = get_global_id(0), i = g / H, h = g % H;
  float acc = 0.0f;
  for (uint d = 0; d < D; ++d) acc += W1[h * D + d] * x[i * D + d];
  const float z = acc + b1[h];
  z1[g] = z;
  a1[g] = z > 0.0f ? z : 0.0f;
}

/* d2 = (W2 a1 + b2) - y; one item per (sample i, output o). */
__kernel void mlp_output(__global const float* W2, __global const float* b2, __global const float* a1,
                         __global const float* y, uint H, uint O, __global float* d2) {
  const uint g = get_global_id(0), i = g / O, o = g % O;
  float acc = 0.0f;
  for (uint h = 0; h < H; ++h) acc += W2[o * H + h] * a1[i * H + h];
  d2[g] = (acc + b2[o]) - y[g];
}

/* The mean loss: one item, sequential over all n * O differences. */
__kernel void mlp_loss(__global const float* d2, uint nO, float lossScale, __global float* loss) {
  float acc = 0.0f;
  for (uint g = 0; g < nO; ++g) acc += d2[g] * d2[g];
  loss[0] = acc * lossScale;
}

/* dz1 = relu'(z1) * (W2^T d2); one item per (sample i, hidden h). */
__kernel void mlp_back_hidden(__global const float* W2, __global const float* d2, __global const float* z1, uint H,
                              uint O, __global float* dz1) {
  const uint g = get_global_id(0), i = g / H, h = g % H;
  float acc = 0.0f;
  for (uint o = 0; o < O; ++o) acc += W2[o * H + h] * d2[i * O + o];
  dz1[g] = z1[g] > 0.0f ? acc : 0.0f;
}

/* A layer's mean weight gradient (rows x cols items), then its bias gradient (rows items):
   sequential over the n samples. */
__kernel void mlp_grad_layer(__global const float* delta, __global const float* input, uint n, uint rows, uint cols,
                             float invN, __global float* out) {
  const uint g = get_global_id(0);
  float acc = 0.0f;
  if (g < rows * cols) {
    const uint r = g / cols, c = g % cols;
    for (uint i = 0; i < n; ++i) acc += delta[i * rows + r] * input[i * cols + c];
  } else {
    const uint r = g - rows * cols;
    for (uint i = 0; i < n; ++i) acc += delta[i * rows + r];
  }
  out[g] = acc * invN;
}

/* params -= lr * grad. */
__kernel void mlp_update(__global float* params, __global const float* grad, float lr) {
  const uint g = get_global_id(0);
  params[g] = params[g] - lr * grad[g];
}
)CLC";

const char* const kKernelNames[] = {"mlp_hidden",      "mlp_output",     "mlp_loss",
                                    "mlp_back_hidden", "mlp_grad_layer", "mlp_update"};
enum Kernel { kHidden, kOutput, kLoss, kBackHidden, kGradLayer, kUpdate, kNumKernels };

class OpenclWorker final : public Worker {
 public:
  OpenclWorker(int rank, const Shape& shape) : rank_(rank), shape_(shape) {}
  ~OpenclWorker() override;

  bool init(int capacity, const std::vector<float>& initial);

  const char* kind() const override { return "opencl"; }
  float* gradBuffer() override { return grad_; }
  cudaStream_t stream() override { return reinterpret_cast<cudaStream_t>(queue_); }
  bool compute(const float* x, const float* y, int n, float invN, float lossScale) override;
  bool finish() override { return check(clFinish(queue_), "clFinish"); }
  bool update(float lr, float* loss) override;
  bool readParams(std::vector<float>* out) override;

 private:
  bool check(cl_int err, const char* what) const {
    if (err == CL_SUCCESS) return true;
    fprintf(stderr, "rank %d (opencl): %s failed with OpenCL error %d\n", rank_, what, static_cast<int>(err));
    return false;
  }
  bool alloc(size_t floats, float** out);
  // Sets the arguments (SVM pointers and scalars, in order) and enqueues `items` work-items.
  template <typename... Args>
  bool launch(Kernel k, size_t items, Args... args);
  bool setArg(cl_kernel k, cl_uint idx, float* p) { return check(clSetKernelArgSVMPointer(k, idx, p), "set arg"); }
  bool setArg(cl_kernel k, cl_uint idx, cl_uint v) { return check(clSetKernelArg(k, idx, sizeof v, &v), "set arg"); }
  bool setArg(cl_kernel k, cl_uint idx, float v) { return check(clSetKernelArg(k, idx, sizeof v, &v), "set arg"); }

  int rank_;
  Shape shape_;
  cl_context context_ = nullptr;  // the library's; not ours to release
  cl_device_id device_ = nullptr;
  cl_command_queue queue_ = nullptr;
  cl_program program_ = nullptr;
  cl_kernel kernels_[kNumKernels] = {};
  float* params_ = nullptr;  // every buffer: SVM from ncclMemAlloc
  float* grad_ = nullptr;
  float* x_ = nullptr;
  float* y_ = nullptr;
  float* z1_ = nullptr;
  float* a1_ = nullptr;
  float* dz1_ = nullptr;
  float* d2_ = nullptr;
};

OpenclWorker::~OpenclWorker() {
  if (queue_ != nullptr) clFinish(queue_);
  for (float* p : {params_, grad_, x_, y_, z1_, a1_, dz1_, d2_}) {
    if (p != nullptr) ncclMemFree(p);
  }
  for (cl_kernel k : kernels_) {
    if (k != nullptr) clReleaseKernel(k);
  }
  if (program_ != nullptr) clReleaseProgram(program_);
  if (queue_ != nullptr) clReleaseCommandQueue(queue_);
}

bool OpenclWorker::alloc(size_t floats, float** out) {
  void* p = nullptr;
  ncclResult_t r = ncclMemAlloc(&p, (floats == 0 ? 1 : floats) * sizeof(float));
  if (r != ncclSuccess) {
    fprintf(stderr, "rank %d (opencl): ncclMemAlloc of %zu floats failed: %s (%s)\n", rank_, floats,
            ncclGetErrorString(r), ncclGetLastError(nullptr));
    return false;
  }
  *out = static_cast<float*>(p);
  return true;
}

bool OpenclWorker::init(int capacity, const std::vector<float>& initial) {
  ncclResult_t r = mixcclOpenclGetContext(&context_, &device_);
  if (r != ncclSuccess) {
    fprintf(stderr, "rank %d (opencl): mixcclOpenclGetContext failed: %s (%s)\n", rank_, ncclGetErrorString(r),
            ncclGetLastError(nullptr));
    return false;
  }
  cl_int err = CL_SUCCESS;
  queue_ = clCreateCommandQueueWithProperties(context_, device_, nullptr, &err);
  if (!check(err, "clCreateCommandQueueWithProperties")) return false;
  const char* source = kSource;
  program_ = clCreateProgramWithSource(context_, 1, &source, nullptr, &err);
  if (!check(err, "clCreateProgramWithSource")) return false;
  // No -cl-fast-relaxed-math, -cl-mad-enable or -cl-denorms-are-zero: IEEE float as on the host.
  err = clBuildProgram(program_, 1, &device_, "", nullptr, nullptr);
  if (err != CL_SUCCESS) {
    char log[4096] = {0};
    clGetProgramBuildInfo(program_, device_, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, nullptr);
    fprintf(stderr, "rank %d (opencl): building the MLP kernels failed (error %d):\n%s\n", rank_, err, log);
    return false;
  }
  for (int k = 0; k < kNumKernels; ++k) {
    kernels_[k] = clCreateKernel(program_, kKernelNames[k], &err);
    if (!check(err, kKernelNames[k])) return false;
  }
  const size_t n = static_cast<size_t>(capacity);
  if (!alloc(shape_.params(), &params_) || !alloc(shape_.grads(), &grad_) || !alloc(n * shape_.in, &x_) ||
      !alloc(n * shape_.out, &y_) || !alloc(n * shape_.hidden, &z1_) || !alloc(n * shape_.hidden, &a1_) ||
      !alloc(n * shape_.hidden, &dz1_) || !alloc(n * shape_.out, &d2_)) {
    return false;
  }
  return check(clEnqueueSVMMemcpy(queue_, CL_TRUE, params_, initial.data(), shape_.params() * sizeof(float), 0, nullptr,
                                  nullptr),
               "upload of the initial parameters");
}

template <typename... Args>
bool OpenclWorker::launch(Kernel k, size_t items, Args... args) {
  cl_uint idx = 0;
  if (!(setArg(kernels_[k], idx++, args) && ...)) return false;
  if (items == 0) return true;
  return check(clEnqueueNDRangeKernel(queue_, kernels_[k], 1, nullptr, &items, nullptr, 0, nullptr, nullptr),
               kKernelNames[k]);
}

bool OpenclWorker::compute(const float* x, const float* y, int n, float invN, float lossScale) {
  const cl_uint D = shape_.in, H = shape_.hidden, O = shape_.out, N = static_cast<cl_uint>(n);
  if (n == 0) {
    const float zero = 0.0f;
    return check(
        clEnqueueSVMMemFill(queue_, grad_, &zero, sizeof zero, shape_.grads() * sizeof(float), 0, nullptr, nullptr),
        "clEnqueueSVMMemFill");
  }
  // Blocking uploads: the caller reuses x and y for the next batch.
  if (!check(
          clEnqueueSVMMemcpy(queue_, CL_TRUE, x_, x, static_cast<size_t>(n) * D * sizeof(float), 0, nullptr, nullptr),
          "upload of x") ||
      !check(
          clEnqueueSVMMemcpy(queue_, CL_TRUE, y_, y, static_cast<size_t>(n) * O * sizeof(float), 0, nullptr, nullptr),
          "upload of y")) {
    return false;
  }
  float* W1 = params_ + shape_.w1();
  float* b1 = params_ + shape_.b1();
  float* W2 = params_ + shape_.w2();
  float* b2 = params_ + shape_.b2();
  const size_t nH = static_cast<size_t>(n) * H, nO = static_cast<size_t>(n) * O;
  return launch(kHidden, nH, W1, b1, x_, D, H, z1_, a1_) && launch(kOutput, nO, W2, b2, a1_, y_, H, O, d2_) &&
         launch(kLoss, 1, d2_, static_cast<cl_uint>(nO), lossScale, grad_ + shape_.loss()) &&
         launch(kBackHidden, nH, W2, d2_, z1_, H, O, dz1_) &&
         launch(kGradLayer, static_cast<size_t>(H) * D + H, dz1_, x_, N, H, D, invN, grad_ + shape_.w1()) &&
         launch(kGradLayer, static_cast<size_t>(O) * H + O, d2_, a1_, N, O, H, invN, grad_ + shape_.w2()) &&
         check(clFlush(queue_), "clFlush");
}

bool OpenclWorker::update(float lr, float* loss) {
  if (!launch(kUpdate, shape_.params(), params_, grad_, lr)) return false;
  return check(clEnqueueSVMMemcpy(queue_, CL_TRUE, loss, grad_ + shape_.loss(), sizeof(float), 0, nullptr, nullptr),
               "read of the loss");
}

bool OpenclWorker::readParams(std::vector<float>* out) {
  out->resize(shape_.params());
  return check(
      clEnqueueSVMMemcpy(queue_, CL_TRUE, out->data(), params_, shape_.params() * sizeof(float), 0, nullptr, nullptr),
      "read of the parameters");
}

}  // namespace

std::unique_ptr<Worker> makeOpenclWorker(int rank, const Shape& shape, int capacity,
                                         const std::vector<float>& initial) {
  auto w = std::make_unique<OpenclWorker>(rank, shape);
  if (!w->init(capacity, initial)) return nullptr;
  return w;
}

}  // namespace mixmlp
