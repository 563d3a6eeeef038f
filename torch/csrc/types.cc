// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "types.h"

#include <c10/util/Exception.h>

namespace mixccl::torch_backend {

std::optional<ncclDataType_t> ncclTypeOf(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return ncclFloat32;
    case at::kDouble:
      return ncclFloat64;
    case at::kHalf:
      return ncclFloat16;
    case at::kBFloat16:
      return ncclBfloat16;
    case at::kChar:
      return ncclInt8;
    case at::kByte:
      return ncclUint8;
    case at::kInt:
      return ncclInt32;
    case at::kLong:
      return ncclInt64;
    default:
      return std::nullopt;
  }
}

void checkHostTensor(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.defined(), "mixccl ", op, ": undefined tensor");
  TORCH_CHECK(t.device().is_cpu(), "mixccl ", op, ": tensor is on ", t.device(),
              "; the mixccl backend moves host (CPU) tensors only");
  TORCH_CHECK(t.layout() == at::kStrided, "mixccl ", op, ": sparse tensors are not supported");
  TORCH_CHECK(t.is_contiguous(), "mixccl ", op,
              ": tensor is not contiguous; call .contiguous() first (mixccl reads the storage as one flat run)");
}

Buffer movingBuffer(const at::Tensor& t, const char* op) {
  checkHostTensor(t, op);
  if (auto type = ncclTypeOf(t.scalar_type())) {
    return Buffer{t.data_ptr(), static_cast<size_t>(t.numel()), *type};
  }
  // Moving data does not look at the values, so a dtype mixccl lacks travels as its bytes.
  return Buffer{t.data_ptr(), static_cast<size_t>(t.numel()) * t.element_size(), ncclUint8};
}

void checkReducible(const at::Tensor& t, const c10d::ReduceOp& op, const char* what) {
  checkHostTensor(t, what);
  auto kind = op.op_;
  TORCH_CHECK(kind != c10d::ReduceOp::BAND && kind != c10d::ReduceOp::BOR && kind != c10d::ReduceOp::BXOR, "mixccl ",
              what, ": bitwise reductions (BAND, BOR, BXOR) are not supported (NCCL's API has none)");
  if (t.scalar_type() == at::kBool) {
    // Bool is reduced as uint8 0/1 values; only operators that keep results in {0, 1} are allowed.
    TORCH_CHECK(kind != c10d::ReduceOp::AVG && kind != c10d::ReduceOp::PREMUL_SUM, "mixccl ", what,
                ": AVG and PREMUL_SUM are not defined for bool tensors");
    return;
  }
  TORCH_CHECK(ncclTypeOf(t.scalar_type()).has_value(), "mixccl ", what, ": dtype ", t.scalar_type(),
              " cannot be reduced (mixccl reduces float32, float64, float16, bfloat16, int8, uint8, int32, int64 "
              "and bool)");
  if (kind == c10d::ReduceOp::PREMUL_SUM) {
    // The factor is read on the worker (RedOp); checked here, because a failure there would mark
    // the whole group failed.
    auto* supplement = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
    TORCH_CHECK(supplement != nullptr, "mixccl ", what,
                ": PREMUL_SUM needs the factor of torch.distributed._make_nccl_premul_sum");
    if (!supplement->tensor_factors.empty()) {
      TORCH_CHECK(supplement->tensor_factors.size() == 1, "mixccl ", what, ": PREMUL_SUM takes one factor tensor, got ",
                  supplement->tensor_factors.size());
      const at::Tensor& factor = supplement->tensor_factors[0];
      TORCH_CHECK(factor.defined() && factor.numel() == 1, "mixccl ", what,
                  ": the PREMUL_SUM factor tensor must hold one element, it holds ",
                  factor.defined() ? factor.numel() : 0);
    }
  }
}

Buffer reducingBuffer(const at::Tensor& t) {
  auto type = t.scalar_type() == at::kBool ? ncclUint8 : *ncclTypeOf(t.scalar_type());
  return Buffer{t.data_ptr(), static_cast<size_t>(t.numel()), type};
}

RedOp::RedOp(const c10d::ReduceOp& op, at::ScalarType dtype, ncclComm_t comm) : comm_(comm) {
  const bool isBool = dtype == at::kBool;
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      op_ = isBool ? ncclMax : ncclSum;  // logical or
      return;
    case c10d::ReduceOp::PRODUCT:
      op_ = isBool ? ncclMin : ncclProd;  // logical and
      return;
    case c10d::ReduceOp::MIN:
      op_ = ncclMin;
      return;
    case c10d::ReduceOp::MAX:
      op_ = ncclMax;
      return;
    case c10d::ReduceOp::AVG:
      op_ = ncclAvg;
      return;
    case c10d::ReduceOp::PREMUL_SUM:
      break;
    default:
      TORCH_CHECK(false, "mixccl: unsupported reduce op ", static_cast<int>(op.op_));
  }
  // The factor is a Python number or a one-element tensor (torch.distributed._make_nccl_premul_sum);
  // mixccl takes it as a host scalar of the tensor's own type, read once here.
  // checkReducible vetted the supplement on the calling thread: one factor, one element.
  auto* supplement = static_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
  at::Tensor factor;
  if (!supplement->tensor_factors.empty()) {
    factor = supplement->tensor_factors[0].to(at::kCPU, dtype).contiguous();
  } else {
    factor = at::scalar_tensor(supplement->double_factor, at::TensorOptions().dtype(dtype));
  }
  MIXCCL_TORCH_CHECK_NCCL(
      ncclRedOpCreatePreMulSum(&op_, factor.data_ptr(), *ncclTypeOf(dtype), ncclScalarHostImmediate, comm),
      "ncclRedOpCreatePreMulSum");
  created_ = true;
}

RedOp::~RedOp() {
  // Allowed once the last call using it returned (nccl.h); a failure here only leaks an operator id.
  if (created_) (void)ncclRedOpDestroy(op_, comm_);
}

void throwNccl(ncclResult_t r, const std::string& what) {
  // The message is per thread (nccl.h): read it on the thread whose call failed.
  const char* last = ncclGetLastError(nullptr);
  TORCH_CHECK(false, "mixccl: ", what, " failed: ", ncclGetErrorString(r),
              (last != nullptr && *last != '\0') ? std::string(": ") + last : std::string());
}

}  // namespace mixccl::torch_backend
