#include "device/sim/sim_runtime.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "device/region.h"
#include "device/sim/kernels.h"
#include "device/testing/test_host.h"
#include "gtest/gtest.h"

namespace argsdump {
namespace {

SimConfig Config() {
  SimConfig c;
  c.scheduler_threads = 4;
  c.worker_threads = 3;
  c.timeouts = SimTimeouts();
  return c;
}

uint16_t Id(const char* name) { return *BuiltinKernels().IdOf(name); }

void Fill(const Tensor& t, float v) {
  for (uint64_t i = 0; i < t.numel(); ++i) t.Set<float>(i, v);
}

std::vector<float> Floats(const std::vector<uint8_t>& bytes) {
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

DumpRegionConfig CaptureConfig(abi::DumpLevel level) {
  DumpRegionConfig rc;
  rc.level = level;
  rc.num_threads = 4;
  rc.records_per_buffer = 16;
  rc.arena_bytes = 1 << 20;
  return rc;
}

TEST(SimRuntimeTest, DependenciesSerialiseWritersAndReaders) {
  SimRuntime rt(Config(), BuiltinKernels(), nullptr);  // level 0
  Tensor acc = *rt.Alloc(DataType::kFloat32, {64});
  Tensor one = *rt.Alloc(DataType::kFloat32, {64});
  Tensor snapshot = *rt.Alloc(DataType::kFloat32, {64});
  Fill(one, 1.0f);
  ASSERT_TRUE(rt.Start().ok());
  for (int i = 0; i < 200; ++i) {
    CoreTaskArgs args;
    ASSERT_TRUE(args.add_inout(acc).ok());
    ASSERT_TRUE(args.add_input(one).ok());
    ASSERT_TRUE(rt.Submit({Id("accumulate")}, std::move(args)).ok());
    if (i == 99) {  // a reader of acc, then more writers: it must see 100
      CoreTaskArgs copy;
      ASSERT_TRUE(copy.add_input(acc).ok());
      ASSERT_TRUE(copy.add_output(snapshot).ok());
      ASSERT_TRUE(rt.Submit({Id("copy")}, std::move(copy)).ok());
    }
  }
  ASSERT_TRUE(rt.Synchronize().ok());
  EXPECT_EQ(rt.tasks_completed(), 201u);
  for (uint64_t i = 0; i < 64; ++i) {
    EXPECT_EQ(acc.Get<float>(i), 200.0f);
    EXPECT_EQ(snapshot.Get<float>(i), 100.0f);
  }
}

// A step of 10^6 tasks must finish: reader lists that grow per task made
// it quadratic. Dependency tracking is O(1) amortised per slot -
// counted, not timed - for fan-outs (every task reads one buffer), a
// writer after a long run of readers, and a whole step queued before any
// of it runs; and the results are still right.
TEST(SimRuntimeTest, DependencyTrackingIsLinearInTheTasks) {
  constexpr int kTasks = 100000;
  SimRuntime rt(Config(), BuiltinKernels(), nullptr);
  Tensor shared = *rt.Alloc(DataType::kFloat32, {4});
  Fill(shared, 1.0f);
  std::vector<Tensor> ring;
  for (int i = 0; i < 16; ++i) ring.push_back(*rt.Alloc(DataType::kFloat32, {4}));
  Tensor sum = *rt.Alloc(DataType::kFloat32, {4});
  ASSERT_TRUE(rt.Start().ok());
  rt.HoldDispatch();
  uint64_t slots = 0;
  for (int i = 0; i < kTasks; ++i) {
    CoreTaskArgs args;
    if (i % 10000 == 9999) {
      // Now and then a writer of the shared buffer: it waits for every
      // reader since the last write, once.
      (void)args.add_input(shared);
      (void)args.add_output(shared);
      ASSERT_TRUE(rt.Submit({Id("copy")}, std::move(args)).ok());
      slots += 2;
      continue;
    }
    const int stream = i % 8;
    const bool forward = (i / 8) % 2 == 0;
    (void)args.add_input(shared);
    (void)args.add_input(ring[2 * stream + (forward ? 0 : 1)]);
    (void)args.add_output(ring[2 * stream + (forward ? 1 : 0)]);
    ASSERT_TRUE(rt.Submit({Id("add")}, std::move(args)).ok());
    slots += 3;
  }
  // The same buffer twice in one task is one dependency.
  CoreTaskArgs twice;
  (void)twice.add_input(shared);
  (void)twice.add_input(shared);
  (void)twice.add_output(sum);
  ASSERT_TRUE(rt.Submit({Id("add")}, std::move(twice)).ok());
  slots += 3;
  rt.ReleaseDispatch();
  ASSERT_TRUE(rt.Synchronize().ok());
  EXPECT_EQ(rt.tasks_completed(), static_cast<uint64_t>(kTasks) + 1);
  // Quadratic tracking would be ~10^9 here.
  EXPECT_LE(rt.dependency_work(), 6 * slots) << rt.dependency_work() << " for " << slots;
  for (uint64_t i = 0; i < sum.numel(); ++i) EXPECT_EQ(sum.Get<float>(i), 2.0f);
}

TEST(SimRuntimeTest, MixTaskRunsEachSubtaskAndDumpsEachSlotOnce) {
  RecordingHarness cap(CaptureConfig(abi::DumpLevel::kFull));
  SimRuntime rt(Config(), BuiltinKernels(), cap.recorder.get());
  Tensor a = *rt.Alloc(DataType::kFloat32, {8});
  Tensor b = *rt.Alloc(DataType::kFloat32, {8});
  Tensor s = *rt.Alloc(DataType::kFloat32, {8});
  Tensor p = *rt.Alloc(DataType::kFloat32, {8});
  Tensor m = *rt.Alloc(DataType::kFloat32, {8});
  Fill(a, 2.0f);
  Fill(b, 3.0f);
  CoreTaskArgs args;
  for (const Tensor* t : {&a, &b}) ASSERT_TRUE(args.add_input(*t).ok());
  for (const Tensor* t : {&s, &p, &m}) ASSERT_TRUE(args.add_output(*t).ok());
  ASSERT_TRUE(rt.Start().ok());
  // Listed out of order: the record's func_id array comes out sorted.
  auto id = rt.Submit({Id("mix_max"), Id("mix_sum"), Id("mix_prod")}, std::move(args));
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_TRUE(rt.Synchronize().ok());
  EXPECT_EQ(s.Get<float>(7), 5.0f);
  EXPECT_EQ(p.Get<float>(7), 6.0f);
  EXPECT_EQ(m.Get<float>(7), 3.0f);
  ASSERT_TRUE(cap.host->Stop().ok());
  std::vector<CapturedArg> got = cap.host->TakeRecords();
  ASSERT_EQ(got.size(), 5u);
  std::map<uint32_t, std::vector<float>> by_slot;
  for (const CapturedArg& c : got) {
    EXPECT_EQ(c.record.task_id, *id);
    ASSERT_EQ(c.record.func_count, 3);
    std::vector<uint16_t> f(c.record.func_ids, c.record.func_ids + 3);
    std::vector<uint16_t> expected = {Id("mix_sum"), Id("mix_prod"), Id("mix_max")};
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(f, expected);
    EXPECT_TRUE(by_slot.emplace(c.record.arg_index, Floats(c.payload)).second);
  }
  EXPECT_EQ(by_slot[2], std::vector<float>(8, 5.0f));
  EXPECT_EQ(by_slot[3], std::vector<float>(8, 6.0f));
  EXPECT_EQ(by_slot[4], std::vector<float>(8, 3.0f));
}

// Every record of a run carries its task's dispatch time; after_completion
// records also its completion, at or after the dispatch; the records of one
// task agree on the dispatch; tasks that depend on each other are in order.
TEST(SimRuntimeTest, RecordsCarryDispatchAndCompletionTimes) {
  RecordingHarness cap(CaptureConfig(abi::DumpLevel::kFull));
  SimRuntime rt(Config(), BuiltinKernels(), cap.recorder.get());
  Tensor a = *rt.Alloc(DataType::kFloat32, {8});
  Tensor s = *rt.Alloc(DataType::kFloat32, {8});
  Fill(a, 2.0f);
  ASSERT_TRUE(rt.Start().ok());
  std::vector<uint64_t> ids;
  for (int i = 0; i < 4; ++i) {
    CoreTaskArgs args;
    ASSERT_TRUE(args.add_input(a).ok());
    ASSERT_TRUE(args.add_input(a).ok());
    ASSERT_TRUE(args.add_output(s).ok());
    auto id = rt.Submit({Id("mix_sum")}, std::move(args));
    ASSERT_TRUE(id.ok()) << id.status();
    ids.push_back(*id);
  }
  ASSERT_TRUE(rt.Synchronize().ok());
  ASSERT_TRUE(cap.host->Stop().ok());
  std::map<uint64_t, uint64_t> dispatch, complete;
  for (const CapturedArg& c : cap.host->TakeRecords()) {
    ASSERT_NE(c.record.time_flags & abi::kTimeDispatch, 0);
    const uint64_t d = abi::DispatchNs(c.record);
    auto it = dispatch.emplace(c.record.task_id, d).first;
    EXPECT_EQ(it->second, d) << "records of one task disagree";
    const bool after = c.record.stage == uint8_t(abi::Stage::kAfterCompletion);
    EXPECT_EQ((c.record.time_flags & abi::kTimeComplete) != 0, after);
    if (after) complete[c.record.task_id] = d + abi::DurationNs(c.record);
  }
  ASSERT_EQ(dispatch.size(), ids.size());
  ASSERT_EQ(complete.size(), ids.size());
  // Each task writes `s`, so each is dispatched after the previous completed.
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_LE(dispatch[ids[i]], complete[ids[i]]);
    if (i > 0) {
      EXPECT_LE(complete[ids[i - 1]], dispatch[ids[i]]);
    }
  }
}

absl::Status CopyFirst(KernelContext& ctx) {
  auto x = ctx.tensor(0);
  auto y = ctx.tensor(1);
  if (!x.ok()) return x.status();
  if (!y.ok()) return y.status();
  for (uint64_t i = 0; i < x->numel(); ++i) y->Set<float>(i, x->Get<float>(i));
  return absl::OkStatus();
}

TEST(SimRuntimeTest, SignatureWalkSkipsMissingSlotsAndMismatchedTasks) {
  KernelRegistry registry;
  ASSERT_TRUE(RegisterBuiltinKernels(&registry).ok());
  using D = ArgDirection;
  const uint16_t wide = *registry.Register("wide", {D::kIn, D::kOut, D::kOut, D::kOut}, CopyFirst);
  const uint16_t narrow = *registry.Register("narrow", {D::kIn}, CopyFirst);
  RecordingHarness cap(CaptureConfig(abi::DumpLevel::kFull));
  SimRuntime rt(Config(), registry, cap.recorder.get());
  Tensor x = *rt.Alloc(DataType::kFloat32, {4});
  Tensor y = *rt.Alloc(DataType::kFloat32, {4});
  Tensor z = *rt.Alloc(DataType::kFloat32, {4});
  Fill(x, 4.0f);
  ASSERT_TRUE(rt.Start().ok());
  // Signature wider than the payload: slots 2 and 3 do not exist, skipped.
  CoreTaskArgs prefix;
  ASSERT_TRUE(prefix.add_input(x).ok());
  ASSERT_TRUE(prefix.add_output(y).ok());
  const uint64_t t1 = *rt.Submit({wide}, std::move(prefix));
  // Payload wider than the signature: slot 1 and 2 are not dumped.
  CoreTaskArgs wider;
  ASSERT_TRUE(wider.add_input(x).ok());
  ASSERT_TRUE(wider.add_output(z).ok());
  ASSERT_TRUE(wider.add_output(y).ok());
  const uint64_t t2 = *rt.Submit({narrow}, std::move(wider));
  // Directions disagree (slot 0 added as output, declared input): not dumped,
  // but executed; a second mismatch prints nothing more.
  for (int i = 0; i < 2; ++i) {
    CoreTaskArgs bad;
    ASSERT_TRUE(bad.add_output(x).ok());
    ASSERT_TRUE(bad.add_output(z).ok());
    ASSERT_TRUE(rt.Submit({Id("copy")}, std::move(bad)).ok());
  }
  ASSERT_TRUE(rt.Synchronize().ok());
  EXPECT_EQ(rt.tasks_completed(), 4u);
  EXPECT_EQ(rt.dump_skipped_tasks(), 2u);
  EXPECT_EQ(SimRuntime::LayoutWarningsPrinted(), 1u);
  ASSERT_TRUE(cap.host->Stop().ok());
  std::vector<std::tuple<uint64_t, uint32_t, uint8_t>> seen;
  for (const CapturedArg& c : cap.host->TakeRecords()) {
    seen.emplace_back(c.record.task_id, c.record.arg_index, c.record.stage);
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<std::tuple<uint64_t, uint32_t, uint8_t>>{
                      {t1, 0, 0}, {t1, 1, 1}, {t2, 0, 0}}));
}

TEST(SimRuntimeTest, KernelErrorsAndBadSubmissionsAreReported) {
  SimRuntime rt(Config(), BuiltinKernels(), nullptr);
  Tensor a = *rt.Alloc(DataType::kFloat32, {4});
  Tensor wrong = *rt.Alloc(DataType::kInt32, {4});
  CoreTaskArgs args;
  ASSERT_TRUE(args.add_input(a).ok());
  EXPECT_EQ(rt.Submit({}, args).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rt.Submit({1, 2, 3, 4}, args).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rt.Submit({9999}, args).status().code(), absl::StatusCode::kInvalidArgument);
  CoreTaskArgs misuse;
  float never = 0;
  ASSERT_FALSE(misuse.dump(never).ok());
  auto refused = rt.Submit({Id("relu")}, std::move(misuse));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("not a scalar lvalue"), std::string::npos);

