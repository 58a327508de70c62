#include "apps/sim_run/planted_fault.h"

#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace argsdump {
namespace {

bool IsFloatDtype(std::string dtype) {
  absl::AsciiStrToUpper(&dtype);
  return dtype.empty() || dtype == "FLOAT32" || dtype == "FLOAT16" || dtype == "BFLOAT16" ||
         dtype == "FLOAT64";
}

const v1::BufferSpec* FindBuffer(const v1::WorkloadSpec& w, const std::string& name) {
  for (const v1::BufferSpec& b : w.buffers()) {
    if (b.name() == name) return &b;
  }
  return nullptr;
}

const v1::ViewSpec* FindView(const v1::WorkloadSpec& w, const std::string& name) {
  for (const v1::ViewSpec& v : w.views()) {
    if (v.name() == name) return &v;
  }
  return nullptr;
}

// The buffer a tensor argument names, directly or through a view.
const v1::BufferSpec* BufferOf(const v1::WorkloadSpec& w, const std::string& tensor) {
  if (const v1::BufferSpec* b = FindBuffer(w, tensor)) return b;
  if (const v1::ViewSpec* v = FindView(w, tensor)) return FindBuffer(w, v->buffer());
  return nullptr;
}

// A buffer's initial values, spelled out.
std::vector<double> InitialValues(const v1::BufferSpec& b) {
  uint64_t numel = 1;
  for (uint32_t d : b.shape()) numel *= d;
  std::vector<double> out(numel, 0.0);
  const v1::InitSpec& init = b.init();
  for (uint64_t i = 0; i < numel; ++i) {
    if (init.has_fill()) out[i] = init.fill();
    if (init.has_iota()) out[i] = init.iota().start() + init.iota().step() * static_cast<double>(i);
    if (static_cast<uint64_t>(init.values_size()) == numel) out[i] = init.values(static_cast<int>(i));
  }
  return out;
}

// The task's first float input (or inout) is replaced by a copy of its
// buffer whose first element is NaN (a view keeps its geometry over the
// copy).
absl::Status PlantNan(v1::WorkloadSpec& w, v1::TaskSpec& task, uint32_t index) {
  for (v1::ArgSpec& arg : *task.mutable_args()) {
    if (arg.tensor().empty() || (arg.role() != "input" && arg.role() != "inout")) continue;
    const v1::BufferSpec* buffer = BufferOf(w, arg.tensor());
    if (buffer == nullptr || !IsFloatDtype(buffer->dtype())) continue;
    v1::BufferSpec copy = *buffer;
    copy.set_name(absl::StrCat(buffer->name(), "__planted_nan_", index));
    std::vector<double> values = InitialValues(*buffer);
    if (values.empty()) continue;
    values[0] = std::numeric_limits<double>::quiet_NaN();
    copy.clear_init();
    for (double v : values) copy.mutable_init()->add_values(v);
    std::string tensor = copy.name();
    if (const v1::ViewSpec* view = FindView(w, arg.tensor())) {
      v1::ViewSpec* v = w.add_views();
      *v = *view;
      v->set_name(absl::StrCat(view->name(), "__planted_nan_", index));
      v->set_buffer(copy.name());
      tensor = v->name();
    }
    *w.add_buffers() = std::move(copy);
    arg.set_tensor(tensor);
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("task ", index, " (", task.func(), ") has no floating-point input for a NaN"));
}

absl::Status PlantScalar(v1::TaskSpec& task, uint32_t index, double value) {
  for (v1::ArgSpec& arg : *task.mutable_args()) {
    if (!arg.has_scalar()) continue;
    arg.mutable_scalar()->set_value(value);
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("task ", index, " (", task.func(), ") has no scalar argument"));
}

// Elements of a tensor argument (a buffer's or a view's shape); 0 when it
// names neither.
uint64_t NumelOf(const v1::WorkloadSpec& w, const std::string& tensor) {
  const google::protobuf::RepeatedField<uint32_t>* shape = nullptr;
  if (const v1::BufferSpec* b = FindBuffer(w, tensor)) shape = &b->shape();
  if (const v1::ViewSpec* v = FindView(w, tensor)) shape = &v->shape();
  if (shape == nullptr) return 0;
  uint64_t n = 1;
  for (uint32_t d : *shape) n *= d;
  return n;
}

bool IsFloat32Tensor(const v1::WorkloadSpec& w, const v1::ArgSpec& arg) {
  const v1::BufferSpec* b = arg.tensor().empty() ? nullptr : BufferOf(w, arg.tensor());
  return b != nullptr && absl::AsciiStrToUpper(b->dtype().empty() ? "FLOAT32" : b->dtype()) == "FLOAT32";
}

// crash_segv over the task's first FLOAT32 input and a FLOAT32 output of as
// many elements.
absl::Status PlantCrash(const v1::WorkloadSpec& w, v1::TaskSpec& task, uint32_t index) {
  for (const v1::ArgSpec& in : task.args()) {
    if (in.role() != "input" || !IsFloat32Tensor(w, in)) continue;
    for (const v1::ArgSpec& out : task.args()) {
      if ((out.role() != "output" && out.role() != "inout") || !IsFloat32Tensor(w, out) ||
          NumelOf(w, out.tensor()) != NumelOf(w, in.tensor())) {
        continue;
      }
      v1::TaskSpec crash;
      crash.set_func("crash_segv");
      *crash.add_args() = in;
      *crash.add_args() = out;
      crash.mutable_args(1)->set_role("output");
      task = std::move(crash);
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "task ", index, " (", task.func(),
      ") has no FLOAT32 input and output of as many elements to crash over"));
}

}  // namespace

