#include "device/sim/sim_runtime.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <exception>
#include <limits>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "base/thread.h"

namespace argsdump {
inline namespace ARGSDUMP_SIM_NAMESPACE {
namespace {

#ifdef ARGSDUMP_DUMP_COMPILED_OUT
constexpr bool kDumpCompiled = false;
#else
constexpr bool kDumpCompiled = true;
#endif

using Clock = std::chrono::steady_clock;

std::atomic<bool> g_layout_warned{false};
std::atomic<uint64_t> g_layout_warnings{0};
std::atomic<bool> g_completeness_warned{false};
std::atomic<bool> g_snapshot_warned{false};

abi::ArgRole RoleOf(ArgDirection d) {
  switch (d) {
    case ArgDirection::kIn: return abi::ArgRole::kInput;
    case ArgDirection::kOut: return abi::ArgRole::kOutput;
    default: return abi::ArgRole::kInOut;
  }
}

// A steady_clock (CLOCK_MONOTONIC) time in ns, as task times are recorded.
uint64_t MonotonicNs(Clock::time_point t) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
}

std::string TaskIdHex(uint64_t id) { return absl::StrCat("0x", absl::Hex(id, absl::kZeroPad16)); }

}  // namespace

struct SimRuntime::Task {
  uint64_t id = 0;
  std::vector<uint16_t> func_ids;
  CoreTaskArgs args;
  // Dump view of the task, resolved at submit (null dump = not dumped).
  std::vector<DumpTensorArg> dump_tensors;
  std::vector<DumpScalarArg> dump_scalars;
  DumpTask dump;
  bool dumped = false;
  // Which stages are recorded (the step's mode), set at submit.
  bool dump_before = false, dump_after = false;
  bool overflow_check = false;  // the step's config asks for it
  bool verbose = false;         // the step's config asks for a line per dumped task
  bool logged = false;          // that line was printed
  // Its inputs are copied before dispatch for an exception dump (the
  // step's snapshot_inputs, exception dumps armed); the copies live until
  // the task retires: in `snapshot_memory` when the device memory is
  // shared (a host reads them after a crash), else on the heap.
  bool snapshot_inputs = false;
  uint8_t* snapshot = nullptr;
  uint64_t snapshot_bytes = 0;
  DeviceMemory* snapshot_memory = nullptr;
  std::vector<DispatchedInput> dispatched_inputs;
  std::vector<uint64_t> snapshot_at;  // per tensor slot: its copy's offset
  void FreeSnapshot() {
    if (snapshot == nullptr) return;
    if (snapshot_memory != nullptr) {
      snapshot_memory->Free(snapshot, snapshot_bytes);
    } else {
      delete[] snapshot;
    }
    snapshot = nullptr;
    dispatched_inputs.clear();
  }
  ~Task() { FreeSnapshot(); }
  // Under mu_: the first failing subtask's error and kernel.
  absl::Status failure;
  uint16_t failed_func = 0;
  uint32_t step = 0;
  // Under mu_.
  uint32_t pending = 0;
  std::vector<Task*> dependents;
  bool completed = false;
  uint32_t subtasks_left = 0;
  uint32_t scheduler = 0;
  // Touched by the owning scheduler only.
  uint32_t flight_slot = abi::kNoFlightSlot;
  Clock::time_point dispatched_at;
  bool reaped = false;
  // When the last subtask's kernel returned (CLOCK_MONOTONIC ns): written
  // under mu_ as the completion is queued, read by the scheduler that took it.
  uint64_t completed_mono_ns = 0;
  // Shared with the workers running it.
  std::atomic<bool> cancel{false};
  std::atomic<uint64_t> drained{0};
};

// One scheduler's own state: touched by whoever holds its duty (its thread,
// or a worker it is lent to), handed between them under mu_.
struct SimRuntime::SchedulerThread {
  // Null when the dump is off; a constant null when it is compiled out, so
  // the compiler drops every dump branch that tests it.
  ThreadRecorder* recorder() const { return kDumpCompiled ? dump_recorder : nullptr; }

  uint32_t index = 0;
  ThreadRecorder* dump_recorder = nullptr;  // null when the dump is off
  std::vector<Task*> inflight;  // dispatched, not yet completed
  std::vector<uint32_t> free_slots;  // this scheduler's flight table slots not in use
  Clock::time_point last_progress;
  bool hang_reporter = false;  // this scheduler's thread declared the hang
};

SimRuntime::SimRuntime(SimConfig config, const KernelRegistry& kernels,
                       DumpRecorder* recorder)
    : config_(config), kernels_(kernels), recorder_(recorder) {
  if (config_.timeouts) {
    timeouts_ = *config_.timeouts;
  } else {
    std::vector<std::string> warnings;
    timeouts_ = TimeoutsFromEnvironment(&warnings);
    for (std::string& w : warnings) Warn(std::move(w));
  }
  DumpConfig first;
  if (config_.dump) {
    first = *config_.dump;
  } else if (recorder_ != nullptr) {
    first.level = static_cast<int>(recorder_->level());
  }
  step_dump_ = MakeStepDump(first);
  for (std::string& w : step_dump_.warnings) Warn(std::move(w));
  step_dump_.warnings.clear();
  step_levels_.push_back(StepLevelOf(0));
  completions_.resize(config_.scheduler_threads);
  waiting_with_room_.assign(config_.scheduler_threads, 0);
  completions_queued_ = std::make_unique<std::atomic<uint32_t>[]>(config_.scheduler_threads);
  duty_.assign(config_.scheduler_threads, Duty::kAwake);
  wants_duty_back_.assign(config_.scheduler_threads, 0);
  for (uint32_t i = 0; i < config_.scheduler_threads; ++i) {
    scheduler_cv_.push_back(std::make_unique<std::condition_variable>());
    scheduler_state_.push_back(std::make_unique<SchedulerThread>());
  }
}

SimRuntime::~SimRuntime() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    for (auto& t : tasks_) t->cancel.store(true, std::memory_order_release);
  }
  NotifySchedulers();
  for (auto& t : schedulers_) t.join();
  {
    std::lock_guard<std::mutex> lock(jobs_mu_);
    jobs_stop_ = true;
  }
  jobs_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

bool SimRuntime::dump_on() const { return kDumpCompiled && recorder_ != nullptr; }

namespace {
constexpr uint8_t kFuncNeutral = 0, kFuncAllowed = 1, kFuncBlocked = 2;
}  // namespace