  CoreTaskArgs relu;
  ASSERT_TRUE(relu.add_input(a).ok());
  ASSERT_TRUE(relu.add_output(wrong).ok());
  const uint64_t id = *rt.Submit({Id("relu")}, std::move(relu));
  ASSERT_TRUE(rt.Start().ok());
  absl::Status s = rt.Synchronize();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("relu"), std::string::npos) << s;
  EXPECT_NE(s.message().find(absl::StrCat(absl::Hex(id, absl::kZeroPad16))), std::string::npos) << s;
}

// The verbose log level: one INFO line per dumped task, naming its kernel,
// task id, step and every arg with the device address of its first
// element; a task the dump does not select has no line.
std::vector<std::string> VerboseLines(bool verbose, uint64_t* add_id, uint64_t* mul_id,
                                      uint64_t* scale_id, std::string* x_at,
                                      std::string* view_at) {
  RecordingHarness cap(CaptureConfig(abi::DumpLevel::kFull));
  SimConfig config = Config();
  DumpConfig dump;
  dump.level = 2;
  dump.verbose = verbose;
  dump.block_funcs = {"mul"};
  config.dump = dump;
  SimRuntime rt(config, BuiltinKernels(), cap.recorder.get());
  Tensor x = *rt.Alloc(DataType::kFloat32, {4});
  Tensor y = *rt.Alloc(DataType::kFloat32, {4});
  Tensor z = *rt.Alloc(DataType::kFloat32, {4});
  Tensor w = *rt.Alloc(DataType::kFloat32, {4});
  Tensor base = *rt.Alloc(DataType::kFloat32, {8});
  Tensor strided = *base.View({3}, {2}, 2);  // elements 2, 4, 6
  Tensor out = *rt.Alloc(DataType::kFloat32, {3});
  *x_at = absl::StrCat("0x", absl::Hex(reinterpret_cast<uintptr_t>(x.view().data)));
  *view_at = absl::StrCat("0x", absl::Hex(reinterpret_cast<uintptr_t>(base.view().data) + 8));
  testing::internal::CaptureStderr();
  EXPECT_TRUE(rt.Start().ok());
  CoreTaskArgs add;
  EXPECT_TRUE(add.add_input(x).ok());
  EXPECT_TRUE(add.add_input(y).ok());
  EXPECT_TRUE(add.add_output(z).ok());
  *add_id = *rt.Submit({Id("add")}, std::move(add));
  CoreTaskArgs mul;
  EXPECT_TRUE(mul.add_input(x).ok());
  EXPECT_TRUE(mul.add_input(y).ok());
  EXPECT_TRUE(mul.add_output(w).ok());
  *mul_id = *rt.Submit({Id("mul")}, std::move(mul));
  CoreTaskArgs scale;
  const float factor = 0.5f;
  EXPECT_TRUE(scale.add_input(strided).ok());
  EXPECT_TRUE(scale.add_output(out).ok());
  EXPECT_TRUE(scale.add_scalar(factor).ok());
  *scale_id = *rt.Submit({Id("scale")}, std::move(scale));
  EXPECT_TRUE(rt.Synchronize().ok());
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(cap.host->Stop().ok());
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(err, '\n')) {
    if (absl::StrContains(line, "INFO: dump task ")) lines.emplace_back(line);
  }
  std::sort(lines.begin(), lines.end());  // task ids in order
  return lines;
}

