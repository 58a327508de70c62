#include "viewer/index_lookup.h"

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "base/files.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"
#include "viewer/test_capture.h"
#include "viewer/viewer.h"

namespace argsdump {
namespace {

struct Result {
  int code;
  std::string out, err;
};

// dump_viewer DIR args..., with DIR spelled "DIR" in what it says (--index
// exports into the capture folder and names the files).
Result Viewer(const std::string& dir, std::vector<std::string> args) {
  args.insert(args.begin(), dir);
  std::ostringstream out, err;
  const int code = RunViewer(args, out, err);
  return {code, absl::StrReplaceAll(out.str(), {{dir, "DIR"}}),
          absl::StrReplaceAll(err.str(), {{dir, "DIR"}})};
}

std::string Read(const std::string& path) {
  absl::StatusOr<std::string> s = ReadFileToString(path);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : "";
}

void Write(const std::string& path, const std::string& bytes) {
  ASSERT_TRUE(WriteStringToFile(path, bytes).ok()) << path;
}

// `capture` written to <name>/indexed/args_dump, and its manifest and
// payloads, without args.index, to <name>/streamed/args_dump: the same
// capture the viewer must stream.
struct Pair {
  std::string indexed, streamed;
};
Pair WritePair(const TestCapture& capture, const std::string& name) {
  Pair p{TempPath(name + "/indexed/args_dump"), TempPath(name + "/streamed/args_dump")};
  RemoveTree(TempPath(name));
  EXPECT_TRUE(capture.WriteTo(p.indexed).ok());
  EXPECT_TRUE(CreateDirectories(p.streamed).ok());
  for (const char* f : {"args_dump.json", "args.bin"}) {
    Write(absl::StrCat(p.streamed, "/", f), Read(absl::StrCat(p.indexed, "/", f)));
  }
  return p;
}

const uint64_t kT0 = 0x100000000;

// Queries the index answers, and their neighbours: tasks present and
// absent (below, between, above every task), indices in and out of range,
// with other filters, and commands that read payloads.
std::vector<std::vector<std::string>> Queries() {
  std::vector<std::vector<std::string>> q;
  for (uint64_t t : {kT0 - 1, kT0, kT0 + 1, kT0 + 2, kT0 + 3, kT0 + 4, kT0 + 1000}) {
    const std::string task = absl::StrCat("0x", absl::Hex(t, absl::kZeroPad16));
    q.push_back({"-t", task});
    q.push_back({"-t", task, "-s", "after"});
    q.push_back({"-t", task, "-r", "output", "--stats"});
    q.push_back({"-t", task, "--kind", "scalar"});
    q.push_back({"-t", task, "--step", "1"});
    q.push_back({"--first-nonfinite", "-t", task});
  }
  for (int i : {0, 1, 3, 5, 8, 10, 11, 12, 100}) {
    q.push_back({"-i", std::to_string(i), "--stats"});
    q.push_back({"-i", std::to_string(i), "-t", "0x0000000100000001", "--stats"});
    q.push_back({"-i", std::to_string(i), "-s", "before", "--stats"});
  }
  return q;
}

// Every query, answered from `dir` (with its index, whatever state it is
// in) as from the streamed copy: the same output and status.
void ExpectSameAnswers(const std::string& dir, const Pair& p, const std::string& what) {
  for (const std::vector<std::string>& q : Queries()) {
    const Result want = Viewer(p.streamed, q);
    const Result got = Viewer(dir, q);
    const std::string name = absl::StrCat(what, ": ", absl::StrJoin(q, " "));
    EXPECT_EQ(got.code, want.code) << name << "\n" << got.err;
    EXPECT_EQ(got.out, want.out) << name;
    // The streamed copy says nothing of an index; a bad one may be noted.
    if (got.err != want.err) {
      EXPECT_NE(got.err.find("reading the manifest instead"), std::string::npos)
          << name << "\n" << got.err;
    }
  }
}

// A capture of two steps, with a task that spans both.
TestCapture StepScene() {
  TestCapture c;
  for (uint32_t step = 0; step < 2; ++step) {
    for (uint64_t t = 0; t < 3; ++t) {
      c.Add(TensorRecord(kT0 + t + step)
                .Step(step)
                .FuncIds({5})
                .Arg(0)
                .Role(v1::ROLE_INPUT)
                .Stage(v1::STAGE_BEFORE_DISPATCH)
                .Dtype(v1::DTYPE_INT8)
                .Shape({4})
                .Contiguous()
                .LogicalBytes(4),
            "abcd");
      c.Scalar(kT0 + t + step, 1, v1::DTYPE_INT32, 7 + t).set_step(step);
    }
  }
  return c;
}

TEST(IndexLookupTest, AnswersAsTheManifestStreamedDoes) {
  for (int scene = 0; scene < 3; ++scene) {
    const TestCapture capture =
        scene == 0 ? ViewerScene(false) : scene == 1 ? CrashScene() : StepScene();
    const Pair p = WritePair(capture, absl::StrCat("index_same_", scene));
    // The index is there and used.
    EntryFilter task;
    task.args.task_id = kT0 + 1;
    absl::StatusOr<IndexedSelection> s = SelectFromIndex(p.indexed, task);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_FALSE(s->entries.empty());
    ExpectSameAnswers(p.indexed, p, absl::StrCat("scene ", scene));
  }
}

TEST(IndexLookupTest, NoIndexIsNotFoundAndOtherFiltersAreNotAnswered) {
  const Pair p = WritePair(ViewerScene(false), "index_none");
  EntryFilter task;
  task.args.task_id = kT0;
  EXPECT_TRUE(absl::IsNotFound(SelectFromIndex(p.streamed, task).status()));
  EntryFilter stage;
  stage.args.stage = v1::STAGE_AFTER_COMPLETION;
  EXPECT_FALSE(IndexCanAnswer(stage));
}

TEST(IndexLookupTest, ATruncatedIndexIsNotUsed) {
  const Pair p = WritePair(ViewerScene(false), "index_truncated");
  const std::string index = Read(p.indexed + "/args.index");
  for (size_t keep : {size_t{0}, size_t{10}, size_t{64}, index.size() / 2, index.size() - 1}) {
    Write(p.indexed + "/args.index", index.substr(0, keep));
    EntryFilter task;
    task.args.task_id = kT0;
    const absl::Status s = SelectFromIndex(p.indexed, task).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << keep << ": " << s;
    const Result r = Viewer(p.indexed, {"-t", "0x0000000100000000"});
    EXPECT_EQ(r.out, Viewer(p.streamed, {"-t", "0x0000000100000000"}).out);
    EXPECT_NE(r.err.find("args.index"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("reading the manifest instead"), std::string::npos) << r.err;
  }
}

// Each byte of the index flipped in turn: whatever the damage, every
// answer is the streamed one (the damage noticed, or in bytes no answer
// depends on).
TEST(IndexLookupTest, AFlippedByteNeverChangesAnAnswer) {
  const Pair p = WritePair(StepScene(), "index_flipped");
  const std::string index = Read(p.indexed + "/args.index");
  const std::vector<std::vector<std::string>> queries = {
      {"-t", "0x0000000100000001"}, {"-t", "0x0000000100000003"}, {"-i", "5", "--stats"}};
  std::vector<Result> want;
  for (const auto& q : queries) want.push_back(Viewer(p.streamed, q));
  for (size_t i = 0; i < index.size(); ++i) {
    std::string bad = index;
    bad[i] = static_cast<char>(bad[i] ^ (i % 2 == 0 ? 0x01 : 0x80));
    Write(p.indexed + "/args.index", bad);
    for (size_t k = 0; k < queries.size(); ++k) {
      const Result got = Viewer(p.indexed, queries[k]);
      ASSERT_EQ(got.code, want[k].code) << "byte " << i << "\n" << got.err;
      ASSERT_EQ(got.out, want[k].out) << "byte " << i;
    }
  }
}

TEST(IndexLookupTest, AnotherCapturesIndexIsNotUsed) {
  const Pair p = WritePair(ViewerScene(false), "index_foreign");
  const Pair other = WritePair(CrashScene(), "index_foreign_other");
  const Pair steps = WritePair(StepScene(), "index_foreign_steps");
  for (const Pair* from : {&other, &steps}) {
    Write(p.indexed + "/args.index", Read(from->indexed + "/args.index"));
    EntryFilter task;
    task.args.task_id = kT0;
    const absl::Status s = SelectFromIndex(p.indexed, task).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    ExpectSameAnswers(p.indexed, p, "foreign index");
  }
}

// The manifest rewritten after the index (a stale index): a changed entry
// of the task asked for, and one task's entries dropped.
TEST(IndexLookupTest, AStaleIndexIsNotUsed) {
  const Pair p = WritePair(ViewerScene(false), "index_stale");
  const std::string manifest = Read(p.indexed + "/args_dump.json");
  const size_t at = manifest.find("\"arg_index\": 1");
  ASSERT_NE(at, std::string::npos);
  std::string changed = manifest;
  changed.replace(at, 14, "\"arg_index\": 4");
  Write(p.indexed + "/args_dump.json", changed);
  Write(p.streamed + "/args_dump.json", changed);
  ExpectSameAnswers(p.indexed, p, "changed entry");
}

}  // namespace
}  // namespace argsdump
