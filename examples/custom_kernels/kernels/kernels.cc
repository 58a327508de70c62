#include "kernels/kernels.h"

#include <cmath>

namespace custom_kernels {
namespace {

using argsdump::ArgDirection;
using argsdump::KernelContext;
using argsdump::Tensor;

absl::Status LayerNorm(KernelContext& ctx) {
  auto x = ctx.tensor(0), gamma = ctx.tensor(1), beta = ctx.tensor(2), y = ctx.tensor(3);
  auto eps = ctx.scalar<float>(0);
  for (const auto* s : {&x.status(), &gamma.status(), &beta.status(), &y.status()}) {
    if (!s->ok()) return *s;
  }
  if (!eps.ok()) return eps.status();
  if (x->ndims() != 2 || y->numel() != x->numel() || gamma->numel() != x->shape(1)) {
    return absl::InvalidArgumentError("layer_norm: x[r,c], gamma[c], beta[c], y[r,c]");
  }
  const uint32_t rows = x->shape(0), cols = x->shape(1);
  for (uint32_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (uint32_t c = 0; c < cols; ++c) mean += x->Get<float>(r * cols + c);
    mean /= cols;
    for (uint32_t c = 0; c < cols; ++c) {
      const double d = x->Get<float>(r * cols + c) - mean;
      var += d * d;
    }
    var /= cols;
    const double inv = 1.0 / std::sqrt(var + *eps);
    for (uint32_t c = 0; c < cols; ++c) {
      const double v = (x->Get<float>(r * cols + c) - mean) * inv;
      y->Set<float>(r * cols + c,
                    static_cast<float>(v * gamma->Get<float>(c) + beta->Get<float>(c)));
    }
  }
  return absl::OkStatus();
}

absl::Status Axpb(KernelContext& ctx) {
  auto x = ctx.tensor(0), y = ctx.tensor(1);
  auto a = ctx.scalar<float>(0), b = ctx.scalar<float>(1);
  if (!x.ok() || !y.ok() || !a.ok() || !b.ok()) {
    return absl::InvalidArgumentError("axpb: [in x, out y] + f32 a, f32 b");
  }
  if (x->numel() != y->numel()) return absl::InvalidArgumentError("axpb: x and y differ in size");
  for (uint64_t i = 0; i < x->numel(); ++i) y->Set<float>(i, *a * x->Get<float>(i) + *b);
  return absl::OkStatus();
}

// y = bf16(s * x) over BFLOAT16 tensors, computed in float.
absl::Status Bf16Scale(KernelContext& ctx) {
  auto x = ctx.tensor(0), y = ctx.tensor(1);
  auto s = ctx.scalar<float>(0);
  if (!x.ok() || !y.ok() || !s.ok()) {
    return absl::InvalidArgumentError("bf16_scale: [in x, out y] + f32 s");
  }
  if (x->dtype() != argsdump::DataType::kBfloat16 || y->dtype() != argsdump::DataType::kBfloat16 ||
      x->numel() != y->numel()) {
    return absl::InvalidArgumentError("bf16_scale: x and y are BFLOAT16 of one size");
  }
  for (uint64_t i = 0; i < x->numel(); ++i) {
    const float v = argsdump::Bfloat16ToFloat(x->Get<uint16_t>(i));
    y->Set<uint16_t>(i, argsdump::FloatToBfloat16(*s * v));
  }
  return absl::OkStatus();
}

// y = a * x + b over a 3-D view x (any strides and start offset), read in
// logical order.
absl::Status StridedAffine(KernelContext& ctx) {
  auto x = ctx.tensor(0), y = ctx.tensor(1);
  auto a = ctx.scalar<float>(0), b = ctx.scalar<float>(1);
  if (!x.ok() || !y.ok() || !a.ok() || !b.ok()) {
    return absl::InvalidArgumentError("strided_affine: [in x, out y] + f32 a, f32 b");
  }
  if (x->ndims() != 3 || x->numel() != y->numel()) {
    return absl::InvalidArgumentError("strided_affine: x is 3-D, y has its numel");
  }
  for (uint64_t i = 0; i < x->numel(); ++i) y->Set<float>(i, *a * x->Get<float>(i) + *b);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<KernelIds> RegisterKernels(argsdump::KernelRegistry* registry) {
  KernelIds ids;
  auto ln = registry->Register("layer_norm",
                               {ArgDirection::kIn, ArgDirection::kIn, ArgDirection::kIn,
                                ArgDirection::kOut, ArgDirection::kScalar},
                               &LayerNorm, "norm");
  if (!ln.ok()) return ln.status();
  auto axpb = registry->Register(
      "axpb", {ArgDirection::kIn, ArgDirection::kOut, ArgDirection::kScalar, ArgDirection::kScalar},
      &Axpb, "elementwise");
  if (!axpb.ok()) return axpb.status();
  auto bf16 = registry->Register("bf16_scale",
                                 {ArgDirection::kIn, ArgDirection::kOut, ArgDirection::kScalar},
                                 &Bf16Scale, "elementwise");
  if (!bf16.ok()) return bf16.status();
  auto strided = registry->Register(
      "strided_affine",
      {ArgDirection::kIn, ArgDirection::kOut, ArgDirection::kScalar, ArgDirection::kScalar},
      &StridedAffine, "elementwise");
  if (!strided.ok()) return strided.status();
  ids.layer_norm = *ln;
  ids.axpb = *axpb;
  ids.bf16_scale = *bf16;
  ids.strided_affine = *strided;
  return ids;
}

}  // namespace custom_kernels