TEST(SimRuntimeTest, VerboseLogsALinePerDumpedTask) {
  uint64_t add = 0, mul = 0, scale = 0;
  std::string x_at, view_at;
  const std::vector<std::string> lines = VerboseLines(true, &add, &mul, &scale, &x_at, &view_at);
  ASSERT_EQ(lines.size(), 2u) << absl::StrJoin(lines, "\n");
  EXPECT_TRUE(absl::StartsWith(
      lines[0], absl::StrCat("[argsdump dumper] INFO: dump task 0x",
                             absl::Hex(add, absl::kZeroPad16), " step 0 scheduler thread ")))
      << lines[0];
  EXPECT_TRUE(absl::StrContains(
      lines[0], absl::StrCat(": add (elementwise); arg 0 input FLOAT32 [4] at ", x_at,
                             "; arg 1 input FLOAT32 [4] at 0x")))
      << lines[0];
  EXPECT_TRUE(absl::StrContains(lines[0], "; arg 2 output FLOAT32 [4] at 0x")) << lines[0];
  EXPECT_TRUE(absl::StrContains(
      lines[1], absl::StrCat("dump task 0x", absl::Hex(scale, absl::kZeroPad16))))
      << lines[1];
  EXPECT_TRUE(absl::StrContains(
      lines[1], absl::StrCat(": scale (elementwise); arg 0 input FLOAT32 [3] at ", view_at,
                             " (start offset 2); arg 1 output FLOAT32 [3] at 0x")))
      << lines[1];
  EXPECT_TRUE(absl::StrContains(lines[1], "; arg 2 scalar FLOAT32 0x3f000000")) << lines[1];
  for (const std::string& line : lines) {
    EXPECT_FALSE(absl::StrContains(line, absl::StrCat(absl::Hex(mul, absl::kZeroPad16))))
        << "the blocked kernel's task has no line: " << line;
  }
}

