#include "kernels/model.h"

#include <algorithm>
#include <cmath>

namespace custom_kernels {

using argsdump::CoreTaskArgs;
using argsdump::DataType;
using argsdump::Tensor;

absl::StatusOr<ModelRun> RunModel(argsdump::SimSession& session, const KernelIds& ids,
                                  const ModelOptions& o) {
  const uint32_t rows = o.rows, cols = o.cols;
  ModelRun run;
  auto x = session.Alloc(DataType::kFloat32, {rows, cols});
  auto gamma = session.Alloc(DataType::kFloat32, {cols});
  auto beta = session.Alloc(DataType::kFloat32, {cols});
  auto h = session.Alloc(DataType::kFloat32, {rows, cols});
  auto y = session.Alloc(DataType::kFloat32, {cols, rows});
  for (const auto* t : {&x, &gamma, &beta, &h, &y}) {
    if (!t->ok()) return t->status();
  }
  for (uint32_t i = 0; i < rows * cols; ++i) run.x0.push_back(std::sin(0.7f * i) * (1 + i % 3));
  for (uint32_t c = 0; c < cols; ++c) {
    run.gamma.push_back(1.0f + 0.125f * c);
    run.beta.push_back(0.0625f * c);
  }
  if (auto s = x->Write(run.x0); !s.ok()) return s;
  if (auto s = gamma->Write(run.gamma); !s.ok()) return s;
  if (auto s = beta->Write(run.beta); !s.ok()) return s;
  // h^T and y^T: views of the same buffers, not copies.
  auto h_t = h->View({cols, rows}, {1, cols}, 0);
  auto y_t = y->View({rows, cols}, {1, rows}, 0);
  if (!h_t.ok()) return h_t.status();
  if (!y_t.ok()) return y_t.status();
  float a = o.a;
  for (uint32_t step = 0; step < o.steps; ++step) {
    if (auto s = session.BeginStep(step); !s.ok()) return s;
    const Tensor& in = step == 0 ? *x : *y_t;
    {
      CoreTaskArgs args;
      float eps = o.eps;
      for (const absl::Status& added : {args.add_input(in), args.add_input(*gamma),
                                        args.add_input(*beta), args.add_output(*h),
                                        args.add_scalar(eps)}) {
        if (!added.ok()) return added;
      }
      if (o.mark) {
        if (absl::Status s = args.dump(*h); !s.ok()) return s;
      }
      auto id = session.Submit(ids.layer_norm, std::move(args));
      if (!id.ok()) return id.status();
      run.layer_norm_tasks.push_back(*id);
    }
    {
      CoreTaskArgs args;
      float b = o.b;
      for (const absl::Status& added :
           {args.add_input(*h_t), args.add_output(*y), args.add_scalar(a), args.add_scalar(b)}) {
        if (!added.ok()) return added;
      }
      if (o.mark) {
        if (absl::Status s = args.dump(a); !s.ok()) return s;
      }
      auto id = session.Submit(ids.axpb, std::move(args));
      if (!id.ok()) return id.status();
      run.axpb_tasks.push_back(*id);
      run.a_per_step.push_back(a);
    }
    // Data-dependent control: look at this step's y before the next.
    if (auto s = session.Synchronize(); !s.ok()) return s;
    auto values = y->Read<float>();
    if (!values.ok()) return values.status();
    float largest = 0;
    for (float v : *values) largest = std::max(largest, std::fabs(v));
    if (largest > o.limit) a *= 0.5f;
    run.y = *std::move(values);
  }
  return run;
}

}  // namespace custom_kernels