SimRuntime::StepDump SimRuntime::MakeStepDump(const DumpConfig& config) const {
  StepDump d;
  d.config = config;
  d.on = dump_on() && config.level > 0;
  d.func_state.resize(kernels_.size(), kFuncNeutral);
  auto listed = [](const std::vector<std::string>& list, const KernelInfo& k) {
    return std::any_of(list.begin(), list.end(), [&](const std::string& f) {
      return f == k.name || (!k.type.empty() && f == k.type);
    });
  };
  // A name that is no kernel's name or type selects nothing: say so, with
  // what it could be, and leave it out (an allow list of nothing but such
  // names would silently dump nothing: it falls back to no list).
  auto known = [&](const std::string& name) {
    for (uint16_t f = 0; f < kernels_.size(); ++f) {
      const KernelInfo* k = kernels_.Find(f);
      if (k != nullptr && (k->name == name || (!k->type.empty() && k->type == name))) return true;
    }
    return false;
  };
  auto prune = [&](std::vector<std::string>* list, const char* item) {
    std::vector<std::string> unknown;
    list->erase(std::remove_if(list->begin(), list->end(),
                               [&](const std::string& n) {
                                 if (known(n)) return false;
                                 unknown.push_back(n);
                                 return true;
                               }),
                list->end());
    if (unknown.empty()) return;
    std::vector<std::string> names;
    for (uint16_t f = 0; f < kernels_.size(); ++f) {
      if (const KernelInfo* k = kernels_.Find(f)) {
        names.push_back(k->type.empty() ? k->name : absl::StrCat(k->name, " (", k->type, ")"));
      }
    }
    const bool emptied = list->empty() && std::string(item) == "funcs";
    d.warnings.push_back(absl::StrCat(
        item, ": '", absl::StrJoin(unknown, "', '"), "' is no kernel's name or type, so it "
        "selects nothing", emptied ? "; with no other name the list is dropped and every kernel "
        "is dumped" : "; it is left out",
        ". Known kernels (types): ", absl::StrJoin(names, ", ")));
  };
  if (d.on) {
    prune(&d.config.funcs, "funcs");
    prune(&d.config.block_funcs, "block_funcs");
  }
  if (d.on && !CoreTaskArgs::kDumpMarkers && (config.level == 1 || config.level == 3)) {
    d.warnings.push_back(absl::StrCat(
        "level ", config.level, " relies on dump(...) markers, and this build compiled them "
        "out (--//bazel:dump_markers=false): ",
        config.level == 1 ? "no arg is selected, so nothing is dumped"
                          : "no tensor is selected, so no tensor payload is dumped",
        "; use level 2, or build without the switch"));
  }
  for (uint16_t f = 0; f < kernels_.size(); ++f) {
    const KernelInfo* k = kernels_.Find(f);
    if (k == nullptr) continue;
    if (listed(d.config.block_funcs, *k)) {
      d.func_state[f] = kFuncBlocked;
    } else if (listed(d.config.funcs, *k)) {
      d.func_state[f] = kFuncAllowed;
    }
  }
  return d;
}

// A task is selected when its step is, none of its kernels is blocked, and
// (with an allow list) one of them is allowed.
bool SimRuntime::TaskSelected(const StepDump& d, const std::vector<uint16_t>& func_ids,
                              uint32_t step) const {
  if (!d.on || !d.config.steps.Contains(step)) return false;
  bool allowed = d.config.funcs.empty();
  for (uint16_t f : func_ids) {
    const uint8_t state = f < d.func_state.size() ? d.func_state[f] : kFuncNeutral;
    if (state == kFuncBlocked) return false;
    allowed = allowed || state == kFuncAllowed;
  }
  return allowed;
}

bool SimRuntime::Failed(Task* t, uint32_t thread) {
  absl::Status failure;
  {
    std::lock_guard<std::mutex> lock(mu_);
    failure = t->failure;
  }
  if (failure.ok()) return false;
  Error(absl::StrCat(failure.message(), "; the run stops (nothing more is dispatched)",
                     config_.exception_dump ? "; the task goes to an exception dump" : ""));
  if (config_.exception_dump) {
    if (!t->dumped) BuildDumpTask(t);
    t->dump.step = t->step;
    FailedTask f;
    f.task_id = t->id;
    f.step = t->step;
    f.thread = thread;
    f.func_ids = t->func_ids;
    const KernelInfo* k = kernels_.Find(t->failed_func);
    f.func = k != nullptr ? k->name : "?";
    f.type = k != nullptr ? k->type : "";
    f.error = std::string(failure.message());
    f.task = &t->dump;
    f.inputs = &t->dispatched_inputs;
    config_.exception_dump(f);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    failed_ = true;
  }
  NotifySchedulers();
  return true;
}

bool SimRuntime::Overflowed(Task* t) {
  if (!t->dumped) BuildDumpTask(t);  // its views, to look at the outputs
  bool overflow = false;
  uint32_t arg = 0;
  for (const DumpTensorArg& a : t->dump_tensors) {
    if (a.role != abi::ArgRole::kInput && HasNonFinite(a.view)) {
      overflow = true;
      arg = a.arg_index;
      break;
    }
  }
  if (!overflow) return false;
  std::string first;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++overflow_tasks_;
    if (!first_overflow_ || t->id < *first_overflow_) first_overflow_ = t->id;
    if (overflow_tasks_ == 1) {
      const KernelInfo* k = kernels_.Find(t->func_ids[0]);
      first = absl::StrCat("overflow: task ", TaskIdHex(t->id), " (", k ? k->name : "?",
                           ", step ", t->step, ") output arg ", arg,
                           " holds a NaN or an Inf; the task is dumped in full");
    }
  }
  if (!first.empty()) Info(std::move(first));
  return true;
}

void SimRuntime::Info(std::string message) {
  std::fprintf(stderr, "[argsdump dumper] INFO: %s\n", message.c_str());
  std::lock_guard<std::mutex> lock(mu_);
  dump_log_.push_back(std::move(message));
}

void SimRuntime::LogDumpedTask(Task* t, uint32_t thread) {
  if (t->logged) return;
  t->logged = true;
  std::string kernels;
  for (uint16_t f : t->func_ids) {
    const KernelInfo* k = kernels_.Find(f);
    absl::StrAppend(&kernels, kernels.empty() ? "" : " + ", k != nullptr ? k->name : "?",
                    k != nullptr && !k->type.empty() ? absl::StrCat(" (", k->type, ")") : "");
  }
  std::string line = absl::StrCat("dump task ", TaskIdHex(t->id), " step ", t->step,
                                  " scheduler thread ", thread, ": ", kernels);
  for (const DumpTensorArg& a : t->dump_tensors) {
    const TensorView& v = a.view;
    std::vector<uint32_t> shape(v.shape, v.shape + v.ndims);
    const uint8_t* first = v.data + PayloadBytes(v.dtype, v.start_offset);
    absl::StrAppend(&line, "; arg ", a.arg_index, " ",
                    a.role == abi::ArgRole::kInput    ? "input"
                    : a.role == abi::ArgRole::kOutput ? "output"
                                                      : "inout",
                    " ", std::string(DataTypeName(v.dtype)), " [", absl::StrJoin(shape, ","),
                    "] at 0x", absl::Hex(reinterpret_cast<uintptr_t>(first)),
                    v.start_offset != 0 ? absl::StrCat(" (start offset ", v.start_offset, ")")
                                        : "",
                    a.marked ? " marked" : "");
  }
  for (const DumpScalarArg& a : t->dump_scalars) {
    absl::StrAppend(&line, "; arg ", a.arg_index, " scalar ", std::string(DataTypeName(a.dtype)),
                    " 0x", absl::Hex(a.bits), a.marked ? " marked" : "");
  }
  std::fprintf(stderr, "[argsdump dumper] INFO: %s\n", line.c_str());
}

void SimRuntime::SetDumpConfig(const DumpConfig& config) {
  std::string message;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_dump_ = config;
    message = absl::StrCat("SetDumpConfig(", config.Describe(), "): takes effect at step ",
                           step_ + 1, " (or the first step, if none began)");
  }
  Info(std::move(message));
  if (config.level > 0 && !dump_on()) {
    Warn("SetDumpConfig: the dump cannot be switched on: this runtime was built without a "
         "recorder (run with a level > 0, or with a config file to watch, from the start)");
  }
}