TEST(SimRuntimeTest, NoTaskLinesWithoutVerbose) {
  uint64_t add = 0, mul = 0, scale = 0;
  std::string x_at, view_at;
  EXPECT_TRUE(VerboseLines(false, &add, &mul, &scale, &x_at, &view_at).empty());
}

// Streams of dependent tasks on more workers than schedulers, tasks taking
// different times so that they finish in every order, one step held and
// the next submitted while it runs, and a task reading every stream at the
// end of each step (a fan-in, then a fan-out as the next step's writers
// wait for it). Whichever thread records, releases and dispatches a
// completed task (its scheduler, or the worker that completed it while the
// scheduler slept), each stream runs in submission order and sees its
// previous task's write, the join sees every stream's last write, and every
// task has its before-dispatch and after-completion records on one
// scheduler's recorder, the next task of its stream dispatched after it
// completed.
constexpr int kStreams = 15;  // and the join's output: 16 tensor slots

struct StreamLog {
  std::mutex mu;
  std::vector<std::vector<std::pair<int32_t, float>>> seen;  // per stream: (seq, value before)
  std::vector<float> joined;  // per join: the sum it read
};
StreamLog* g_stream_log = nullptr;

// Runs for a while that depends on the task and subtask (yields, not
// sleeps: only the order of finishing varies).
void Dawdle(int32_t stream, int32_t seq, uint32_t subtask) {
  const uint32_t n = (static_cast<uint32_t>(stream) * 7919u + static_cast<uint32_t>(seq) * 104729u +
                      subtask * 31u) % 13u;
  for (uint32_t i = 0; i < n * n; ++i) std::this_thread::yield();
}

