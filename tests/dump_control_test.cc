// Dump control: the mode, kernel allow/block lists by name and
// type, step lists, and the dynamic switch between steps, through the
// whole local pipeline (sim runtime -> recorder -> collector -> store) and
// read back from the files.
#include <cmath>
#include <functional>
#include <fstream>
#include <memory>
#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/files.h"
#include "apps/sim_run/sim_job.h"
#include "device/dump_config.h"
#include "device/sim/kernels.h"
#include "device/workload.h"
#include "gtest/gtest.h"
#include "tests/testing/sim_jobs.h"
#include "tests/testing/temp_dir.h"
#include "tests/capture_reader.h"
#include "viewer/viewer.h"

namespace argsdump {
namespace {

SimJobOptions Options(const std::string& name, int level = 2) {
  return SmallSimJob(level, TempPath(name), /*threads=*/2);
}

CaptureFiles RunJob(const std::string& workload, const SimJobOptions& o,
                    std::vector<std::string>* log = nullptr) {
  auto r = RunSimJob(*BuiltinWorkload(workload), BuiltinKernels(), o);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  EXPECT_TRUE(r->run_status.ok()) << r->run_status;
  if (log != nullptr) *log = r->dump_log;
  return ReadCapture(r->dump_dir);
}

// The kernel names of an entry's func ids.
std::set<std::string> Kernels(const Entry& e) {
  std::set<std::string> names;
  for (int f : e.func_id) {
    if (const KernelInfo* k = BuiltinKernels().Find(static_cast<uint16_t>(f))) names.insert(k->name);
  }
  return names;
}

std::set<std::string> AllKernels(const CaptureFiles& c) {
  std::set<std::string> out;
  for (const Entry& e : c.entries) {
    for (const std::string& k : Kernels(e)) out.insert(k);
  }
  return out;
}

// Entries without their task ids (steps of one workload differ only there).
std::multiset<std::tuple<v1::Stage, uint32_t, v1::Role, std::string>> Shapes(
    const CaptureFiles& c, std::function<bool(const Entry&)> keep) {
  std::multiset<std::tuple<v1::Stage, uint32_t, v1::Role, std::string>> out;
  for (const Entry& e : c.entries) {
    if (keep(e)) {
      out.insert({e.stage, e.arg_index, e.role,
                  absl::StrCat(e.payload.size(), " bytes, hash ",
                               std::hash<std::string>()(e.payload))});
    }
  }
  return out;
}

TEST(DumpControlTest, ModeSelectsTheStages) {
  const CaptureFiles all = RunJob("mixed_example", Options("mode_all"));
  ASSERT_GE(all.entries.size(), 20u);
  for (DumpMode mode : {DumpMode::kInput, DumpMode::kOutput}) {
    SCOPED_TRACE(DumpModeName(mode));
    SimJobOptions o = Options(absl::StrCat("mode_", DumpModeName(mode)));
    o.dump.mode = mode;
    const CaptureFiles c = RunJob("mixed_example", o);
    const v1::Stage stage =
        mode == DumpMode::kInput ? v1::STAGE_BEFORE_DISPATCH : v1::STAGE_AFTER_COMPLETION;
    ASSERT_FALSE(c.entries.empty());
    for (const Entry& e : c.entries) EXPECT_EQ(e.stage, stage);
    // Exactly the full capture's records of that stage, bytes included.
    EXPECT_EQ(Shapes(c, [](const Entry&) { return true; }),
              Shapes(all, [&](const Entry& e) { return e.stage == stage; }));
  }
}

TEST(DumpControlTest, KernelListsSelectByNameAndType) {
  const CaptureFiles all = RunJob("mixed_example", Options("funcs_all"));
  const std::set<std::string> every = AllKernels(all);
  ASSERT_TRUE(every.count("matmul") && every.count("relu") && every.count("softmax"));
  struct Case {
    std::vector<std::string> funcs, block;
    std::set<std::string> want;
  };
  std::set<std::string> not_elementwise;
  for (const std::string& k : every) {
    if (k != "accumulate" && k != "scale") not_elementwise.insert(k);
  }
  const std::vector<Case> cases = {
      {{"matmul"}, {}, {"matmul"}},
      {{"activation"}, {}, {"relu", "softmax"}},          // by type
      {{"matmul", "relu"}, {"relu"}, {"matmul"}},         // block wins
      {{}, {"elementwise"}, not_elementwise},             // block by type
      {{"mix_prod"}, {}, {"mix_sum", "mix_prod", "mix_max"}},  // one kernel of a mix task
      {{}, {"mix_max"}, [&] {                              // blocks the whole mix task
         std::set<std::string> s = every;
         for (const char* k : {"mix_sum", "mix_prod", "mix_max"}) s.erase(k);
         return s;
       }()},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    SCOPED_TRACE(absl::StrCat("funcs ", absl::StrJoin(c.funcs, ","), " block ",
                              absl::StrJoin(c.block, ",")));
    SimJobOptions o = Options(absl::StrCat("funcs_case_", i));
    o.dump.funcs = c.funcs;
    o.dump.block_funcs = c.block;
    const CaptureFiles got = RunJob("mixed_example", o);
    EXPECT_EQ(AllKernels(got), c.want);
    // What is kept is kept whole: the same records as in the full capture.
    EXPECT_EQ(Shapes(got, [](const Entry&) { return true; }), Shapes(all, [&](const Entry& e) {
                for (const std::string& k : Kernels(e)) {
                  if (c.want.count(k)) return true;
                }
                return false;
              }));
  }
}

// Steps per record; the set of steps that have records.
std::set<uint32_t> Steps(const CaptureFiles& c) {
  std::set<uint32_t> s;
  for (const Entry& e : c.entries) s.insert(e.step);
  return s;
}

TEST(DumpControlTest, StepsAreRecordedAndSelectedByTheStepList) {
  SimJobOptions o = Options("steps_all");
  o.steps = 4;
  const CaptureFiles all = RunJob("vector_example", o);
  EXPECT_EQ(Steps(all), (std::set<uint32_t>{0, 1, 2, 3}));
  // Every step dumps the same records (a fresh graph each step).
  const auto step0 = Shapes(all, [](const Entry& e) { return e.step == 0; });
  ASSERT_FALSE(step0.empty());
  for (uint32_t s = 1; s < 4; ++s) {
    EXPECT_EQ(Shapes(all, [&](const Entry& e) { return e.step == s; }), step0) << s;
  }
  EXPECT_NE(all.manifest_text.find("\"step\": 3"), std::string::npos);
  o.dump.steps = *StepSet::Parse("0|2-3");
  o.output_prefix = TempPath("steps_some");
  EXPECT_EQ(Steps(RunJob("vector_example", o)), (std::set<uint32_t>{0, 2, 3}));
  // A single-step capture has no "step" fields: its manifest is unchanged.
  const CaptureFiles one = RunJob("vector_example", Options("steps_one"));
  EXPECT_EQ(one.manifest_text.find("\"step\""), std::string::npos);
}

DumpConfig Level(int level) {
  DumpConfig c;
  c.level = level;
  return c;
}

// SetDumpConfig between steps takes effect at the next step; called while
// a step's tasks run, it leaves that step alone.
TEST(DumpControlTest, TheSwitchTakesEffectAtTheNextStepOnly) {
  SimJobOptions o = Options("switch");
  o.steps = 6;
  o.before_step = [](uint32_t step) -> std::optional<DumpConfig> {
    if (step == 1) return Level(0);  // off for step 1
    if (step == 2) return Level(2);  // on again
    return std::nullopt;
  };
  o.during_step = [](uint32_t step) -> std::optional<DumpConfig> {
    if (step == 3) return Level(0);  // mid-step 3: off from step 4
    if (step == 4) {
      DumpConfig c = Level(2);  // mid-step 4: outputs only from step 5
      c.mode = DumpMode::kOutput;
      return c;
    }
    return std::nullopt;
  };
  std::vector<std::string> log;
  const CaptureFiles c = RunJob("vector_example", o, &log);
  EXPECT_EQ(Steps(c), (std::set<uint32_t>{0, 2, 3, 5}));
  // INFO lines for every entry point call and state change.
  const std::string all = absl::StrJoin(log, "\n");
  for (const char* line : {"dump switched off at step 1", "dump switched on at step 2",
                           "takes effect at step 4", "dump switched off at step 4",
                           "dump switched on at step 5 (level=2", "mode=output"}) {
    EXPECT_NE(all.find(line), std::string::npos) << line << "\n" << all;
  }
  for (const Entry& e : c.entries) {
    if (e.step == 5) {
      EXPECT_EQ(e.stage, v1::STAGE_AFTER_COMPLETION);
    }
  }
  // Step 3 (switched off while it ran) is whole.
  EXPECT_EQ(Shapes(c, [](const Entry& e) { return e.step == 3; }),
            Shapes(c, [](const Entry& e) { return e.step == 0; }));
}

// The config file as sim_run watches it: edited between steps (here, by
// the test at the start of step 2), it switches the dump from that step.
TEST(DumpControlTest, EditingTheConfigFileSwitchesAtTheNextStep) {
  const std::string path = TempPath("watched_dump.json");
  std::ofstream(path, std::ios::trunc) << R"({"level": 2, "mode": "output"})";
  auto watcher = std::make_shared<DumpConfigWatcher>(DumpConfigEntry(), DumpConfigEntry(), path);
  std::vector<DumpLog> logs;
  const DumpConfig first = watcher->Current(&logs);
  SimJobOptions o = Options("watched", first.level);
  o.dump = first;
  o.dynamic = true;
  o.steps = 4;
  o.before_step = [&](uint32_t step) -> std::optional<DumpConfig> {
    if (step == 2) std::ofstream(path, std::ios::trunc) << R"({"level": 0})";
    return watcher->Poll(&logs);
  };
  std::vector<std::string> log;
  const CaptureFiles c = RunJob("vector_example", o, &log);
  EXPECT_EQ(Steps(c), (std::set<uint32_t>{0, 1}));
  for (const Entry& e : c.entries) EXPECT_EQ(e.stage, v1::STAGE_AFTER_COMPLETION);
  EXPECT_NE(absl::StrJoin(log, "\n").find("dump switched off at step 2"), std::string::npos);
  // The buffer pools' INFO lines.
  EXPECT_NE(absl::StrJoin(log, "\n").find("dump buffers created: 2 recording threads"),
            std::string::npos);
  EXPECT_EQ(log.back(), "dump buffers freed");
}

// Started at level 0 with a switch possible (a watched config file): no
// record until the dump is switched on.
TEST(DumpControlTest, SwitchedOnFromLevelZero) {
  SimJobOptions o = Options("from_zero", /*level=*/0);
  o.dynamic = true;
  o.steps = 3;
  o.before_step = [](uint32_t step) -> std::optional<DumpConfig> {
    if (step == 2) return Level(2);
    return std::nullopt;
  };
  const CaptureFiles c = RunJob("vector_example", o);
  EXPECT_EQ(Steps(c), (std::set<uint32_t>{2}));
}

// The levels actually used (after a switch to level 3 neither the manifest
// nor the summary may report an older level): the manifest's dump_args_level
// is the level switched to, "dump_levels" says from which step which
// level ran, and so does the run's summary - also on a capture service.
TEST(DumpControlTest, TheManifestAndSummaryTellTheLevelsPerStep) {
  SimJobOptions o = Options("levels_per_step", /*level=*/0);
  o.dynamic = true;
  o.steps = 4;
  o.before_step = [](uint32_t step) -> std::optional<DumpConfig> {
    if (step == 1) return Level(3);
    if (step == 3) return Level(0);
    return std::nullopt;
  };
  auto r = RunSimJob(*BuiltinWorkload("vector_example"), BuiltinKernels(), o);
  ASSERT_TRUE(r.ok()) << r.status();
  const CaptureFiles c = ReadCapture(r->dump_dir);
  EXPECT_EQ(c.manifest.dump_args_level(), 3u);
  ASSERT_EQ(c.manifest.dump_levels_size(), 3) << c.manifest_text;
  EXPECT_EQ(c.manifest.dump_levels(0).first_step(), 0u);
  EXPECT_EQ(c.manifest.dump_levels(0).level(), 0u);
  EXPECT_EQ(c.manifest.dump_levels(1).first_step(), 1u);
  EXPECT_EQ(c.manifest.dump_levels(1).level(), 3u);
  EXPECT_EQ(c.manifest.dump_levels(2).first_step(), 3u);
  EXPECT_EQ(c.manifest.dump_levels(2).level(), 0u);
  EXPECT_EQ(Steps(c), (std::set<uint32_t>{1, 2}));
  // Hybrid: metadata for every tensor, payload for the marked ones only.
  int metadata_only = 0;
  for (const Entry& e : c.entries) metadata_only += e.kind == v1::KIND_TENSOR && e.bin_size == 0;
  EXPECT_GT(metadata_only, 0);
  EXPECT_NE(SummarizeSimJob(*r, o).find("dump level 0 at step 0, 3 from step 1, 0 from step 3"),
            std::string::npos)
      << SummarizeSimJob(*r, o);

  // One level all along: no "dump_levels", the level as before.
  SimJobOptions plain = Options("levels_plain", 2);
  plain.steps = 2;
  auto p = RunSimJob(*BuiltinWorkload("vector_example"), BuiltinKernels(), plain);
  ASSERT_TRUE(p.ok()) << p.status();
  const CaptureFiles pc = ReadCapture(p->dump_dir);
  EXPECT_EQ(pc.manifest.dump_args_level(), 2u);
  EXPECT_EQ(pc.manifest_text.find("dump_levels"), std::string::npos);
  EXPECT_NE(SummarizeSimJob(*p, plain).find("dump level 2\n"), std::string::npos);
}

// n independent tasks x_i -> relu -> y_i, except task k: nonfinite (its
// output gets a NaN and an Inf). With `chain`, task i+1 reads y_i instead,
// so the NaN flows on to every later task.
v1::WorkloadSpec NanAt(int n, int k, bool chain) {
  v1::WorkloadSpec w;
  w.set_name("nan_at");
  for (int i = 0; i <= n; ++i) {
    v1::BufferSpec* b = w.add_buffers();
    b->set_name(absl::StrCat("y", i));
    b->set_dtype("FLOAT32");
    b->add_shape(4);
    b->add_shape(8);
    b->mutable_init()->set_fill(i == 0 ? 1.5 : 0.0);
  }
  for (int i = 0; i < n; ++i) {
    v1::TaskSpec* t = w.add_tasks();
    t->set_func(i == k ? "nonfinite" : "relu");
    v1::ArgSpec* in = t->add_args();
    in->set_tensor(chain ? absl::StrCat("y", i) : "y0");
    in->set_role("input");
    v1::ArgSpec* out = t->add_args();
    out->set_tensor(absl::StrCat("y", i + 1));
    out->set_role("output");
  }
  return w;
}

CaptureFiles RunSpec(const v1::WorkloadSpec& w, const SimJobOptions& o, SimJobResult* result) {
  auto r = RunSimJob(w, BuiltinKernels(), o);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  EXPECT_TRUE(r->run_status.ok()) << r->run_status;
  *result = *r;
  return ReadCapture(r->dump_dir);
}

// Level 0 + overflow: only task k is dumped, in full, flagged; the
// manifest and the run's summary name it.
TEST(OverflowDumpTest, TheTaskWithANanIsDumpedAloneAtLevelZero) {
  const int n = 12, k = 7;
  SimJobOptions o = Options("overflow0", /*level=*/0);
  o.dump.overflow = true;
  SimJobResult r;
  const CaptureFiles c = RunSpec(NanAt(n, k, /*chain=*/false), o, &r);
  const std::string task_k = absl::StrCat("0x", absl::Hex((uint64_t{1} << 32) | k, absl::kZeroPad16));
  ASSERT_EQ(c.entries.size(), 2u);  // its input (as at completion) and its output
  for (const Entry& e : c.entries) {
    EXPECT_EQ(e.task_id, task_k);
    EXPECT_EQ(e.stage, v1::STAGE_AFTER_COMPLETION);
    EXPECT_TRUE(e.overflow);
    EXPECT_EQ(e.payload.size(), 4u * 8 * 4);
  }
  const std::vector<float> out = c.entries[1].role == v1::ROLE_OUTPUT ? c.entries[1].As<float>()
                                                               : c.entries[0].As<float>();
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_TRUE(std::isinf(out[1]));
  EXPECT_EQ(c.manifest.first_overflow_task(), task_k);
  EXPECT_EQ(c.manifest.overflow_tasks(), 1u);
  EXPECT_EQ(r.overflow_tasks, 1u);
  EXPECT_NE(SummarizeSimJob(r, o).find("overflow: 1 task(s) wrote a NaN or an Inf; the first: task " +
                                      task_k),
            std::string::npos)
      << SummarizeSimJob(r, o);
}

// At level 2 with a chain: every task from k on overflows; k is the first.
// Tasks before k are dumped as usual; overflowing ones once, in full.
TEST(OverflowDumpTest, TheFirstOverflowingTaskIsNamedInAChain) {
  const int n = 6, k = 2;
  SimJobOptions o = Options("overflow_chain");
  o.dump.overflow = true;
  o.dump.mode = DumpMode::kInput;  // filters do not hide an overflow
  SimJobResult r;
  const CaptureFiles c = RunSpec(NanAt(n, k, /*chain=*/true), o, &r);
  EXPECT_EQ(r.overflow_tasks, static_cast<uint64_t>(n - k));
  const std::string task_k = absl::StrCat("0x", absl::Hex((uint64_t{1} << 32) | k, absl::kZeroPad16));
  EXPECT_EQ(c.manifest.first_overflow_task(), task_k);
  EXPECT_EQ(c.manifest.overflow_tasks(), static_cast<uint64_t>(n - k));
  std::map<std::string, std::vector<const Entry*>> by_task;
  for (const Entry& e : c.entries) by_task[e.task_id].push_back(&e);
  ASSERT_EQ(by_task.size(), static_cast<size_t>(n));
  for (const auto& [task, entries] : by_task) {
    const bool overflowed = task >= task_k;
    for (const Entry* e : entries) {
      EXPECT_EQ(e->overflow, overflowed && e->stage == v1::STAGE_AFTER_COMPLETION) << task;
    }
    // Before k: the input before dispatch only (mode input). From k: that,
    // plus input and output at completion.
    EXPECT_EQ(entries.size(), overflowed ? 3u : 1u) << task;
  }
}

// Level 1: an overflowing task is dumped in full, whatever its markers -
// every tensor at completion and every scalar, also those the partial dump
// before dispatch left out.
TEST(OverflowDumpTest, AtLevelOneTheOverflowingTaskKeepsEveryScalar) {
  const int n = 4;
  for (const bool marked : {true, false}) {
    SCOPED_TRACE(marked ? "input marked" : "nothing marked");
    v1::WorkloadSpec w = NanAt(n, /*k=*/2, /*chain=*/false);
    v1::TaskSpec* t = w.mutable_tasks(2);
    t->mutable_args(0)->set_dump(marked);
    v1::ScalarSpec* alpha = t->add_args()->mutable_scalar();
    alpha->set_dtype("FLOAT32");
    alpha->set_value(2.5);
    SimJobOptions o = Options(marked ? "overflow_l1_marked" : "overflow_l1_unmarked", 1);
    o.dump.overflow = true;
    SimJobResult r;
    const CaptureFiles c = RunSpec(w, o, &r);
    EXPECT_EQ(r.overflow_tasks, 1u);
    std::vector<std::string> got;
    for (const Entry& e : c.entries) {
      got.push_back(absl::StrCat(KindName(e.kind), " ", RoleName(e.role), " ", StageName(e.stage), e.overflow ? " overflow" : ""));
    }
    std::vector<std::string> want = {"tensor input after_completion overflow",
                                     "tensor output after_completion overflow",
                                     "scalar input before_dispatch overflow"};
    if (marked) want.insert(want.begin(), "tensor input before_dispatch");
    std::sort(got.begin(), got.end());
    std::sort(want.begin(), want.end());
    EXPECT_EQ(got, want);
    for (const Entry& e : c.entries) {
      if (e.kind == v1::KIND_SCALAR) {
        EXPECT_EQ(e.value.number_value(), 2.5);
      }
    }
  }
}

TEST(OverflowDumpTest, NoOverflowNoExtraRecords) {
  SimJobOptions o = Options("overflow_none");
  o.dump.overflow = true;
  SimJobResult r;
  const CaptureFiles c = RunSpec(NanAt(4, /*k=*/-1, false), o, &r);
  EXPECT_EQ(r.overflow_tasks, 0u);
  EXPECT_EQ(c.entries.size(), 8u);
  for (const Entry& e : c.entries) EXPECT_FALSE(e.overflow);
  // The check was on (dump_scope says so), and found nothing: no entry and
  // no count speaks of an overflow.
  EXPECT_TRUE(c.manifest.dump_scope().overflow());
  EXPECT_EQ(c.manifest_text.find("\"overflow\": true"),
            c.manifest_text.find("\"dump_scope\": {\"overflow\": true") + 15);
  EXPECT_EQ(c.manifest_text.find("overflow_tasks"), std::string::npos);
  EXPECT_EQ(c.manifest_text.find("\"overflow\": true", c.manifest_text.find("\"args\"")),
            std::string::npos);
}

// Statistics as this test works them out from float32 payload bytes.
struct Expected {
  double min = 0, max = 0, sum = 0, sq = 0;
  uint64_t count = 0, finite = 0, nan = 0, pos_inf = 0, neg_inf = 0, zeros = 0;
};
Expected Work(const std::vector<float>& v) {
  Expected e;
  for (float f : v) {
    ++e.count;
    if (std::isnan(f)) { ++e.nan; continue; }
    if (std::isinf(f)) { ++(f > 0 ? e.pos_inf : e.neg_inf); continue; }
    if (f == 0) ++e.zeros;
    e.min = e.finite == 0 ? f : std::min<double>(e.min, f);
    e.max = e.finite == 0 ? f : std::max<double>(e.max, f);
    e.sum += f;
    e.sq += static_cast<double>(f) * f;
    ++e.finite;
  }
  return e;
}

void ExpectStats(const Entry& got, const std::vector<float>& values) {
  const Expected e = Work(values);
  ASSERT_TRUE(got.has_stats) << got.task_id << " " << got.arg_index;
  EXPECT_EQ(got.stats.count(), e.count);
  EXPECT_EQ(got.stats.min(), e.min);
  EXPECT_EQ(got.stats.max(), e.max);
  EXPECT_NEAR(got.stats.mean(), e.finite ? e.sum / e.finite : 0, 1e-9 * (1 + std::fabs(e.sum)));
  EXPECT_NEAR(got.stats.l2(), std::sqrt(e.sq), 1e-9 * (1 + std::sqrt(e.sq)));
  EXPECT_EQ(got.stats.nan(), e.nan);
  EXPECT_EQ(got.stats.pos_inf(), e.pos_inf);
  EXPECT_EQ(got.stats.neg_inf(), e.neg_inf);
  EXPECT_EQ(got.stats.zeros(), e.zeros);
}

// stats on: every tensor record carries the statistics of its payload;
// stats only: the same numbers, and no payload is written.
TEST(StatsModeTest, StatsWithAndWithoutThePayload) {
  SimJobOptions on = Options("stats_on");
  on.dump.stats = StatsMode::kOn;
  on.dump.overflow = true;  // overflow records keep their payload even in stats-only
  SimJobResult r;
  const CaptureFiles full = RunSpec(NanAt(5, 2, /*chain=*/true), on, &r);
  size_t with_stats = 0;
  for (const Entry& e : full.entries) {
    if (e.kind != v1::KIND_TENSOR) continue;
    ExpectStats(e, e.As<float>());
    ++with_stats;
  }
  EXPECT_GE(with_stats, 10u);
  // The NaN/Inf ones are counted (task 2 on, by the chain).
  size_t nonfinite = 0;
  for (const Entry& e : full.entries) nonfinite += e.has_stats && e.stats.nan() > 0;
  EXPECT_GT(nonfinite, 0u);

  SimJobOptions only = Options("stats_only");
  only.dump.stats = StatsMode::kOnly;
  const CaptureFiles bare = RunSpec(NanAt(5, 2, /*chain=*/true), only, &r);
  // Without the overflow check: no input records at completion (3 tasks).
  ASSERT_EQ(bare.entries.size(), full.entries.size() - 3);
  EXPECT_EQ(bare.manifest.payload_bytes(), 0u);
  std::map<EntryKey, const Entry*> by_key;
  for (const Entry& e : full.entries) by_key[e.Key()] = &e;
  for (const Entry& e : bare.entries) {
    EXPECT_EQ(e.bin_size, 0u);
    const Entry* f = by_key[e.Key()];
    ASSERT_NE(f, nullptr);
    if (f->overflow) continue;
    ExpectStats(e, f->As<float>());
  }
  // dump_viewer shows the stored statistics of a capture without payloads,
  // and flags the records whose stats count a NaN or an Inf.
  std::ostringstream out, err;
  ASSERT_EQ(RunViewer({r.dump_dir, "--stats"}, out, err), 0) << err.str();
  const std::string text = out.str();
  EXPECT_NE(text.find("nonfinite"), std::string::npos) << text;
  size_t stored = 0;
  for (size_t at = text.find("stored"); at != std::string::npos; at = text.find("stored", at + 1)) {
    ++stored;
  }
  EXPECT_EQ(stored, bare.entries.size()) << text;
  // Task 0's output: relu(1.5) everywhere.
  EXPECT_NE(text.find("            1.5             1.5             1.5             1.5"),
            std::string::npos)
      << text;
}

// The level a capture reports is the one in effect, and what else was on
// is said beside it: level 0 with the overflow check is level 0 in the
// manifest, the "dump buffers created" line and the summary (the buffers
// record at level 2 for it, which the log line says as such).
TEST(LevelTruthTest, TheOverflowCheckAloneIsLevelZero) {
  SimJobOptions o = Options("truth_overflow", /*level=*/0);
  o.dump.overflow = true;
  SimJobResult r;
  const CaptureFiles c = RunSpec(NanAt(6, 3, /*chain=*/false), o, &r);
  ASSERT_EQ(c.entries.size(), 2u);
  EXPECT_EQ(c.manifest.dump_args_level(), 0u) << c.manifest_text;
  EXPECT_NE(c.manifest_text.find("\"dump_args_level\": 0,"), std::string::npos);
  ASSERT_TRUE(c.manifest.has_dump_scope()) << c.manifest_text;
  EXPECT_TRUE(c.manifest.dump_scope().overflow());
  EXPECT_EQ(c.manifest.dump_scope().stats(), "off");
  EXPECT_EQ(c.manifest.dump_scope().mode(), "all");
  const std::string created = absl::StrJoin(r.dump_log, "\n");
  EXPECT_NE(created.find("for recording at level 2; the dump runs at level 0 (off) with the "
                         "overflow check (a task whose output holds a NaN or an Inf is dumped "
                         "in full)"),
            std::string::npos)
      << created;
  const std::string summary = SummarizeSimJob(r, o);
  EXPECT_NE(summary.find("dump level 0 with the overflow check"), std::string::npos) << summary;
  // The index-backed lookup agrees with the manifest on the level.
  std::ostringstream out, err;
  EXPECT_EQ(RunViewer({r.dump_dir, "--task", c.entries[0].task_id}, out, err), 0) << err.str();
}

TEST(LevelTruthTest, StatsOnlyAndTheStagesAreSaid) {
  SimJobOptions o = Options("truth_stats");
  o.dump.stats = StatsMode::kOnly;
  o.dump.mode = DumpMode::kInput;
  SimJobResult r;
  const CaptureFiles c = RunSpec(NanAt(4, 1, /*chain=*/false), o, &r);
  EXPECT_EQ(c.manifest.dump_args_level(), 2u);
  EXPECT_FALSE(c.manifest.dump_scope().overflow());
  EXPECT_EQ(c.manifest.dump_scope().stats(), "only");
  EXPECT_EQ(c.manifest.dump_scope().mode(), "input");
  const std::string created = absl::StrJoin(r.dump_log, "\n");
  EXPECT_NE(created.find("the dump runs at level 2 (everything) with stats only (no payload is "
                         "kept), inputs only (before dispatch)"),
            std::string::npos)
      << created;
  EXPECT_NE(SummarizeSimJob(r, o).find("dump level 2 with stats only (no payload is kept), "
                                       "inputs only (before dispatch)\n"),
            std::string::npos)
      << SummarizeSimJob(r, o);
}

// A switch that changes only what else is on (stats, the overflow check)
// is a step entry of its own: the manifest's dump_levels and the summary
// say it per step.
TEST(LevelTruthTest, ASwitchOfStatsOrOverflowIsSaidPerStep) {
  SimJobOptions o = Options("truth_steps", 2);
  o.dynamic = true;
  o.steps = 3;
  o.before_step = [](uint32_t step) -> std::optional<DumpConfig> {
    DumpConfig c = Level(2);
    if (step == 1) c.stats = StatsMode::kOnly;
    if (step == 2) c.overflow = true;
    if (step == 0) return std::nullopt;
    return c;
  };
  auto r = RunSimJob(*BuiltinWorkload("vector_example"), BuiltinKernels(), o);
  ASSERT_TRUE(r.ok()) << r.status();
  const CaptureFiles c = ReadCapture(r->dump_dir);
  EXPECT_EQ(c.manifest.dump_args_level(), 2u);
  ASSERT_EQ(c.manifest.dump_levels_size(), 3) << c.manifest_text;
  EXPECT_EQ(c.manifest.dump_levels(0).stats(), "off");
  EXPECT_EQ(c.manifest.dump_levels(1).first_step(), 1u);
  EXPECT_EQ(c.manifest.dump_levels(1).stats(), "only");
  EXPECT_FALSE(c.manifest.dump_levels(1).overflow());
  EXPECT_EQ(c.manifest.dump_levels(2).first_step(), 2u);
  EXPECT_EQ(c.manifest.dump_levels(2).stats(), "off");
  EXPECT_TRUE(c.manifest.dump_levels(2).overflow());
  for (const auto& l : c.manifest.dump_levels()) EXPECT_EQ(l.level(), 2u);
  // Step 1's payloads were not kept; steps 0 and 2 have theirs.
  for (const Entry& e : c.entries) {
    if (e.kind == v1::KIND_TENSOR) {
      EXPECT_EQ(e.bin_size == 0, e.step == 1) << e.task_id;
    }
  }
  const std::string summary = SummarizeSimJob(*r, o);
  EXPECT_NE(summary.find("dump level 2 at step 0, 2 with stats only (no payload is kept) from "
                         "step 1, 2 with the overflow check (a task whose output holds a NaN or "
                         "an Inf is dumped in full) from step 2\n"),
            std::string::npos)
      << summary;
}

// One resolution for sim_run and the SDK (ResolveDumpEntryPoints): every
// setting is taken from every entry point that can carry it, alone; and
// with all four setting it, the command line wins, each lower one that
// disagrees an ERROR naming both.
TEST(DumpResolutionTest, EverySettingFromEveryEntryPoint) {
  const std::string dir = TempPath("entry_points");
  ASSERT_TRUE(CreateDirectories(dir).ok());
  const std::string token = dir + "/token";
  std::ofstream(token) << "s3cret\n";
  struct Setting {
    std::string name, env, file_json, text;
    std::function<void(DumpConfigEntry*)> set;  // the same value as an entry's field
    std::function<bool(const DumpConfig&)> taken;
  };
  const std::vector<Setting> settings = {
      {"level", "ARGSDUMP_LEVEL", "3", "3", [](DumpConfigEntry* e) { e->level = 3; },
       [](const DumpConfig& c) { return c.level == 3; }},
      {"path", "ARGSDUMP_PATH", "\"" + dir + "\"", dir,
       [&](DumpConfigEntry* e) { e->path = dir; },
       [&](const DumpConfig& c) { return c.path == dir; }},
      {"mode", "ARGSDUMP_MODE", "\"output\"", "output",
       [](DumpConfigEntry* e) { e->mode = DumpMode::kOutput; },
       [](const DumpConfig& c) { return c.mode == DumpMode::kOutput; }},
      {"funcs", "ARGSDUMP_FUNCS", "[\"relu\", \"matmul\"]", "relu,matmul",
       [](DumpConfigEntry* e) { e->funcs = std::vector<std::string>{"relu", "matmul"}; },
       [](const DumpConfig& c) { return c.funcs == std::vector<std::string>{"relu", "matmul"}; }},
      {"block_funcs", "ARGSDUMP_BLOCK_FUNCS", "\"relu\"", "relu",
       [](DumpConfigEntry* e) { e->block_funcs = std::vector<std::string>{"relu"}; },
       [](const DumpConfig& c) { return c.block_funcs == std::vector<std::string>{"relu"}; }},
      {"steps", "ARGSDUMP_STEPS", "\"1|3-4\"", "1|3-4",
       [](DumpConfigEntry* e) { e->steps = *StepSet::Parse("1|3-4"); },
       [](const DumpConfig& c) { return c.steps == *StepSet::Parse("1|3-4"); }},
      {"stats", "ARGSDUMP_STATS", "\"only\"", "only",
       [](DumpConfigEntry* e) { e->stats = StatsMode::kOnly; },
       [](const DumpConfig& c) { return c.stats == StatsMode::kOnly; }},
      {"overflow", "ARGSDUMP_OVERFLOW", "true", "true",
       [](DumpConfigEntry* e) { e->overflow = true; },
       [](const DumpConfig& c) { return c.overflow; }},
      {"capture_server", "ARGSDUMP_CAPTURE_SERVER", "\"127.0.0.1:5\"", "127.0.0.1:5",
       [](DumpConfigEntry* e) { e->capture_server = "127.0.0.1:5"; },
       [](const DumpConfig& c) { return c.capture_server == "127.0.0.1:5"; }},
      {"auth_token_file", "ARGSDUMP_AUTH_TOKEN_FILE", "\"" + token + "\"", token,
       [&](DumpConfigEntry* e) { e->auth_token_file = token; },
       [&](const DumpConfig& c) { return c.auth_token_file == token; }},
      {"labels", "ARGSDUMP_LABELS", "\"a=b,c=d\"", "a=b,c=d",
       [](DumpConfigEntry* e) {
         e->labels = std::vector<std::pair<std::string, std::string>>{{"a", "b"}, {"c", "d"}};
       },
       [](const DumpConfig& c) {
         return c.labels == std::vector<std::pair<std::string, std::string>>{{"a", "b"}, {"c", "d"}};
       }},
      {"dedup", "ARGSDUMP_DEDUP", "false", "false",
       [](DumpConfigEntry* e) { e->dedup = false; },
       [](const DumpConfig& c) { return !c.dedup; }},
  };
  const DumpConfig defaults;
  for (const Setting& setting : settings) {
    ASSERT_FALSE(setting.taken(defaults)) << setting.name << " is the default already";
    for (const std::string entry : {"command line", "API", "environment", "config file"}) {
      SCOPED_TRACE(setting.name + " from the " + entry);
      DumpEntryPoints points;
      if (entry == "command line") setting.set(&points.command_line);
      if (entry == "API") setting.set(&points.api.emplace());
      if (entry == "environment") points.environment[setting.env] = setting.text;
      if (entry == "config file") {
        points.config_file = absl::StrCat(dir, "/", setting.name, ".json");
        std::ofstream(points.config_file) << "{\"" << setting.name << "\": " << setting.file_json
                                          << "}";
      }
      std::vector<DumpLog> logs;
      const DumpResolution r = ResolveDumpEntryPoints(points, &logs);
      EXPECT_TRUE(setting.taken(r.config)) << r.config.Describe();
      for (const DumpLog& l : logs) EXPECT_EQ(l.severity, DumpLog::kInfo) << l.text;
    }
  }
  // All four at once, each a different level: the command line's wins.
  DumpEntryPoints points;
  points.command_line.level = 1;
  points.api.emplace().level = 2;
  points.environment["ARGSDUMP_LEVEL"] = "3";
  points.config_file = dir + "/level0.json";
  std::ofstream(points.config_file) << "{\"level\": 0}";
  std::vector<DumpLog> logs;
  EXPECT_EQ(ResolveDumpEntryPoints(points, &logs).config.level, 1);
  std::vector<std::string> errors;
  for (const DumpLog& l : logs) {
    if (l.severity == DumpLog::kError) errors.push_back(l.text);
  }
  ASSERT_EQ(errors.size(), 3u) << absl::StrJoin(errors, "\n");
  EXPECT_EQ(errors[0], "level: the command line sets 1 and API sets 2; using the command line's "
                       "(command line > API > environment > config file)");
}

// A chain of n relu tasks; task k runs `kernel` (fail or throw) instead.
v1::WorkloadSpec FailAt(int n, int k, const std::string& kernel) {
  v1::WorkloadSpec w = NanAt(n, k, /*chain=*/true);
  w.set_name("fail_at");
  w.mutable_tasks(k)->set_func(kernel);
  return w;
}

struct ExceptionCase {
  std::string kernel;
  int level;
  std::string error;
};

class ExceptionDumpTest : public ::testing::TestWithParam<ExceptionCase> {};

TEST_P(ExceptionDumpTest, TheFailingTaskIsSavedAndTheRunStops) {
  const ExceptionCase& p = GetParam();
  const int n = 6, k = 3;
  SimJobOptions o = Options(absl::StrCat("exception_", p.kernel, "_", p.level), p.level);
  auto r = RunSimJob(FailAt(n, k, p.kernel), BuiltinKernels(), o);
  ASSERT_TRUE(r.ok()) << r.status();
  // The run stopped with the kernel's error; later tasks never ran.
  EXPECT_EQ(r->run_status.code(), absl::StatusCode::kInternal);
  EXPECT_NE(r->run_status.message().find(p.error), std::string::npos) << r->run_status;
  EXPECT_LT(r->tasks_completed, static_cast<uint64_t>(n));
  const std::string task_k = absl::StrCat("0x", absl::Hex((uint64_t{1} << 32) | k, absl::kZeroPad16));
  ASSERT_EQ(r->exception_dumps.size(), 1u);
  const std::string dir = r->exception_dumps[0];
  // [scenario]_[workload]_[func]_[func type]_[step]_[thread]_[task_id]
  const std::string name = dir.substr(dir.find_last_of('/') + 1);
  EXPECT_EQ(dir.substr(0, dir.find_last_of('/')), o.output_prefix + "/exception_dump");
  EXPECT_EQ(name.rfind(absl::StrCat("exception_fail_at_", p.kernel, "_test_0_"), 0), 0u) << name;
  EXPECT_EQ(name.substr(name.size() - task_k.size()), task_k) << name;
  EXPECT_NE(SummarizeSimJob(*r, o).find("exception dump: " + dir), std::string::npos);
  // The context.
  const std::string context = ReadFileOrEmpty(dir + "/context.json");
  for (const std::string& field : std::vector<std::string>{
       "\"scenario\": \"exception\"", "\"workload\": \"fail_at\"",
        std::string("\"func\": \"") + p.kernel + "\"", "\"func_type\": \"test\"",
        "\"task_id\": \"" + task_k + "\"", std::string("\"step\": 0"), std::string("\"thread\": "),
        "\"error\": \""}) {
    EXPECT_NE(context.find(field), std::string::npos) << field << "\n" << context;
  }
  EXPECT_NE(context.find(p.error), std::string::npos) << context;
  // Its inputs and outputs as they were after the failure: a capture.
  const CaptureFiles saved = ReadCapture(dir);
  ASSERT_EQ(saved.entries.size(), 2u);
  const Entry& in = saved.entries[0].role == v1::ROLE_INPUT ? saved.entries[0] : saved.entries[1];
  const Entry& out = saved.entries[0].role == v1::ROLE_INPUT ? saved.entries[1] : saved.entries[0];
  const std::vector<float> x = in.As<float>(), y = out.As<float>();
  ASSERT_EQ(x.size(), 32u);
  ASSERT_EQ(y.size(), 32u);
  for (size_t i = 0; i < 32; ++i) EXPECT_EQ(y[i], i < 16 ? x[i] : 0.0f) << i;
  EXPECT_EQ(x[0], 1.5f);  // relu of 1.5, three times
  // Everything captured before the failure is in the run's manifest.
  if (p.level == 0) return;
  const CaptureFiles c = ReadCapture(r->dump_dir);
  std::set<std::string> tasks;
  for (const Entry& e : c.entries) tasks.insert(e.task_id);
  EXPECT_EQ(tasks.size(), static_cast<size_t>(k + 1));  // 0..k-1 whole, k before dispatch (+ after)
  for (int t = 0; t < k; ++t) {
    EXPECT_EQ(tasks.count(absl::StrCat("0x", absl::Hex((uint64_t{1} << 32) | t, absl::kZeroPad16))), 1u);
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, ExceptionDumpTest,
                         ::testing::Values(ExceptionCase{"fail", 2, "injected failure"},
                                           ExceptionCase{"throw", 2, "threw injected exception"},
                                           ExceptionCase{"fail", 0, "injected failure"}),
                         [](const ::testing::TestParamInfo<ExceptionCase>& i) {
                           return absl::StrCat(i.param.kernel, "_level", i.param.level);
                         });

// The verbose item through a whole session, in process and with the device
// in its own process (whose stderr is this one's): a line per dumped task.
TEST(VerboseTest, ALinePerDumpedTaskInEitherProcess) {
  for (bool device_process : {false, true}) {
    SCOPED_TRACE(device_process);
    SimJobOptions o = Options(absl::StrCat("verbose_", device_process), 2);
    o.dump.verbose = true;
    o.device_process = device_process;
    testing::internal::CaptureStderr();
    auto r = RunSimJob(*BuiltinWorkload("vector_example"), BuiltinKernels(), o);
    const std::string err = testing::internal::GetCapturedStderr();
    ASSERT_TRUE(r.ok()) << r.status();
    std::vector<std::string> lines;
    for (absl::string_view line : absl::StrSplit(err, '\n')) {
      if (absl::StartsWith(line, "[argsdump dumper] INFO: dump task 0x")) lines.emplace_back(line);
    }
    EXPECT_EQ(lines.size(), r->tasks) << err;
    EXPECT_NE(err.find(": add (elementwise); arg 0 input FLOAT32 ["), std::string::npos) << err;
    EXPECT_NE(err.find(": add_scalar (elementwise); arg 0 input"), std::string::npos) << err;
  }
  // Off: no such line.
  SimJobOptions quiet = Options("verbose_off", 2);
  testing::internal::CaptureStderr();
  auto q = RunSimJob(*BuiltinWorkload("vector_example"), BuiltinKernels(), quiet);
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(err.find("INFO: dump task"), std::string::npos) << err;
}

// The run summary names a refused record's exception dump for what it is.
TEST(RefusedRecordSummaryTest, TheSummarySaysWhatTheFolderHolds) {
  SimJobOptions o = Options("refused_summary", 2);
  SimJobResult r;
  r.tasks = r.tasks_completed = 1;
  r.exception_dumps = {o.output_prefix + "/exception_dump/refused_001_0_0x0000000100000000"};
  EXPECT_NE(SummarizeSimJob(r, o).find(
                "exception dump: " + r.exception_dumps[0] +
                " (a record the collector refused: its raw bytes in record.bin"),
            std::string::npos)
      << SummarizeSimJob(r, o);
}

}  // namespace
}  // namespace argsdump
