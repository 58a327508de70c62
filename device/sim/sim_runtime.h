// SimRuntime: a simulated device. Orchestration code allocates tensors and
// submits tasks (up to three kernels over one CoreTaskArgs); N scheduler
// ("AICPU") threads dispatch ready tasks to M worker ("AICore") threads and
// call the recorder before dispatch and after completion.
//
// Ordering: a task waits for the last writer of every buffer it reads, and
// for the last writer and the readers of every buffer it writes. A worker
// hands its completion to the scheduler under the runtime mutex, so the
// after-completion snapshot sees all of the kernel's writes (the sim's
// barrier before FIN); dependents are released only after that snapshot.
//
// Hand-offs: when the task's scheduler sleeps, the worker that finished it
// does the scheduler's part itself, in the scheduler's name (its recorder,
// its flight slots): the after-completion record, the release of
// dependents, the dispatch of ready tasks with their before-dispatch
// records; and it runs the first of those tasks itself. A chain of tasks
// then runs on one worker without a thread waking another per task. The
// scheduler thread stays asleep meanwhile and keeps the hang watch; a task
// that failed or was cancelled, and any once the run stops, still go to it
// (exception dumps, in-flight snapshots and hang reports are its own).
//
// Hangs: a scheduler with tasks in flight and no progress for the scheduler
// timeout declares a hang; every scheduler then records the partial outputs
// of its running tasks (after_completion, kFlagInFlightSnapshot), flushes its
// recorder, and running ops are reaped; Synchronize() returns
// DeadlineExceeded. Ops running past the op-execute timeout are reaped, and
// Synchronize() gives up after the stream-sync timeout.
#ifndef ARGSDUMP_DEVICE_SIM_SIM_RUNTIME_H_
#define ARGSDUMP_DEVICE_SIM_SIM_RUNTIME_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "device/dump_config.h"
#include "device/recorder.h"
#include "device/sim/core_task_args.h"
#include "device/sim/device_memory.h"
#include "device/sim/flight.h"
#include "device/sim/kernel.h"
#include "device/sim/tensor.h"
#include "device/sim/timeouts.h"

// Built with ARGSDUMP_DUMP_COMPILED_OUT, the runtime has no dump code at all
// (the reference for "level 0 costs nothing"); its symbols live in another
// inline namespace so both builds can be linked into one benchmark.
#ifdef ARGSDUMP_DUMP_COMPILED_OUT
#define ARGSDUMP_SIM_NAMESPACE sim_without_dump
#else
#define ARGSDUMP_SIM_NAMESPACE sim_with_dump
#endif