absl::Status StreamStep(KernelContext& ctx) {
  auto acc = ctx.tensor(0);
  auto stream = ctx.scalar<int32_t>(0);
  auto seq = ctx.scalar<int32_t>(1);
  if (!acc.ok() || !stream.ok() || !seq.ok()) return absl::InternalError("bad stream task");
  Dawdle(*stream, *seq, ctx.subtask());
  const float before = acc->Get<float>(0);
  acc->Set<float>(0, before + 1.0f);
  std::lock_guard<std::mutex> lock(g_stream_log->mu);
  g_stream_log->seen[*stream].emplace_back(*seq, before);
  return absl::OkStatus();
}

// The second and third kernel of a stream's three-kernel tasks: reads only.
absl::Status StreamIdle(KernelContext& ctx) {
  auto stream = ctx.scalar<int32_t>(0);
  auto seq = ctx.scalar<int32_t>(1);
  if (!stream.ok() || !seq.ok()) return absl::InternalError("bad stream task");
  Dawdle(*stream, *seq, ctx.subtask());
  return absl::OkStatus();
}

absl::Status JoinStreams(KernelContext& ctx) {
  float sum = 0;
  for (uint32_t i = 0; i < kStreams; ++i) sum += ctx.tensor(i)->Get<float>(0);
  ctx.tensor(kStreams)->Set<float>(0, sum);
  std::lock_guard<std::mutex> lock(g_stream_log->mu);
  g_stream_log->joined.push_back(sum);
  return absl::OkStatus();
}