void SimRuntime::BeginStep(uint32_t step) {
  std::string message;
  std::vector<std::string> warnings;
  {
    std::lock_guard<std::mutex> lock(mu_);
    step_ = step;
    if (pending_dump_) {
      StepDump next = MakeStepDump(*pending_dump_);
      pending_dump_.reset();
      if (next.on != step_dump_.on) {
        message = absl::StrCat("dump switched ", next.on ? "on" : "off", " at step ", step,
                               next.on ? absl::StrCat(" (", next.config.Describe(), ")") : "");
      } else if (next.on) {
        message = absl::StrCat("dump reconfigured at step ", step, ": ", next.config.Describe());
      }
      warnings.swap(next.warnings);
      step_dump_ = std::move(next);
    }
    const StepLevel now = StepLevelOf(step);
    if (tasks_.empty() && step_levels_.size() == 1) {
      step_levels_[0] = now;  // nothing ran before this step
    } else if (!step_levels_.back().SameDump(now)) {
      step_levels_.push_back(now);
    }
  }
  if (!message.empty()) Info(std::move(message));
  for (std::string& w : warnings) Warn(std::move(w));
}

StepLevel SimRuntime::StepLevelOf(uint32_t step) const {
  const DumpConfig& c = step_dump_.config;
  StepLevel l;
  l.first_step = step;
  l.level = step_dump_.on ? static_cast<uint32_t>(c.level) : 0;
  l.overflow = dump_on() && c.overflow;
  l.stats = c.stats;
  l.mode = c.mode;
  return l;
}

std::vector<StepLevel> SimRuntime::step_levels() const {
  std::lock_guard<std::mutex> lock(mu_);
  return step_levels_;
}

void SimRuntime::HoldDispatch() {
  std::lock_guard<std::mutex> lock(mu_);
  held_ = true;
}

void SimRuntime::ReleaseDispatch() {
  std::lock_guard<std::mutex> lock(mu_);
  held_ = false;
  // What MakeReady did not do while dispatch was held: wake one scheduler
  // sleeping with room per ready task.
  size_t wake = ready_.size();
  for (size_t i = 0; i < waiting_with_room_.size() && wake > 0; ++i) {
    if (waiting_with_room_[i] != 0) {
      waiting_with_room_[i] = 0;
      scheduler_cv_[i]->notify_one();
      --wake;
    }
  }
}

uint64_t SimRuntime::overflow_tasks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return overflow_tasks_;
}

std::optional<uint64_t> SimRuntime::first_overflow_task() const {
  std::lock_guard<std::mutex> lock(mu_);
  return first_overflow_;
}

uint32_t SimRuntime::step() const {
  std::lock_guard<std::mutex> lock(mu_);
  return step_;
}

std::vector<std::string> SimRuntime::dump_log() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dump_log_;
}

absl::Status SimRuntime::WaitSettled(std::unique_lock<std::mutex>& lock) {
  const Clock::time_point deadline = Clock::now() + timeouts_.stream_sync;
  const bool settled = sync_cv_.wait_until(
      lock, deadline, [&] { return hang_ || failed_ || completed_ == tasks_.size(); });
  if (settled) return absl::OkStatus();
  return absl::DeadlineExceededError(absl::StrCat(
      "stream sync timeout: ", completed_, " of ", tasks_.size(), " tasks finished within ",
      std::chrono::duration_cast<std::chrono::milliseconds>(timeouts_.stream_sync).count(),
      " ms"));
}

absl::Status SimRuntime::WaitIdle() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!started_) return absl::FailedPreconditionError("sim runtime: not started");
  absl::Status timeout = WaitSettled(lock);
  return run_status_.ok() ? timeout : run_status_;
}

void SimRuntime::Error(std::string message) {
  std::fprintf(stderr, "[argsdump sim] ERROR: %s\n", message.c_str());
}

void SimRuntime::Warn(std::string message) {
  std::fprintf(stderr, "[argsdump sim] WARNING: %s\n", message.c_str());
  std::lock_guard<std::mutex> lock(mu_);
  warnings_.push_back(std::move(message));
}

uint64_t SimRuntime::LayoutWarningsPrinted() { return g_layout_warnings.load(); }

absl::StatusOr<Tensor> SimRuntime::Alloc(DataType dtype,
                                         const std::vector<uint32_t>& shape) {
  if (shape.size() > abi::kMaxDims) {
    return absl::InvalidArgumentError(
        absl::StrCat("alloc: ", shape.size(), " dims, at most ", abi::kMaxDims));
  }
  uint64_t elements = 1;
  for (uint32_t s : shape) {
    if (s != 0 && elements > UINT64_MAX / s) {
      return absl::InvalidArgumentError("alloc: the shape's element count overflows 64 bits");
    }
    elements *= s;
  }
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = next_buffer_id_++;
  }
  auto buffer = DeviceBuffer::Create(id, dtype, elements, this, config_.memory);
  if (!buffer.ok()) return buffer.status();
  return Tensor::Whole(*std::move(buffer), shape);
}

absl::Status SimRuntime::Start() {
  if (config_.scheduler_threads == 0 || config_.worker_threads == 0 ||
      config_.max_inflight_per_scheduler == 0) {
    return absl::InvalidArgumentError(
        "sim runtime: scheduler_threads, worker_threads and "
        "max_inflight_per_scheduler must be at least 1");
  }
  if (dump_on() && recorder_->num_threads() < config_.scheduler_threads) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sim runtime: ", config_.scheduler_threads, " scheduler threads but the dump "
        "region has only ", recorder_->num_threads(), " recorder threads"));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (started_) return absl::FailedPreconditionError("sim runtime: already started");
    started_ = true;
  }
  if ((config_.flight == nullptr) != (config_.memory == nullptr)) {
    return absl::InvalidArgumentError("sim runtime: flight table and device memory go together");
  }
  if (config_.flight != nullptr &&
      (config_.flight->header().slots_per_scheduler < config_.max_inflight_per_scheduler ||
       config_.flight->slots() <
           config_.flight->header().slots_per_scheduler * config_.scheduler_threads ||
       config_.flight->workers() < config_.worker_threads)) {
    return absl::InvalidArgumentError("sim runtime: the flight table is smaller than the runtime");
  }
  // A thread the system refuses (ulimit -v, a thread limit) fails the run
  // with that status; the threads already started stop in the destructor.
  absl::Status threads;
  for (uint32_t i = 0; threads.ok() && i < config_.worker_threads; ++i) {
    workers_.emplace_back();
    threads = StartThread("a sim worker thread", &workers_.back(), [this, i] { WorkerLoop(i); });
    if (!threads.ok()) workers_.pop_back();
  }
  for (uint32_t i = 0; threads.ok() && i < config_.scheduler_threads; ++i) {
    schedulers_.emplace_back();
    threads = StartThread("a sim scheduler thread", &schedulers_.back(),
                          [this, i] { SchedulerLoop(i); });
    if (!threads.ok()) schedulers_.pop_back();
  }
  if (!threads.ok()) {
    Abort(threads);
    return threads;
  }
  NotifySchedulers();
  return absl::OkStatus();
}