absl::StatusOr<PlantedFault> ParsePlantedFault(absl::string_view text) {
  const std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", text.substr(0, 64), "': ", why, " (expected RANK:STEP:TASK:nan|crash|scalar=V)"));
  };
  if (parts.size() != 4) return bad("not four parts");
  PlantedFault f;
  uint32_t* numbers[] = {&f.rank, &f.step, &f.task};
  const char* names[] = {"rank", "step", "task"};
  for (int i = 0; i < 3; ++i) {
    if (parts[i].empty() || parts[i].find_first_not_of("0123456789") != absl::string_view::npos ||
        !absl::SimpleAtoi(parts[i], numbers[i])) {
      return bad(absl::StrCat("the ", names[i], " is not a number"));
    }
  }
  absl::string_view kind = parts[3];
  if (kind == "nan") {
    f.kind = PlantedFault::Kind::kNan;
  } else if (kind == "crash") {
    f.kind = PlantedFault::Kind::kCrash;
  } else if (absl::ConsumePrefix(&kind, "scalar=")) {
    f.kind = PlantedFault::Kind::kScalar;
    if (!absl::SimpleAtod(kind, &f.value) || !std::isfinite(f.value)) {
      return bad("the scalar is not a finite number");
    }
  } else {
    return bad("unknown kind");
  }
  return f;
}

std::string DescribePlantedFault(const PlantedFault& f) {
  const char* kind = f.kind == PlantedFault::Kind::kNan     ? "a NaN in the first float input"
                     : f.kind == PlantedFault::Kind::kCrash ? "a crash (SIGSEGV)"
                                                            : "the first scalar set to ";
  return absl::StrCat(kind, f.kind == PlantedFault::Kind::kScalar ? absl::StrCat(f.value) : "",
                      " at rank ", f.rank, " step ", f.step, " task ", f.task);
}

absl::StatusOr<v1::WorkloadSpec> PlantFault(const v1::WorkloadSpec& workload,
                                            const PlantedFault& fault) {
  if (fault.task >= static_cast<uint32_t>(workload.tasks_size())) {
    return absl::InvalidArgumentError(absl::StrCat("task ", fault.task, ": the workload ",
                                                   workload.name(), " has ",
                                                   workload.tasks_size(), " tasks"));
  }
  v1::WorkloadSpec w = workload;
  v1::TaskSpec& task = *w.mutable_tasks(static_cast<int>(fault.task));
  absl::Status planted;
  switch (fault.kind) {
    case PlantedFault::Kind::kNan:
      planted = PlantNan(w, task, fault.task);
      break;
    case PlantedFault::Kind::kScalar:
      planted = PlantScalar(task, fault.task, fault.value);
      break;
    case PlantedFault::Kind::kCrash:
      planted = PlantCrash(workload, task, fault.task);
      break;
  }
  if (!planted.ok()) return planted;
  return w;
}

}  // namespace argsdump