TEST(SimRuntimeTest, StreamsKeepTheirOrderWhicheverThreadHandsTasksOn) {
  constexpr int kSteps = 4;
  constexpr int kPerStep = 12;  // tasks per stream and step
  StreamLog log;
  log.seen.resize(kStreams);
  g_stream_log = &log;
  KernelRegistry registry;
  using D = ArgDirection;
  const std::vector<D> stream_sig = {D::kInOut, D::kScalar, D::kScalar};
  const uint16_t step_k = *registry.Register("stream_step", stream_sig, StreamStep);
  const uint16_t idle_a = *registry.Register("stream_idle_a", stream_sig, StreamIdle);
  const uint16_t idle_b = *registry.Register("stream_idle_b", stream_sig, StreamIdle);
  std::vector<D> join_sig(kStreams, D::kIn);
  join_sig.push_back(D::kOut);
  const uint16_t join_k = *registry.Register("join_streams", join_sig, JoinStreams);

  DumpRegionConfig rc = CaptureConfig(abi::DumpLevel::kFull);
  rc.full_policy = abi::FullPolicy::kStall;  // every record kept
  RecordingHarness cap(rc);
  SimConfig config = Config();
  config.worker_threads = 6;
  config.max_inflight_per_scheduler = 2;
  SimRuntime rt(config, registry, cap.recorder.get());
  std::vector<Tensor> acc;
  for (int s = 0; s < kStreams; ++s) acc.push_back(*rt.Alloc(DataType::kFloat32, {4}));
  Tensor sum = *rt.Alloc(DataType::kFloat32, {1});
  ASSERT_TRUE(rt.Start().ok());
  struct Submitted {
    int stream;  // -1: a join
    int seq;
  };
  std::map<uint64_t, Submitted> tasks;
  for (int step = 0; step < kSteps; ++step) {
    rt.BeginStep(step);
    if (step % 2 == 0) rt.HoldDispatch();
    for (int k = 0; k < kPerStep; ++k) {
      for (int s = 0; s < kStreams; ++s) {
        const int32_t stream = s;
        const int32_t seq = step * kPerStep + k;
        CoreTaskArgs args;
        ASSERT_TRUE(args.add_inout(acc[s]).ok());
        ASSERT_TRUE(args.add_scalar(stream).ok());
        ASSERT_TRUE(args.add_scalar(seq).ok());
        std::vector<uint16_t> funcs = {step_k};
        if ((s + k) % 3 == 0) funcs = {step_k, idle_a, idle_b};
        auto id = rt.Submit(funcs, std::move(args));
        ASSERT_TRUE(id.ok()) << id.status();
        tasks[*id] = {s, seq};
      }
    }
    CoreTaskArgs join;
    for (int s = 0; s < kStreams; ++s) ASSERT_TRUE(join.add_input(acc[s]).ok());
    ASSERT_TRUE(join.add_output(sum).ok());
    auto id = rt.Submit({join_k}, std::move(join));
    ASSERT_TRUE(id.ok()) << id.status();
    tasks[*id] = {-1, (step + 1) * kPerStep};
    if (step % 2 == 0) rt.ReleaseDispatch();
  }
  ASSERT_TRUE(rt.Synchronize().ok());
  g_stream_log = nullptr;
  EXPECT_EQ(rt.tasks_completed(), tasks.size());

  for (int s = 0; s < kStreams; ++s) {
    ASSERT_EQ(log.seen[s].size(), static_cast<size_t>(kSteps * kPerStep)) << "stream " << s;
    for (int i = 0; i < kSteps * kPerStep; ++i) {
      EXPECT_EQ(log.seen[s][i].first, i) << "stream " << s << " ran out of order";
      EXPECT_EQ(log.seen[s][i].second, static_cast<float>(i)) << "stream " << s;
    }
  }
  ASSERT_EQ(log.joined.size(), static_cast<size_t>(kSteps));
  for (int step = 0; step < kSteps; ++step) {
    EXPECT_EQ(log.joined[step], static_cast<float>(kStreams * (step + 1) * kPerStep));
  }

  ASSERT_TRUE(cap.host->Stop().ok());
  struct Seen {
    std::set<uint32_t> threads;
    int before = 0, after = 0;
    uint64_t dispatch = 0, complete = 0;
  };
  std::map<uint64_t, Seen> seen;
  for (const CapturedArg& c : cap.host->TakeRecords()) {
    Seen& t = seen[c.record.task_id];
    t.threads.insert(c.thread);
    t.dispatch = abi::DispatchNs(c.record);
    if (c.record.stage == uint8_t(abi::Stage::kAfterCompletion)) {
      ++t.after;
      t.complete = t.dispatch + abi::DurationNs(c.record);
    } else {
      ++t.before;
    }
  }
  ASSERT_EQ(seen.size(), tasks.size());
  // Per stream (and the joins, as a stream of their own), in task id order.
  std::map<int, std::vector<uint64_t>> order;
  for (const auto& [id, task] : tasks) {
    const Seen& t = seen[id];
    // Before dispatch: what the task reads (a stream task's inout and two
    // scalars, the join's inputs); after completion: what it wrote.
    EXPECT_EQ(t.before, task.stream < 0 ? kStreams : 3) << "task " << id;
    EXPECT_EQ(t.after, 1) << "task " << id;
    EXPECT_EQ(t.threads.size(), 1u) << "task " << id << " recorded by more than one scheduler";
    EXPECT_LE(t.dispatch, t.complete) << "task " << id;
    order[task.stream].push_back(id);
  }
  for (const auto& [stream, ids] : order) {
    for (size_t i = 1; i < ids.size(); ++i) {
      EXPECT_LE(seen[ids[i - 1]].complete, seen[ids[i]].dispatch)
          << "stream " << stream << ": a task dispatched before its predecessor completed";
    }
  }
  // A join follows its step's last task of every stream, and the next
  // step's first tasks follow it.
  for (const auto& [id, task] : tasks) {
    if (task.stream < 0) continue;
    for (const uint64_t join : order[-1]) {
      const int join_seq = tasks[join].seq;  // the first seq after its step
      if (task.seq == join_seq - 1) {
        EXPECT_LE(seen[id].complete, seen[join].dispatch);
      }
      if (task.seq == join_seq) {
        EXPECT_LE(seen[join].complete, seen[id].dispatch);
      }
    }
  }
}

TEST(SimRuntimeTest, NeedsARecorderThreadPerScheduler) {
  DumpRegionConfig rc;
  rc.num_threads = 2;
  rc.arena_bytes = 4096;
  auto region = std::move(DumpRegion::Create(rc)).value();
  DumpRecorder recorder(*region);
  SimRuntime rt(Config(), BuiltinKernels(), &recorder);
  EXPECT_EQ(rt.Start().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace argsdump