void SimRuntime::BuildDumpTask(Task* task) {
  // The widest active subtask's signature drives the dump.
  const KernelInfo* widest = nullptr;
  for (uint16_t f : task->func_ids) {
    const KernelInfo* k = kernels_.Find(f);
    if (widest == nullptr || k->signature.size() > widest->signature.size()) widest = k;
  }
  const auto& slots = task->args.tensors();
  const bool whole = task->args.whole_task_marked();
  task->dump_tensors.reserve(slots.size());
  task->dump_scalars.reserve(task->args.scalars().size());
  uint32_t covered = 0;
  for (size_t i = 0; i < widest->signature.size(); ++i) {
    const ArgDirection d = widest->signature[i];
    if (d == ArgDirection::kScalar) continue;  // scalars are dumped separately
    if (i >= slots.size()) break;              // prefix-dispatched: skip the rest
    const CoreTaskArgs::TensorSlot& slot = slots[i];
    if (slot.role != RoleOf(d)) {
      // Signature and payload disagree: skip this task's dump, say it once.
      task->dump_tensors.clear();
      std::lock_guard<std::mutex> lock(mu_);
      ++dump_skipped_;
      if (!g_layout_warned.exchange(true)) {
        g_layout_warnings.fetch_add(1);
        std::string w = absl::StrCat(
            "dump skipped for task ", TaskIdHex(task->id), ": kernel '", widest->name,
            "' declares tensor slot ", i, " as a different direction than the task "
            "added it (further layout mismatches are not reported)");
        std::fprintf(stderr, "[argsdump sim] WARNING: %s\n", w.c_str());
        warnings_.push_back(std::move(w));
      }
      return;
    }
    DumpTensorArg arg;
    arg.view = slot.tensor.view();
    arg.role = slot.role;
    arg.arg_index = static_cast<uint32_t>(i);
    arg.marked = slot.marked || whole;
    arg.ambiguous = slot.ambiguous;
    task->dump_tensors.push_back(arg);
    ++covered;
  }
  if (covered < slots.size() && !g_completeness_warned.exchange(true)) {
    Warn(absl::StrCat("task ", TaskIdHex(task->id), ": kernel '", widest->name,
                      "' declares ", covered, " of the task's ", slots.size(),
                      " tensor slots; the rest are not dumped (reported once)"));
  }
  const uint32_t tensor_count = static_cast<uint32_t>(slots.size());
  const auto& scalars = task->args.scalars();
  for (size_t i = 0; i < scalars.size(); ++i) {
    DumpScalarArg arg;
    arg.dtype = scalars[i].dtype;
    arg.bits = scalars[i].bits;
    arg.arg_index = tensor_count + static_cast<uint32_t>(i);
    arg.marked = scalars[i].marked || whole;
    arg.ambiguous = scalars[i].ambiguous;
    task->dump_scalars.push_back(arg);
  }
  DumpTask& d = task->dump;
  d.task_id = task->id;
  d.func_count = static_cast<uint8_t>(task->func_ids.size());
  std::vector<uint16_t> sorted = task->func_ids;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) d.func_ids[i] = sorted[i];
  d.has_marker = task->args.has_marker();
  d.tensors = task->dump_tensors.data();
  d.tensor_count = static_cast<uint32_t>(task->dump_tensors.size());
  d.scalars = task->dump_scalars.data();
  d.scalar_count = static_cast<uint32_t>(task->dump_scalars.size());
  task->dumped = true;
}

absl::Status SimRuntime::CheckSubmit(const std::vector<uint16_t>& func_ids,
                                     const CoreTaskArgs& args) const {
  if (!args.status().ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("submit: task args are invalid: ", args.status().message()));
  }
  if (func_ids.empty() || func_ids.size() > abi::kMaxFuncIds) {
    return absl::InvalidArgumentError(absl::StrCat(
        "submit: a task runs 1 to ", abi::kMaxFuncIds, " kernels, got ", func_ids.size()));
  }
  for (uint16_t f : func_ids) {
    if (kernels_.Find(f) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("submit: unknown func_id ", f));
    }
  }
  for (size_t i = 0; i < args.tensors().size(); ++i) {
    const void* owner = args.tensors()[i].tensor.buffer()->owner();
    if (owner != nullptr && owner != this) {
      return absl::InvalidArgumentError(absl::StrCat(
          "submit: tensor arg ", i, " was allocated by another device (session); allocate it "
          "with this one's Alloc"));
    }
  }
  return absl::OkStatus();
}

void SimRuntime::StampTask(Task* t) {
  t->id = (uint64_t{config_.run_id} << 32) | tasks_.size();
  t->step = step_;
  t->overflow_check = dump_on() && step_dump_.config.overflow;
  t->verbose = dump_on() && step_dump_.config.verbose;
  t->snapshot_inputs =
      kDumpCompiled && config_.exception_dump && step_dump_.config.snapshot_inputs;
  if (step_dump_.config.stats != StatsMode::kOff) {
    t->dump.tensor_flags = static_cast<uint8_t>(
        abi::kFlagStats |
        (step_dump_.config.stats == StatsMode::kOnly ? abi::kFlagStatsOnly : 0));
  }
  if (dump_on() && TaskSelected(step_dump_, t->func_ids, step_)) {
    t->dump_before = step_dump_.config.CapturesBefore();
    t->dump_after = step_dump_.config.CapturesAfter();
    t->dump.step = step_;
    if (step_dump_.config.level != static_cast<int>(recorder_->level())) {
      t->dump.level = static_cast<uint8_t>(step_dump_.config.level);
    }
  }
}

void SimRuntime::LinkBuffers(Task* t) {
  const auto& slots = t->args.tensors();
  // O(1) amortised per slot: a reader list grows only until the next write
  // (which walks it once and clears it) and is pruned of completed readers
  // whenever it doubled; duplicates are seen at the back of a list.
  std::vector<BufferState*> states;
  states.reserve(slots.size());
  for (const auto& slot : slots) states.push_back(&buffers_[slot.tensor.buffer()->id()]);
  for (size_t i = 0; i < slots.size(); ++i) {
    BufferState& b = *states[i];
    if (b.last_writer != nullptr) AddDependency(t, b.last_writer);
    if (slots[i].role != abi::ArgRole::kInput) {
      for (Task* r : b.readers) AddDependency(t, r);
      dependency_work_ += b.readers.size();
    }
  }
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].role == abi::ArgRole::kInput) continue;
    BufferState& b = *states[i];
    b.last_writer = t;
    b.readers.clear();
    b.prune_at = BufferState::kFirstPrune;
  }
  for (size_t i = 0; i < slots.size(); ++i) {
    BufferState& b = *states[i];
    if (slots[i].role != abi::ArgRole::kInput || b.last_writer == t) continue;
    if (!b.readers.empty() && b.readers.back() == t) continue;  // the same buffer twice
    b.readers.push_back(t);
    if (b.readers.size() >= b.prune_at) {
      dependency_work_ += b.readers.size();
      b.readers.erase(std::remove_if(b.readers.begin(), b.readers.end(),
                                     [](Task* r) { return r->completed; }),
                      b.readers.end());
      b.prune_at = std::max(BufferState::kFirstPrune, 2 * b.readers.size());
    }
  }
  dependency_work_ += slots.size();
}

