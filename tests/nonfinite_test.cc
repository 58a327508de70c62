// The two non-finite commands agree on every capture: a task that writes a
// NaN and an Inf, captured at levels 1, 2 and 3 with stats off, on and
// only, overflow-only (level 0 + the overflow check) and level 2 + the
// overflow check, locally and streamed to a capture service.
// dump_viewer --nonfinite (ArgFilter.has_nonfinite: a query, answered by
// the service's QueryArgs remotely) selects exactly the records whose
// captured elements hold a NaN or an Inf, as the test finds them itself in
// args.bin (or, without payload, in the stored stats); --first-nonfinite
// names the first such output's task and every input the capture holds of
// it.
#include <cmath>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "apps/sim_run/sim_job.h"
#include "device/sim/kernels.h"
#include "gtest/gtest.h"
#include "tests/capture_reader.h"
#include "tests/testing/capture_service_fixture.h"
#include "tests/testing/sim_jobs.h"
#include "tests/testing/temp_dir.h"
#include "viewer/viewer.h"

namespace argsdump {
namespace {

constexpr int kTasks = 6;

// kTasks tasks y0 -> relu -> y_{i+1}, but task `nan_task` runs nonfinite
// (its output gets a NaN and a +Inf); -1: none does. Task `nan_task` and
// task 1 carry dump markers (levels 1 and 3 select them).
v1::WorkloadSpec Workload(int nan_task) {
  v1::WorkloadSpec w;
  w.set_name("nonfinite_agree");
  for (int i = 0; i <= kTasks; ++i) {
    v1::BufferSpec* b = w.add_buffers();
    b->set_name(absl::StrCat("y", i));
    b->set_dtype("FLOAT32");
    b->add_shape(4);
    b->add_shape(8);
    b->mutable_init()->set_fill(i == 0 ? 1.5 : 0.0);
  }
  for (int i = 0; i < kTasks; ++i) {
    v1::TaskSpec* t = w.add_tasks();
    t->set_func(i == nan_task ? "nonfinite" : "relu");
    const bool marked = i == nan_task || i == 1;
    v1::ArgSpec* in = t->add_args();
    in->set_tensor("y0");
    in->set_role("input");
    in->set_dump(marked);
    v1::ArgSpec* out = t->add_args();
    out->set_tensor(absl::StrCat("y", i + 1));
    out->set_role("output");
    out->set_dump(marked);
  }
  return w;
}

struct Case {
  std::string name;
  int level;
  StatsMode stats;
  bool overflow;
};

std::vector<Case> Cases() {
  std::vector<Case> out;
  for (int level : {1, 2, 3}) {
    for (StatsMode stats : {StatsMode::kOff, StatsMode::kOn, StatsMode::kOnly}) {
      out.push_back({absl::StrCat("level", level, "_stats_", StatsModeName(stats)), level, stats,
                     false});
    }
  }
  out.push_back({"overflow_only", 0, StatsMode::kOff, true});
  out.push_back({"overflow_only_stats_on", 0, StatsMode::kOn, true});
  out.push_back({"level2_overflow", 2, StatsMode::kOff, true});
  return out;
}

struct Result {
  int code;
  std::string out, err;
};

Result Viewer(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = RunViewer(args, out, err);
  return {code, out.str(), err.str()};
}

using Key = std::tuple<std::string, std::string, std::string, int>;  // task, stage, role, arg

// The records of a --nonfinite listing (the lines before "N args").
std::set<Key> Listed(const std::string& listing) {
  std::set<Key> out;
  for (absl::string_view line : absl::StrSplit(listing, '\n')) {
    std::istringstream in{std::string(line)};
    uint64_t index;
    std::string task, stage, role;
    int arg;
    if (!(in >> index >> task >> stage >> role >> arg) || task.rfind("0x", 0) != 0) continue;
    out.insert({task, stage, role, arg});
  }
  return out;
}

// What the test finds itself: the tensor records whose payload holds a NaN
// or an Inf, or, kept without payload, whose stored stats count one (an
// overwritten payload is not the tensor's).
std::set<Key> Expected(const CaptureFiles& c) {
  std::set<Key> out;
  for (const Entry& e : c.entries) {
    if (e.kind != v1::KIND_TENSOR || e.overwritten) continue;
    bool found = false;
    if (e.bin_size > 0) {
      for (float v : e.As<float>()) found = found || !std::isfinite(v);
    } else if (e.has_stats) {
      found = e.stats.nan() + e.stats.pos_inf() + e.stats.neg_inf() > 0;
    }
    if (found) {
      out.insert({e.task_id, StageShortName(e.stage), RoleName(e.role),
                  static_cast<int>(e.arg_index)});
    }
  }
  return out;
}

class NonfiniteAgreeTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    TestCaptureServiceOptions o;
    o.root = TempPath(absl::StrCat("root_", GetParam().name));
    auto server = TestCaptureService::Start(o);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(server).value();
    root_ = server_->root();
    target_ = server_->target();
  }

  SimJobOptions Options(const std::string& prefix) const {
    const Case& c = GetParam();
    SimJobOptions o = SmallSimJob(c.level, TempPath(prefix), /*threads=*/1);
    o.dump.stats = c.stats;
    o.dump.overflow = c.overflow;
    return o;
  }