namespace argsdump {
inline namespace ARGSDUMP_SIM_NAMESPACE {

// What the exception dump gets for a task whose kernel failed (returned an
// error or threw): the task as the dump sees it (every tensor view and
// scalar, as they are after the failure) and its context.
struct FailedTask {
  uint64_t task_id = 0;
  uint32_t step = 0;
  uint32_t thread = 0;  // the scheduler thread that dispatched it
  std::vector<uint16_t> func_ids;
  std::string func;     // the failing kernel's name
  std::string type;     // and type
  std::string error;    // the kernel's message
  const DumpTask* task = nullptr;  // tensors (views) and scalars
  // Its input and inout tensors as they were at dispatch (null or empty
  // unless DumpConfig::snapshot_inputs is on).
  const std::vector<DispatchedInput>* inputs = nullptr;
};

// From `first_step` on (until the next entry), the dump ran at `level`
// (0: off) with the overflow check on or off, a stats mode and a mode.
struct StepLevel {
  uint32_t first_step = 0;
  uint32_t level = 0;
  bool overflow = false;
  StatsMode stats = StatsMode::kOff;
  DumpMode mode = DumpMode::kAll;
  // The same dump from here on (first_step aside).
  bool SameDump(const StepLevel& o) const {
    return level == o.level && overflow == o.overflow && stats == o.stats && mode == o.mode;
  }
};

struct SimConfig {
  uint32_t scheduler_threads = 4;
  uint32_t worker_threads = 4;
  // Tasks one scheduler keeps dispatched at once.
  uint32_t max_inflight_per_scheduler = 4;
  // High 32 bits of every task id of this run.
  uint32_t run_id = 1;
  // Unset: read from the environment (see timeouts.h).
  std::optional<SimTimeouts> timeouts;
  // What the dump covers from the first step on (until SetDumpConfig
  // changes it): level, mode (which stages), kernels (funcs / block_funcs
  // by name or type) and steps. Unset: everything, at the recorder's level.
  std::optional<DumpConfig> dump;
  // Set: called (on a scheduler thread) for a task whose kernel failed,
  // before the run stops; a failed kernel stops the run: nothing more is
  // dispatched, running tasks are snapshotted as at a hang, and
  // Synchronize() returns the kernel's error.
  std::function<void(const FailedTask&)> exception_dump;
  // The device in its own process (not owned; both or neither): tensors
  // live in this shared device memory, and every dispatched task and
  // running kernel is kept in the flight table for a host that outlives a
  // crash. max_inflight_per_scheduler slots per scheduler thread, one
  // worker entry per worker thread.
  DeviceMemory* memory = nullptr;
  FlightTable* flight = nullptr;
};

class SimRuntime {
 public:
  // `recorder` null means dump level 0: no dump code runs at all. Otherwise
  // it needs at least one recorder thread per scheduler thread.
  SimRuntime(SimConfig config, const KernelRegistry& kernels, DumpRecorder* recorder);
  ~SimRuntime();
  SimRuntime(const SimRuntime&) = delete;
  SimRuntime& operator=(const SimRuntime&) = delete;

  // Device memory, zero-filled, as a compact tensor of `shape`.
  absl::StatusOr<Tensor> Alloc(DataType dtype, const std::vector<uint32_t>& shape);

  // Starts scheduler and worker threads. Tasks may be submitted before or after.
  absl::Status Start();

  // Steps (iterations of a workload) and the dynamic switch. Tasks
  // submitted after BeginStep(n) belong to step n and carry it in their
  // records. A configuration given to SetDumpConfig takes effect at the
  // next BeginStep - never in the middle of a step: the tasks of the step
  // in flight keep the configuration they were submitted under. Level 0
  // switches the dump off, a level > 0 on again (only if the runtime was
  // built with a recorder; otherwise a WARNING says it cannot be). Changes
  // are logged as INFO "dump switched on/off/reconfigured at step n".
  void BeginStep(uint32_t step);
  void SetDumpConfig(const DumpConfig& config);
  uint32_t step() const;
  // While held, ready tasks wait instead of being dispatched: submitting a
  // whole step before any of it runs keeps the dispatch order the same as
  // submitting before Start().
  void HoldDispatch();
  void ReleaseDispatch();
  // Waits until every task submitted so far has completed (or the run hung
  // or failed): the end of a step. Returns the run status so far.
  absl::Status WaitIdle();
  // The overflow check (DumpConfig::overflow): tasks whose output held a
  // NaN or an Inf, and the first of them in task order.
  uint64_t overflow_tasks() const;
  std::optional<uint64_t> first_overflow_task() const;
  // The INFO lines of dump state changes (also printed to stderr).
  std::vector<std::string> dump_log() const;
  // The level the dump ran at, from the first step on: one entry, and one
  // more per step where it changed (the dynamic switch).
  std::vector<StepLevel> step_levels() const;

  // Queues a task; returns its id. InvalidArgument for an unknown func_id,
  // 0 or more than 3 func_ids, or args whose add_*/dump(...) failed.
  absl::StatusOr<uint64_t> Submit(const std::vector<uint16_t>& func_ids,
                                  CoreTaskArgs args);

  // Stops the run from outside (the host process is gone): nothing more is
  // dispatched, running tasks are snapshotted and cancelled as at a hang,
  // and WaitIdle / Synchronize return `why`. Any thread.
  void Abort(absl::Status why);

  // Waits for every submitted task (bounded by the stream-sync timeout),
  // flushes the recorders, and stops all threads. Returns the hang or the
  // first kernel error. Call once.
  absl::Status Synchronize();

  const SimTimeouts& timeouts() const { return timeouts_; }
  uint64_t tasks_submitted() const;
  uint64_t tasks_completed() const;
  // Tasks whose signature and payload disagreed: executed, not dumped.
  uint64_t dump_skipped_tasks() const;
  // Steps of dependency tracking so far (slots, readers walked or pruned):
  // Submit is O(1) amortised, so this stays within a small multiple of the
  // slots submitted whatever the pattern (tests and benchmarks).
  uint64_t dependency_work() const;
  std::vector<std::string> warnings() const;

  // Layout-mismatch warnings printed by this process (at most one).
  static uint64_t LayoutWarningsPrinted();

 private:
  struct Task;
  struct Job {
    Task* task;
    uint32_t subtask;
  };
  struct BufferState {
    static constexpr size_t kFirstPrune = 16;
    Task* last_writer = nullptr;
    std::vector<Task*> readers;  // since the last write (completed ones pruned lazily)
    size_t prune_at = kFirstPrune;  // prune the readers when the list reaches this
  };

  void BuildDumpTask(Task* task);
  // What the dump of a step is: its config and, per func_id, whether the
  // kernel lists select it. mu_ held.
  struct StepDump {
    DumpConfig config;
    bool on = false;
    std::vector<uint8_t> func_state;  // kFuncNeutral / kFuncAllowed / kFuncBlocked
    std::vector<std::string> warnings;  // kernel names that are no kernel's
  };
  StepDump MakeStepDump(const DumpConfig& config) const;
  // What step_dump_ does, from `step` on.
  StepLevel StepLevelOf(uint32_t step) const;
  bool TaskSelected(const StepDump& d, const std::vector<uint16_t>& func_ids, uint32_t step) const;
  void Info(std::string message);  // mu_ not held
  // The verbose log level's line for a dumped task (printed, not kept in
  // dump_log: a run may dump millions of tasks). Scheduler thread.
  void LogDumpedTask(Task* t, uint32_t thread);
  // The overflow check of a completed task (scheduler thread, mu_ not held).
  bool Overflowed(Task* t);
  // A task whose kernel failed: the exception dump, then the run stops.
  bool Failed(Task* t, uint32_t thread);
  // Waits (mu_ held through `lock`) until every task completed, the run
  // hung or a kernel failed; DeadlineExceeded after the stream-sync timeout.
  absl::Status WaitSettled(std::unique_lock<std::mutex>& lock);
  // Submit's refusals: invalid args, a func_id count out of range or not a
  // kernel's, a tensor of another device.
  absl::Status CheckSubmit(const std::vector<uint16_t>& func_ids,
                           const CoreTaskArgs& args) const;
  // A new task's id, step and what the step's dump asks of it. mu_ held.
  void StampTask(Task* t);
  // A submitted task's dependencies through its slots' buffers (the last
  // writer, the readers since), and the buffers' new writer and readers.
  // mu_ held.
  void LinkBuffers(Task* t);
  void AddDependency(Task* task, Task* on);  // mu_ held
  // Queues a ready task and wakes a scheduler sleeping with room for it,
  // unless dispatch is held or `unclaimed` (the room of the scheduler
  // releasing it, which looks at ready_ before it sleeps) is above 0: then
  // that one takes it, and *unclaimed goes down by one. mu_ held.
  void MakeReady(Task* task, uint32_t* unclaimed = nullptr);
  // What one scheduler keeps for itself (its in-flight tasks, its
  // recorder); touched only by whoever holds its duty (see Duty).
  struct SchedulerThread;
  // Who does a scheduler's work. kAwake: its thread. kAsleep: nobody; its
  // thread sleeps in WaitForWork, and the worker that completes one of its
  // tasks may take the duty (kLent) until it has recorded, retired and
  // dispatched, then gives it back (kAsleep). Under mu_.
  enum class Duty : uint8_t { kAwake, kAsleep, kLent };
  // A scheduler thread's loop: waits for work, records and retires the
  // tasks its workers completed, dispatches ready ones, reaps ops past
  // their budget; when it stops, snapshots what is still running.
  void SchedulerLoop(uint32_t index);
  // Waits for completions, ready tasks (room permitting) or a deadline, and
  // takes them. False when the scheduler stops: the run stopped, hung (this
  // thread may be the one that declares it) or a kernel failed.
  bool WaitForWork(SchedulerThread& scheduler, std::vector<Task*>* done,
                   std::vector<Task*>* dispatch);
  void DeclareHang(SchedulerThread& scheduler);  // mu_ held
  // Records and retires completed tasks; false when one of them failed.
  // `taken`: ready tasks the caller holds for dispatch (room they use).
  bool CompleteTasks(SchedulerThread& scheduler, const std::vector<Task*>& done, size_t taken);
  // Moves ready tasks into `dispatch` while the scheduler has room. mu_ held.
  void TakeReady(const SchedulerThread& scheduler, std::vector<Task*>* dispatch);
  // Records and queues the tasks' jobs; with `keep`, the first job goes
  // there instead (the calling worker runs it) and wakes nobody.
  void DispatchTasks(SchedulerThread& scheduler, const std::vector<Task*>& dispatch,
                     std::optional<Job>* keep = nullptr);
  // A worker holding `scheduler`'s duty (kLent) for the task it completed:
  // records and retires it, dispatches what became ready, gives the duty
  // back; the job it kept for itself, if any.
  std::optional<Job> CompleteAsScheduler(SchedulerThread& scheduler, Task* task);
  void ReapOverdueOps(SchedulerThread& scheduler);
  void StopScheduler(SchedulerThread& scheduler);
  void WorkerLoop(uint32_t worker);
  // The flight table's copy of a dispatched task (config_.flight set).
  void PublishFlight(SchedulerThread& scheduler, Task* task);
  // Copies the task's inputs before dispatch (Task::snapshot_inputs).
  void SnapshotTaskInputs(Task* task);
  // Marks the task completed and releases its dependents (MakeReady with
  // `unclaimed`); frees what it no longer needs.
  void Retire(Task* task, uint32_t* unclaimed);
  void Warn(std::string message);
  void Error(std::string message);  // printed to stderr
  // The dump path is taken: compiled in and a recorder given (level > 0).
  bool dump_on() const;
  void NotifySchedulers();

  const SimConfig config_;
  const KernelRegistry& kernels_;
  DumpRecorder* const recorder_;
  SimTimeouts timeouts_;

  mutable std::mutex mu_;  // everything below up to jobs_mu_
  std::vector<std::unique_ptr<Task>> tasks_;
  // Node-based: Submit keeps pointers to a task's states while it inserts
  // the others (an unordered_map never moves its elements).
  std::unordered_map<uint64_t, BufferState> buffers_;
  std::deque<Task*> ready_;
  std::vector<std::vector<Task*>> completions_;  // per scheduler
  std::vector<std::unique_ptr<std::condition_variable>> scheduler_cv_;
  std::vector<std::unique_ptr<SchedulerThread>> scheduler_state_;  // per scheduler
  std::vector<Duty> duty_;  // per scheduler
  // Per scheduler, 1 when its thread woke while its duty was lent: the
  // worker giving it back wakes it.
  std::vector<uint8_t> wants_duty_back_;
  // Per scheduler, 1 while it sleeps in WaitForWork with room for another
  // task. MakeReady wakes one such scheduler, not every scheduler, and
  // clears its mark so that the next ready task wakes another (a scheduler
  // not sleeping looks at ready_ before it sleeps).
  std::vector<uint8_t> waiting_with_room_;
  // Per scheduler, 1 while completions_ holds some (a hint its spin reads
  // without mu_; set and cleared under mu_).
  std::unique_ptr<std::atomic<uint32_t>[]> completions_queued_;
  std::condition_variable sync_cv_;
  uint64_t next_buffer_id_ = 1;
  uint64_t completed_ = 0;
  uint64_t dump_skipped_ = 0;
  uint64_t dependency_work_ = 0;
  bool started_ = false;
  bool stop_ = false;
  bool hang_ = false;
  absl::Status run_status_;
  std::vector<std::string> warnings_;
  uint32_t step_ = 0;
  bool held_ = false;
  bool failed_ = false;  // a kernel failed: the run stops
  uint64_t overflow_tasks_ = 0;
  std::optional<uint64_t> first_overflow_;
  StepDump step_dump_;
  std::optional<DumpConfig> pending_dump_;
  std::vector<std::string> dump_log_;
  std::vector<StepLevel> step_levels_;

  std::mutex jobs_mu_;
  std::condition_variable jobs_cv_;
  std::deque<Job> jobs_;
  // jobs_.size(), readable without jobs_mu_ (a worker's spin before it
  // sleeps; a hint only: the queue itself is read under the mutex).
  std::atomic<size_t> jobs_queued_{0};
  bool jobs_stop_ = false;

  std::vector<std::thread> schedulers_;
  std::vector<std::thread> workers_;
};

}  // inline namespace ARGSDUMP_SIM_NAMESPACE
}  // namespace argsdump

#endif  // ARGSDUMP_DEVICE_SIM_SIM_RUNTIME_H_