absl::StatusOr<uint64_t> SimRuntime::Submit(const std::vector<uint16_t>& func_ids,
                                            CoreTaskArgs args) {
  if (absl::Status s = CheckSubmit(func_ids, args); !s.ok()) return s;
  auto task = std::make_unique<Task>();
  task->func_ids = func_ids;
  task->args = std::move(args);
  Task* t = task.get();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ || hang_) {
      return absl::FailedPreconditionError("submit: the runtime has stopped");
    }
    StampTask(t);
    tasks_.push_back(std::move(task));
    if (config_.flight != nullptr) {
      config_.flight->header().tasks_submitted.store(tasks_.size(), std::memory_order_relaxed);
    }
  }
  // Filtered tasks stop at the check above: no dump view is built.
  if (t->dump_before || t->dump_after) BuildDumpTask(t);

  std::lock_guard<std::mutex> lock(mu_);
  LinkBuffers(t);
  if (t->pending == 0) MakeReady(t);
  return t->id;
}

uint64_t SimRuntime::dependency_work() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dependency_work_;
}

void SimRuntime::AddDependency(Task* task, Task* on) {
  if (on == task || on->completed) return;
  // All of `task`'s dependencies are added in its Submit, under mu_: a
  // second slot on the same task finds `task` last in the list.
  if (!on->dependents.empty() && on->dependents.back() == task) return;
  on->dependents.push_back(task);
  ++task->pending;
}

void SimRuntime::MakeReady(Task* task, uint32_t* unclaimed) {
  ready_.push_back(task);
  // Held: ReleaseDispatch wakes schedulers for what is ready.
  if (!started_ || held_) return;
  // The scheduler releasing it has room: it takes it before it sleeps.
  if (unclaimed != nullptr && *unclaimed > 0) {
    --*unclaimed;
    return;
  }
  // One scheduler that can take it; the next ready task wakes another. If
  // none waits with room, the busy ones see ready_ before they wait, and a
  // full one takes it after its next completion (a lent one, as its duty
  // is given back).
  for (size_t i = 0; i < waiting_with_room_.size(); ++i) {
    if (waiting_with_room_[i] != 0) {
      waiting_with_room_[i] = 0;
      scheduler_cv_[i]->notify_one();
      return;
    }
  }
}

void SimRuntime::NotifySchedulers() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& cv : scheduler_cv_) cv->notify_all();
  sync_cv_.notify_all();
}

void SimRuntime::Retire(Task* task, uint32_t* unclaimed) {
  // What a completed task no longer needs goes (a step of 10^6 tasks keeps
  // only their small records); freed after mu_ is let go.
  CoreTaskArgs args;
  std::vector<DumpTensorArg> dump_tensors;
  std::vector<DumpScalarArg> dump_scalars;
  std::vector<Task*> dependents;
  {
    std::lock_guard<std::mutex> lock(mu_);
    task->completed = true;
    for (Task* d : task->dependents) {
      if (--d->pending == 0) MakeReady(d, unclaimed);
    }
    ++completed_;
    if (config_.flight != nullptr) {
      config_.flight->header().tasks_completed.store(completed_, std::memory_order_relaxed);
    }
    if (completed_ == tasks_.size()) sync_cv_.notify_all();
    args = std::move(task->args);
    dependents.swap(task->dependents);
  }
  dump_tensors.swap(task->dump_tensors);
  dump_scalars.swap(task->dump_scalars);
  task->FreeSnapshot();
  task->dump.tensors = nullptr;
  task->dump.tensor_count = 0;
  task->dump.scalars = nullptr;
  task->dump.scalar_count = 0;
}

void SimRuntime::SchedulerLoop(uint32_t index) {
  SchedulerThread& scheduler = *scheduler_state_[index];
  scheduler.index = index;
  scheduler.dump_recorder = dump_on() ? &recorder_->thread(index) : nullptr;
  scheduler.last_progress = Clock::now();
  if (config_.flight != nullptr) {
    const uint32_t per = config_.flight->header().slots_per_scheduler;
    for (uint32_t k = per; k-- > 0;) scheduler.free_slots.push_back(index * per + k);
  }
  for (;;) {
    std::vector<Task*> done;
    std::vector<Task*> dispatch;
    if (!WaitForWork(scheduler, &done, &dispatch)) break;
    // A kernel failed in a task this thread completed: nothing more is
    // dispatched.
    if (!CompleteTasks(scheduler, done, dispatch.size())) break;
    DispatchTasks(scheduler, dispatch);
    ReapOverdueOps(scheduler);
  }
  StopScheduler(scheduler);
}

namespace {

// Spins (pause instructions, ~140 cycles each on this machine class) a
// worker and a scheduler spend looking for their next job / completion
// before they sleep on a condition variable: up to ~0.1 ms and ~20 us.
// Every 16th pause is a sched_yield() instead: with more threads than cores
// (4 schedulers and 4 workers on 2 cores), or other processes loading the
// machine, a spinner then lets the thread it waits for run instead of
// holding the core to the end of its slice. Measured with
// sim_runtime_benchmark on 2 cores at load 5-9 (other builds running), a
// held step of 10^5 tasks: level 0 603-700 ms before this dispatch path,
// 790-1040 ms spinning on pause alone, 233-326 ms yielding every 16th;
// level 2 700-820, 1210-1840, 335-368 ms. One spinner at a time instead of
// every idle thread (a budget) was slower: 700-840 ms.
constexpr int kWorkerSpins = 2000;
constexpr int kSchedulerSpins = 400;
constexpr int kYieldEvery = 16;

inline void CpuPause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Spins until `done()` or `spins` rounds have passed; whether done() was
// seen.
template <typename Done>
bool SpinFor(int spins, Done done) {
  for (int spin = 1; spin <= spins; ++spin) {
    if (done()) return true;
    if (spin % kYieldEvery == 0) {
      std::this_thread::yield();
    } else {
      CpuPause();
    }
  }
  return done();
}

// Whether the machine has many more runnable threads than cores: the
// kernel's count of them (/proc/loadavg's running threads, every process's),
// read again at most every 10 ms by the spinner that finds it stale. One
// run's own threads, spinning, stay under the bound; a job of 64 ranks on 2
// cores is far over it, and there a spin only hands the core to other
// processes' spinners (each yield a slice of someone else's).
class RunnableThreads {
 public:
  static bool Crowded() {
    static RunnableThreads gauge;
    return gauge.Over();
  }

 private:
  static constexpr int64_t kRefreshNs = 10'000'000;
  static constexpr uint32_t kPerCore = 12;

  bool Over() {
    const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            Clock::now().time_since_epoch())
                            .count();
    int64_t at = read_at_ns_.load(std::memory_order_relaxed);
    if (now - at >= kRefreshNs &&
        read_at_ns_.compare_exchange_strong(at, now, std::memory_order_relaxed)) {
      runnable_.store(Read(), std::memory_order_relaxed);
    }
    return runnable_.load(std::memory_order_relaxed) > bound_;
  }

  // The runnable count of /proc/loadavg ("0.52 0.58 0.59 3/456 789": its
  // fourth field's numerator, the kernel's nr_running); 0 (not crowded)
  // when it cannot be read.
  static uint32_t Read() {
    const int fd = ::open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char buf[256];
    ssize_t got;
    do {
      got = ::read(fd, buf, sizeof(buf));
    } while (got < 0 && errno == EINTR);
    ::close(fd);
    if (got <= 0) return 0;
    const std::vector<absl::string_view> fields =
        absl::StrSplit(absl::string_view(buf, static_cast<size_t>(got)), ' ');
    if (fields.size() < 4) return 0;
    const absl::string_view running = fields[3].substr(0, fields[3].find('/'));
    uint32_t n = 0;
    return absl::SimpleAtoi(running, &n) ? n : 0;
  }