  std::string root_, target_;
  std::unique_ptr<TestCaptureService> server_;
};

TEST_P(NonfiniteAgreeTest, BothCommandsFindTheNanLocallyAndThroughTheService) {
  const Case& c = GetParam();
  constexpr int kNanTask = 3;
  const std::string nan_task = "0x0000000100000003";
  const auto workload = Workload(kNanTask);

  SimJobOptions local = Options("local_" + c.name);
  auto l = RunSimJob(workload, BuiltinKernels(), local);
  ASSERT_TRUE(l.ok()) << l.status();
  ASSERT_TRUE(l->run_status.ok()) << l->run_status;
  ASSERT_TRUE(l->wrote_capture);
  const std::string dir = l->dump_dir;
  const CaptureFiles files = ReadCapture(dir);
  const std::set<Key> expected = Expected(files);
  // The NaN task's output is among them whatever the case (it is marked,
  // and the overflow check dumps it whole).
  ASSERT_EQ(expected.count({nan_task, "after", "output", 1}), 1u)
      << "the case does not capture the NaN task's output";
  // And the manifest says so on those records, stats or not.
  for (const Entry& e : files.entries) {
    const Key key{e.task_id, StageShortName(e.stage), RoleName(e.role),
                  static_cast<int>(e.arg_index)};
    EXPECT_EQ(e.nonfinite, expected.count(key) > 0)
        << e.task_id << " " << StageName(e.stage) << " " << RoleName(e.role) << " "
        << e.arg_index;
  }

  const Result listed = Viewer({dir, "--nonfinite"});
  ASSERT_EQ(listed.code, 0) << listed.err;
  EXPECT_EQ(Listed(listed.out), expected) << listed.out;
  const Result first = Viewer({dir, "--first-nonfinite"});
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_NE(first.out.find(absl::StrCat("first non-finite output: index ")), std::string::npos)
      << first.out;
  EXPECT_NE(first.out.find(absl::StrCat("task ", nan_task, "  after_completion output arg 1")),
            std::string::npos)
      << first.out;
  // Every input the capture holds of the task is listed with it: before
  // dispatch, and (the overflow dump) the input as it was at completion.
  for (const Entry& e : files.entries) {
    if (e.task_id != nan_task) continue;
    if (e.stage == v1::STAGE_AFTER_COMPLETION && e.role != v1::ROLE_INPUT) continue;
    const std::string line =
        absl::StrCat(StageName(e.stage), " ", RoleName(e.role), " arg ", e.arg_index);
    EXPECT_NE(first.out.find(line), std::string::npos)
        << "input " << line << " not listed:\n"
        << first.out;
  }
  if (c.overflow) {
    EXPECT_NE(first.out.find("after_completion input arg 0"), std::string::npos) << first.out;
  }

  // The same run streamed to the service: the same answers, --nonfinite
  // through QueryArgs' has_nonfinite.
  SimJobOptions remote = Options("remote_" + c.name);
  remote.capture_server = target_;
  remote.capture_name = c.name;
  auto r = RunSimJob(workload, BuiltinKernels(), remote);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->run_status.ok()) << r->run_status;
  const std::vector<std::string> at = {"--server", target_, "--capture", c.name};
  const Result rlisted = Viewer({at[0], at[1], at[2], at[3], "--nonfinite"});
  EXPECT_EQ(rlisted.code, 0) << rlisted.err;
  EXPECT_EQ(rlisted.out, listed.out);
  const Result rfirst = Viewer({at[0], at[1], at[2], at[3], "--first-nonfinite"});
  EXPECT_EQ(rfirst.code, 0) << rfirst.err;
  EXPECT_EQ(rfirst.out, first.out);
  // The service's own files say the same.
  EXPECT_EQ(Expected(ReadCapture(server_->CaptureDir(c.name))), expected);
}

INSTANTIATE_TEST_SUITE_P(Captures, NonfiniteAgreeTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

// Without a NaN: --nonfinite matches nothing and says what it looks at;
// --first-nonfinite finds nothing either.
TEST(NonfiniteNoMatchTest, SaysWhatItLooksAt) {
  SimJobOptions o = SmallSimJob(2, TempPath("finite"), /*threads=*/1);
  auto r = RunSimJob(Workload(-1), BuiltinKernels(), o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->wrote_capture);
  const Result listed = Viewer({r->dump_dir, "--nonfinite"});
  EXPECT_EQ(listed.code, 1);
  EXPECT_NE(listed.err.find("no arg matches the filters"), std::string::npos) << listed.err;
  EXPECT_NE(listed.err.find("--nonfinite looks at each record's nonfinite flag"),
            std::string::npos)
      << listed.err;
  const Result first = Viewer({r->dump_dir, "--first-nonfinite"});
  EXPECT_EQ(first.code, 0);
  EXPECT_EQ(first.out, "no output holds a NaN or an Inf\n");
  // The note is for --nonfinite only.
  const Result other = Viewer({r->dump_dir, "-t", "0x77"});
  EXPECT_EQ(other.code, 1);
  EXPECT_EQ(other.err.find("--nonfinite looks at"), std::string::npos) << other.err;
}

}  // namespace
}  // namespace argsdump