  const uint32_t bound_ = kPerCore * std::max(1u, std::thread::hardware_concurrency());
  std::atomic<int64_t> read_at_ns_{std::numeric_limits<int64_t>::min() / 2};
  std::atomic<uint32_t> runnable_{0};
};

// One thread's spin budget, following how its spins pay off: doubled (up
// to the maximum) when a spin saw what it waited for, halved when the
// thread went to sleep anyway. Alone on the machine the budget stays at its
// maximum; with many more runnable threads than cores (a job of 64 ranks
// on 2 cores) spins that never pay shrink to nothing and waiting threads
// block at once, leaving the cores to the threads that have work; while
// the machine is crowded (RunnableThreads) a spin only looks once. A
// budget of 0 still looks once, so a payoff grows it back.
class AdaptiveSpin {
 public:
  explicit AdaptiveSpin(int max) : max_(max), budget_(max) {}
  template <typename Done>
  void Spin(Done done) {
    if (RunnableThreads::Crowded()) {
      (void)done();
      return;
    }
    if (SpinFor(budget_, done)) {
      budget_ = std::min(max_, std::max(2 * budget_, kYieldEvery));
    } else {
      budget_ /= 2;
    }
  }

 private:
  const int max_;
  int budget_;
};

}  // namespace

bool SimRuntime::WaitForWork(SchedulerThread& scheduler, std::vector<Task*>* done,
                             std::vector<Task*>* dispatch) {
  const uint32_t max_inflight = config_.max_inflight_per_scheduler;
  std::unique_lock<std::mutex> lock(mu_);
  auto wake = [&] {
    return stop_ || hang_ || failed_ || !completions_[scheduler.index].empty() ||
           (!ready_.empty() && !held_ && scheduler.inflight.size() < max_inflight);
  };
  std::condition_variable& cv = *scheduler_cv_[scheduler.index];
  if (!wake() && !scheduler.inflight.empty()) {
    // A completion usually comes soon: look for one for a moment before
    // sleeping, so the worker's hand-off needs no futex wake.
    lock.unlock();
    thread_local AdaptiveSpin spin(kSchedulerSpins);
    spin.Spin([&] {
      return completions_queued_[scheduler.index].load(std::memory_order_relaxed) != 0;
    });
    lock.lock();
  }
  // While asleep, the duty may be lent to a worker: then the state is
  // not this thread's until the worker gives it back (and wakes it, as
  // wants_duty_back_ asks), and the deadline and room are read afresh.
  const uint32_t i = scheduler.index;
  for (;;) {
    if (duty_[i] == Duty::kLent) {
      wants_duty_back_[i] = 1;
      cv.wait(lock);
      continue;
    }
    duty_[i] = Duty::kAwake;
    if (wake()) break;
    // Wake for the hang deadline, and in time to reap ops past op-execute.
    Clock::time_point deadline = scheduler.last_progress + timeouts_.scheduler;
    for (Task* t : scheduler.inflight) {
      deadline = std::min(deadline, t->dispatched_at + timeouts_.op_execute);
    }
    // Marked waiting before every sleep (MakeReady clears the mark of the
    // one it wakes, so that the next ready task wakes another).
    waiting_with_room_[i] = scheduler.inflight.size() < max_inflight ? 1 : 0;
    duty_[i] = Duty::kAsleep;
    bool timed_out = false;
    if (scheduler.inflight.empty()) {
      cv.wait(lock);  // nothing of its own in flight: no worker takes its duty
    } else {
      timed_out = cv.wait_until(lock, deadline) == std::cv_status::timeout;
    }
    if (duty_[i] == Duty::kAsleep && timed_out) break;
  }
  duty_[i] = Duty::kAwake;
  wants_duty_back_[i] = 0;
  waiting_with_room_[i] = 0;
  if (stop_ || hang_ || failed_) return false;
  done->swap(completions_[i]);
  completions_queued_[i].store(0, std::memory_order_relaxed);
  TakeReady(scheduler, dispatch);
  const Clock::time_point now = Clock::now();
  if (done->empty() && dispatch->empty() && !scheduler.inflight.empty() &&
      now >= scheduler.last_progress + timeouts_.scheduler) {
    DeclareHang(scheduler);
    return false;
  }
  return true;
}

void SimRuntime::TakeReady(const SchedulerThread& scheduler, std::vector<Task*>* dispatch) {
  while (!ready_.empty() && !held_ &&
         scheduler.inflight.size() + dispatch->size() < config_.max_inflight_per_scheduler) {
    dispatch->push_back(ready_.front());
    ready_.pop_front();
  }
}

void SimRuntime::DeclareHang(SchedulerThread& scheduler) {
  std::string ids;
  for (Task* t : scheduler.inflight) {
    absl::StrAppend(&ids, ids.empty() ? "" : ", ", TaskIdHex(t->id));
  }
  hang_ = true;
  if (run_status_.ok()) {
    run_status_ = absl::DeadlineExceededError(absl::StrCat(
        "scheduler timeout: scheduler thread ", scheduler.index, " saw no progress for ",
        std::chrono::duration_cast<std::chrono::milliseconds>(timeouts_.scheduler).count(),
        " ms; running tasks: ", ids));
  }
  for (auto& other : scheduler_cv_) other->notify_all();
  sync_cv_.notify_all();
  scheduler.hang_reporter = true;
}

bool SimRuntime::CompleteTasks(SchedulerThread& scheduler, const std::vector<Task*>& done,
                               size_t taken) {
  ThreadRecorder* rec = scheduler.recorder();
  bool stopping = false;
  // Dependents this scheduler takes itself (it looks at ready_ before it
  // sleeps), up to its room, instead of waking another scheduler for them.
  uint32_t claimed = 0;
  for (Task* t : done) {
    // Written under mu_ before the completion was queued; `done` was taken
    // under mu_.
    t->dump.complete_mono_ns = t->completed_mono_ns;
    if (rec != nullptr && t->overflow_check && !t->reaped && Overflowed(t)) {
      // The whole task, flagged; it replaces the ordinary after record.
      t->dump.step = t->step;
      if (t->verbose) LogDumpedTask(t, scheduler.index);
      rec->RecordOverflow(t->dump, /*recorded_before=*/t->dump_before);
    } else if (rec != nullptr && t->dumped && t->dump_after) {
      rec->RecordTask(t->dump, abi::Stage::kAfterCompletion,
                      t->reaped ? abi::kFlagInFlightSnapshot : 0);
    }
    scheduler.inflight.erase(std::find(scheduler.inflight.begin(), scheduler.inflight.end(), t));
    if (t->flight_slot != abi::kNoFlightSlot) {
      config_.flight->Release(t->flight_slot);
      scheduler.free_slots.push_back(t->flight_slot);
      t->flight_slot = abi::kNoFlightSlot;
    }
    if (Failed(t, scheduler.index)) {
      stopping = true;  // nothing more is dispatched, nor retired
      continue;
    }
    const size_t busy = scheduler.inflight.size() + taken + claimed;
    const uint32_t room = busy < config_.max_inflight_per_scheduler
                              ? static_cast<uint32_t>(config_.max_inflight_per_scheduler - busy)
                              : 0;
    uint32_t unclaimed = room;
    Retire(t, &unclaimed);
    claimed += room - unclaimed;
    scheduler.last_progress = Clock::now();
  }
  return !stopping;
}

void SimRuntime::DispatchTasks(SchedulerThread& scheduler, const std::vector<Task*>& dispatch,
                               std::optional<Job>* keep) {
  ThreadRecorder* rec = scheduler.recorder();
  for (Task* t : dispatch) {
    if (t->snapshot_inputs) SnapshotTaskInputs(t);
    if (config_.flight != nullptr) PublishFlight(scheduler, t);
    if (rec != nullptr && t->verbose && t->dumped && (t->dump_before || t->dump_after)) {
      LogDumpedTask(t, scheduler.index);
    }
    // The dispatch time is read as the task is handed over, before its
    // before_dispatch records (which carry it) are written.
    t->dispatched_at = Clock::now();
    t->dump.dispatch_mono_ns = MonotonicNs(t->dispatched_at);
    if (rec != nullptr && t->dumped && t->dump_before) {
      rec->RecordTask(t->dump, abi::Stage::kBeforeDispatch);
    }
    t->scheduler = scheduler.index;
    scheduler.inflight.push_back(t);
    {
      std::lock_guard<std::mutex> lock(mu_);
      t->subtasks_left = static_cast<uint32_t>(t->func_ids.size());
    }
    uint32_t first = 0;
    if (keep != nullptr && !keep->has_value()) {
      *keep = Job{t, 0};
      first = 1;
    }
    if (first < t->func_ids.size()) {
      std::lock_guard<std::mutex> lock(jobs_mu_);
      for (uint32_t i = first; i < t->func_ids.size(); ++i) jobs_.push_back(Job{t, i});
      jobs_queued_.store(jobs_.size(), std::memory_order_relaxed);
    }
    // One worker per job: waking every idle worker for each (a herd that
    // finds one job) was most of the dispatch cost.
    for (size_t i = first; i < t->func_ids.size(); ++i) jobs_cv_.notify_one();
    scheduler.last_progress = Clock::now();
  }
}

// The task's tensor slots (input and inout ones) copied, in slot order, with
// their geometry: what its before_dispatch records would hold.
void SimRuntime::SnapshotTaskInputs(Task* t) {
  const auto& slots = t->args.tensors();
  std::vector<DumpTensorArg> tensors(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) {
    tensors[i].view = slots[i].tensor.view();
    tensors[i].role = slots[i].role;
    tensors[i].arg_index = static_cast<uint32_t>(i);
    tensors[i].marked = slots[i].marked;
    tensors[i].ambiguous = slots[i].ambiguous;
  }
  const uint32_t count = static_cast<uint32_t>(tensors.size());
  const uint64_t bytes = InputSnapshotBytes(tensors.data(), count);
  if (bytes == 0) return;
  t->FreeSnapshot();
  if (config_.memory != nullptr) {
    absl::StatusOr<uint8_t*> at = config_.memory->Allocate(bytes);
    if (!at.ok()) {
      if (!g_snapshot_warned.exchange(true)) {
        Warn(absl::StrCat("snapshot_inputs: no room for task ", TaskIdHex(t->id), "'s ", bytes,
                          " input bytes (", at.status().message(),
                          "); its exception dump would lack them (further tasks without room "
                          "are not reported)"));
      }
      return;
    }
    t->snapshot = *at;
    t->snapshot_memory = config_.memory;
  } else {
    t->snapshot = new uint8_t[bytes];
    t->snapshot_memory = nullptr;
  }
  t->snapshot_bytes = bytes;
  t->snapshot_at.assign(count, abi::kNoSnapshot);
  SnapshotInputs(tensors.data(), count, t->snapshot, &t->dispatched_inputs, t->snapshot_at.data());
}

void SimRuntime::PublishFlight(SchedulerThread& scheduler, Task* t) {
  if (scheduler.free_slots.empty()) return;  // cannot happen: one slot per in-flight task
  t->flight_slot = scheduler.free_slots.back();
  scheduler.free_slots.pop_back();
  // The input copies' offsets by slot, for the dump view's tensors (their
  // arg_index is their slot).
  std::vector<uint64_t> at;
  auto snapshot_at = [&](const DumpTensorArg* tensors, uint32_t count) -> const uint64_t* {
    if (t->snapshot == nullptr) return nullptr;
    at.assign(count, abi::kNoSnapshot);
    for (uint32_t i = 0; i < count; ++i) {
      if (tensors[i].arg_index < t->snapshot_at.size()) at[i] = t->snapshot_at[tensors[i].arg_index];
    }
    return at.data();
  };
  if (t->dumped) {
    t->dump.step = t->step;
    config_.flight->Publish(t->flight_slot, scheduler.index, t->dump, true, t->dump_after,
                            *config_.memory, t->snapshot, t->snapshot_bytes,
                            snapshot_at(t->dump.tensors, t->dump.tensor_count));
    return;
  }
  // Not dumped: the views all the same, for the exception dump of a crash.
  DumpTask d;
  d.task_id = t->id;
  d.step = t->step;
  d.func_count = static_cast<uint8_t>(t->func_ids.size());
  std::copy(t->func_ids.begin(), t->func_ids.end(), d.func_ids);
  DumpTensorArg tensors[CoreTaskArgs::kMaxTensors];
  DumpScalarArg scalars[CoreTaskArgs::kMaxScalars];
  const auto& slots = t->args.tensors();
  for (size_t i = 0; i < slots.size() && i < CoreTaskArgs::kMaxTensors; ++i) {
    tensors[i].view = slots[i].tensor.view();
    tensors[i].role = slots[i].role;
    tensors[i].arg_index = static_cast<uint32_t>(i);
    tensors[i].marked = slots[i].marked;
    tensors[i].ambiguous = slots[i].ambiguous;
    ++d.tensor_count;
  }
  const auto& values = t->args.scalars();
  for (size_t i = 0; i < values.size() && i < CoreTaskArgs::kMaxScalars; ++i) {
    scalars[i].dtype = values[i].dtype;
    scalars[i].bits = values[i].bits;
    scalars[i].arg_index = static_cast<uint32_t>(slots.size() + i);
    scalars[i].marked = values[i].marked;
    ++d.scalar_count;
  }
  d.tensors = tensors;
  d.scalars = scalars;
  config_.flight->Publish(t->flight_slot, scheduler.index, d, false, false, *config_.memory,
                          t->snapshot, t->snapshot_bytes, snapshot_at(d.tensors, d.tensor_count));
}

void SimRuntime::ReapOverdueOps(SchedulerThread& scheduler) {
  // A backstop: the scheduler timeout, which is shorter, normally fires
  // first.
  const Clock::time_point now = Clock::now();
  for (Task* t : scheduler.inflight) {
    if (!t->reaped && now - t->dispatched_at >= timeouts_.op_execute) {
      t->reaped = true;
      t->cancel.store(true, std::memory_order_release);
    }
  }
}

void SimRuntime::StopScheduler(SchedulerThread& scheduler) {
  ThreadRecorder* rec = scheduler.recorder();
  if (scheduler.hang_reporter) {
    std::string why;
    {
      std::lock_guard<std::mutex> lock(mu_);
      why = std::string(run_status_.message());
    }
    Error(absl::StrCat(why, "; the running tasks' partial outputs are dumped (flagged in-flight "
                            "snapshot) and the run stops"));
  }
  // Stopped or hung: record what the still-running tasks wrote so far, then
  // hand everything to the host.
  for (Task* t : scheduler.inflight) {
    if (rec != nullptr && t->dumped && t->dump_after) {
      // Best effort, like a real hang: what a stuck kernel drained is
      // visible (acquire pairs with KernelContext::Drain), and subtasks that
      // already finished handed over under mu_, taken here once more.
      (void)t->drained.load(std::memory_order_acquire);
      { std::lock_guard<std::mutex> lock(mu_); }
      rec->RecordTask(t->dump, abi::Stage::kAfterCompletion, abi::kFlagInFlightSnapshot);
      if (t->flight_slot != abi::kNoFlightSlot) config_.flight->MarkSnapshotTaken(t->flight_slot);
    }
    t->cancel.store(true, std::memory_order_release);
  }
  if (rec != nullptr) rec->Flush();
}

std::optional<SimRuntime::Job> SimRuntime::CompleteAsScheduler(SchedulerThread& scheduler,
                                                               Task* task) {
  // The task did not fail (the worker looked under mu_), so this records
  // and retires it and calls no exception dump.
  (void)CompleteTasks(scheduler, {task}, 0);
  std::vector<Task*> dispatch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stop_ && !hang_ && !failed_) TakeReady(scheduler, &dispatch);
  }
  std::optional<Job> keep;
  DispatchTasks(scheduler, dispatch, &keep);
  std::lock_guard<std::mutex> lock(mu_);
  const uint32_t i = scheduler.index;
  const bool room = scheduler.inflight.size() < config_.max_inflight_per_scheduler;
  duty_[i] = Duty::kAsleep;
  waiting_with_room_[i] = room ? 1 : 0;
  // Its thread sleeps on: wake it for what it would have woken for
  // meanwhile, or when it woke and waits for its duty.
  if (wants_duty_back_[i] != 0 || stop_ || hang_ || failed_ || !completions_[i].empty() ||
      (room && !ready_.empty() && !held_)) {
    waiting_with_room_[i] = 0;
    scheduler_cv_[i]->notify_one();
  }
  return keep;
}

void SimRuntime::WorkerLoop(uint32_t worker) {
  std::optional<Job> kept;  // a job this worker dispatched to itself
  for (;;) {
    Job job;
    if (kept.has_value()) {
      job = *kept;
      kept.reset();
    } else {
      // A job usually follows soon (the scheduler dispatches the next task
      // of the stream as this one's completion is taken): look for a moment
      // before sleeping, so the hand-off needs no futex wake.
      thread_local AdaptiveSpin spin(kWorkerSpins);
      spin.Spin([&] { return jobs_queued_.load(std::memory_order_relaxed) != 0; });
      std::unique_lock<std::mutex> lock(jobs_mu_);
      jobs_cv_.wait(lock, [&] { return jobs_stop_ || !jobs_.empty(); });
      if (jobs_stop_) return;
      job = jobs_.front();
      jobs_.pop_front();
      jobs_queued_.store(jobs_.size(), std::memory_order_relaxed);
    }
    Task* t = job.task;
    absl::Status status;
    if (!t->cancel.load(std::memory_order_acquire)) {
      const KernelInfo* kernel = kernels_.Find(t->func_ids[job.subtask]);
      KernelContext ctx(t->args, job.subtask, &t->cancel, &t->drained);
      if (config_.flight != nullptr) config_.flight->EnterKernel(worker, t->flight_slot, job.subtask);
      try {
        status = kernel->fn(ctx);
      } catch (const std::exception& e) {
        status = absl::InternalError(absl::StrCat("threw ", e.what()));
      } catch (...) {
        status = absl::InternalError("threw an exception that is not a std::exception");
      }
      if (config_.flight != nullptr) config_.flight->LeaveKernel(worker);
      if (!status.ok()) {
        status = absl::Status(status.code(),
                              absl::StrCat("task ", TaskIdHex(t->id), " kernel '",
                                           kernel->name, "': ", status.message()));
      }
    }
    // Completion is handed over under mu_: the scheduler that takes it sees
    // every write the kernel made.
    SchedulerThread* lent = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!status.ok() && run_status_.ok()) run_status_ = status;
      if (!status.ok() && t->failure.ok() && !t->cancel.load(std::memory_order_acquire)) {
        t->failure = status;
        t->failed_func = t->func_ids[job.subtask];
      }
      if (--t->subtasks_left == 0) {
        t->completed_mono_ns = MonotonicNs(Clock::now());
        const uint32_t s = t->scheduler;
        // Its scheduler sleeps: do its part here rather than wake it. A
        // failed or cancelled task, or a stopping run, goes to the
        // scheduler thread (exception dumps, snapshots and hang reports
        // are its own).
        if (duty_[s] == Duty::kAsleep && t->failure.ok() &&
            !t->cancel.load(std::memory_order_acquire) && !stop_ && !hang_ && !failed_) {
          duty_[s] = Duty::kLent;
          waiting_with_room_[s] = 0;
          lent = scheduler_state_[s].get();
        } else {
          completions_[s].push_back(t);
          completions_queued_[s].store(1, std::memory_order_relaxed);
          // A lent scheduler is woken, if need be, as its duty comes back.
          if (duty_[s] != Duty::kLent) scheduler_cv_[s]->notify_one();
        }
      }
    }
    if (lent != nullptr) kept = CompleteAsScheduler(*lent, t);
  }
}

void SimRuntime::Abort(absl::Status why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (run_status_.ok()) run_status_ = std::move(why);
  failed_ = true;
  for (auto& cv : scheduler_cv_) cv->notify_all();
  sync_cv_.notify_all();
}

absl::Status SimRuntime::Synchronize() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!started_) return absl::FailedPreconditionError("sim runtime: not started");
  }
  {
    std::unique_lock<std::mutex> lock(mu_);
    absl::Status timeout = WaitSettled(lock);
    if (!timeout.ok()) {
      Error(absl::StrCat(timeout.message(), "; the host stops waiting, running ops are reaped"));
    }
    if (run_status_.ok()) run_status_ = std::move(timeout);
    stop_ = true;
    for (auto& cv : scheduler_cv_) cv->notify_all();
  }
  for (auto& t : schedulers_) t.join();
  schedulers_.clear();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& t : tasks_) t->cancel.store(true, std::memory_order_release);
  }
  {
    std::lock_guard<std::mutex> lock(jobs_mu_);
    jobs_stop_ = true;
  }
  jobs_cv_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
  std::lock_guard<std::mutex> lock(mu_);
  return run_status_;
}

uint64_t SimRuntime::tasks_submitted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tasks_.size();
}

uint64_t SimRuntime::tasks_completed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_;
}

uint64_t SimRuntime::dump_skipped_tasks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dump_skipped_;
}

std::vector<std::string> SimRuntime::warnings() const {
  std::lock_guard<std::mutex> lock(mu_);
  return warnings_;
}

}  // inline namespace ARGSDUMP_SIM_NAMESPACE
}  // namespace argsdump
