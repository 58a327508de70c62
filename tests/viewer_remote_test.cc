// dump_viewer against a capture service (a real server on 127.0.0.1:0, the
// real GrpcSink): every command gives the same output, exit status and
// files as on the local directory of the same capture, finished or live.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "collector/grpc_sink.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"
#include "server/capture_service.h"
#include "tests/capture_reader.h"
#include "viewer/test_capture.h"
#include "viewer/viewer.h"

namespace argsdump {
namespace {

struct Result {
  int code;
  std::string out, err;
};

Result Viewer(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = RunViewer(args, out, err);
  return {code, out.str(), err.str()};
}

std::vector<std::string> Cat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

constexpr char kToken[] = "viewer-token";

class ViewerRemoteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CaptureServerOptions o;
    o.listen = "127.0.0.1:0";
    // A root of its own per test: captures of other tests are not listed.
    o.hub.root = TempPath(::testing::UnitTest::GetInstance()->current_test_info()->name());
    o.auth_token = kToken;
    auto server = CaptureServer::Start(o);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(server).value();
    target_ = absl::StrCat("127.0.0.1:", server_->port());
    token_file_ = TempPath("token");
    std::ofstream(token_file_) << kToken << "\n";
  }
  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::milliseconds(1000));
  }

  // Streams `capture` to the service; finished unless `finish` is false
  // (then the returned sink keeps the capture live and attached).
  std::unique_ptr<GrpcSink> Ingest(const std::string& name, const TestCapture& capture,
                                   bool finish = true) {
    GrpcSinkOptions o;
    o.target = target_;
    o.capture = name;
    o.info.set_name(name);
    o.info.set_level(v1::DUMP_LEVEL_FULL);
    *o.info.mutable_kernels() = capture.kernels();
    o.auth_token = kToken;
    auto sink = GrpcSink::Connect(o);
    EXPECT_TRUE(sink.ok()) << sink.status();
    if (!sink.ok()) return nullptr;
    EXPECT_TRUE((*sink)->WriteBatch(capture.RecordPtrs(), capture.PayloadViews()).ok());
    EXPECT_TRUE((*sink)->Flush().ok());  // acknowledged: what a reader of it sees
    if (finish) {
      EXPECT_TRUE((*sink)->Amend(capture.end()).ok());
      EXPECT_TRUE((*sink)->Finish(v1::CaptureCounters()).ok());
    }
    return std::move(sink).value();
  }

  std::vector<std::string> Remote(const std::string& name) const {
    return {"--server", target_, "--capture", name, "--auth_token_file", token_file_};
  }

  std::string Local(const std::string& name, const TestCapture& capture) {
    const std::string dir = TempPath(name + "/args_dump");
    EXPECT_TRUE(capture.WriteTo(dir, name).ok());
    return dir;
  }

  // The same command locally and remotely: the same status and text.
  void ExpectSame(const std::string& local, const std::string& capture,
                  const std::vector<std::string>& command) {
    SCOPED_TRACE(absl::StrCat("command: ", absl::StrJoin(command, " ")));
    const Result l = Viewer(Cat({local}, command));
    const Result r = Viewer(Cat(Remote(capture), command));
    EXPECT_EQ(l.code, r.code) << l.err << "\n" << r.err;
    EXPECT_EQ(l.out, r.out);
    EXPECT_EQ(l.err, r.err);
    EXPECT_FALSE(l.out.empty() && l.err.empty());
  }

  std::unique_ptr<CaptureServer> server_;
  std::string target_, token_file_;
};

const std::vector<std::vector<std::string>>& Commands() {
  static const auto* commands = new std::vector<std::vector<std::string>>{
      {},
      {"-t", "100000001"},
      {"-t", "0x0000000100000003", "-s", "after"},
      {"-s", "after", "-r", "output"},
      {"-r", "inout"},
      {"--func", "6"},
      {"-a", "2"},
      // --index exports (the reference's habit): both sides into one folder,
      // so that their "Saved:" lines are the same.
      {"-i", "5", "--out", TempPath("index_export")},
      {"-i", "11", "-r", "output", "--out", TempPath("index_export")},
      {"--stats"},
      {"--stats", "-t", "100000002"},
      {"--first-nonfinite"},
      {"--first-nonfinite", "-t", "100000003"},
      {"-t", "0x77"},  // nothing matches: the same suggestions
      {"--func", "99", "-s", "before"},
      {"--func", "-1"},  // args whose kernel is not known: a filter both sides take
      {"--geometry"},
      {"--geometry", "-s", "after", "-r", "inout"},
      {"--step", "5"},  // nothing matches: the same stages, roles, kinds and steps offered
  };
  return *commands;
}

TEST_F(ViewerRemoteTest, FinishedCaptureReadsTheSameAsItsLocalFiles) {
  const TestCapture scene = ViewerScene(false);
  const std::string local = Local("finished", scene);
  Ingest("finished", scene);
  for (const auto& command : Commands()) ExpectSame(local, "finished", command);
}

TEST_F(ViewerRemoteTest, ExportsTheSameFiles) {
  const TestCapture scene = ViewerScene(false);
  const std::string local = Local("exported", scene);
  Ingest("exported", scene);
  const std::string a = TempPath("export_local"), b = TempPath("export_remote");
  const Result l = Viewer({local, "--export", "--npy", "--stats", "--out", a});
  const Result r = Viewer(Cat(Remote("exported"), {"--export", "--npy", "--stats", "--out", b}));
  ASSERT_EQ(l.code, 0) << l.err;
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(absl::StrReplaceAll(l.out, {{a, "OUT"}}), absl::StrReplaceAll(r.out, {{b, "OUT"}}));
  const std::vector<std::string> files = {
      "txt/task_0x0000000100000001_after_out1.txt",
      "txt/task_0x0000000100000000_before_in2.txt",
      "txt/task_0x0000000100000003_after_out2.txt",
      "txt/task_0x0000000100000003_after_out3.txt",
      "npy/task_0000000100000001_after_out1.BFLOAT16_as_float32.npy",
      "npy/task_0000000100000002_before_in1.npy",
      "npy/task_0000000100000003_after_out0.FP8E4M3FN_as_float32.npy",
  };
  for (const std::string& f : files) {
    const std::string want = ReadFileOrEmpty(a + "/" + f);
    EXPECT_FALSE(want.empty()) << f;
    EXPECT_EQ(ReadFileOrEmpty(b + "/" + f), want) << f;
  }
  // Without --out, a remote export goes to ./<capture>/.
  char old[4096];
  ASSERT_NE(::getcwd(old, sizeof(old)), nullptr);
  ASSERT_EQ(::chdir(TempPath("").c_str()), 0);
  const Result here = Viewer(Cat(Remote("exported"), {"-i", "5", "--npy"}));
  EXPECT_EQ(here.code, 0) << here.err;
  EXPECT_NE(here.out.find("wrote 1 .npy files to exported/npy/"), std::string::npos) << here.out;
  // The capture's name comes from the service: a link in its way is
  // refused, not followed.
  const std::string elsewhere = FreshTempDir("export_elsewhere");
  ASSERT_EQ(std::system("rm -rf exported/npy"), 0);
  ASSERT_EQ(::symlink(elsewhere.c_str(), "exported/npy"), 0);
  const Result linked = Viewer(Cat(Remote("exported"), {"-i", "5", "--npy"}));
  ASSERT_EQ(::chdir(old), 0);
  EXPECT_EQ(linked.code, 2) << linked.out;
  EXPECT_NE(linked.err.find("exported/npy is a symbolic link"), std::string::npos) << linked.err;
  EXPECT_EQ(std::system(("test -z \"$(ls -A '" + elsewhere + "')\"").c_str()), 0);
}

TEST_F(ViewerRemoteTest, ComparesCapturesOnTheServiceAndAgainstLocalOnes) {
  const std::string golden = Local("golden", ViewerScene(false));
  const std::string actual = Local("actual", ViewerScene(true));
  Ingest("golden", ViewerScene(false));
  Ingest("actual", ViewerScene(true));
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{}, {"--atol", "1"}, {"-t", "100000001"}, {"-i", "5"}}) {
    SCOPED_TRACE(absl::StrJoin(extra, " "));
    const Result l = Viewer(Cat({actual, "--compare", golden}, extra));
    const Result r = Viewer(Cat(Remote("actual"), Cat({"--compare", "capture:golden"}, extra)));
    const Result mixed = Viewer(Cat(Remote("actual"), Cat({"--compare", golden}, extra)));
    EXPECT_EQ(l.code, r.code);
    EXPECT_EQ(l.out, r.out);
    EXPECT_EQ(l.out, mixed.out);
    EXPECT_EQ(l.code, mixed.code);
  }
  EXPECT_EQ(Viewer(Cat(Remote("actual"), {"--compare", "capture:golden"})).code, 1);
  EXPECT_EQ(Viewer(Cat(Remote("golden"), {"--compare", "capture:golden"})).code, 0);
  const Result missing = Viewer(Cat(Remote("actual"), {"--compare", "capture:nope"}));
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("capture 'nope' on " + target_ + ": no such capture"),
            std::string::npos)
      << missing.err;
}

// A live capture has no manifest yet: the viewer orders what arrived the
// way the manifest will, so it reads the same as the finished files.
// A capture whose device process died: the same crash summary and marks
// from GetCapture as from the local manifest.
TEST_F(ViewerRemoteTest, ACrashedCaptureReadsTheSameLocallyAndRemotely) {
  const TestCapture scene = CrashScene();
  ASSERT_NE(Ingest("crashed", scene), nullptr);
  const std::string local = Local("crashed", scene);
  for (const auto& command : std::vector<std::vector<std::string>>{
           {}, {"-t", "0x100000001"}, {"-s", "after"}, {"-t", "0x7"}}) {
    ExpectSame(local, "crashed", command);
  }
  const Result r = Viewer(Remote("crashed"));
  EXPECT_EQ(r.out.rfind("device crash: SIGSEGV at 0x0 (task 0x0000000100000001", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("  [crashed task]\n"), std::string::npos) << r.out;
}

TEST_F(ViewerRemoteTest, LiveCaptureReadsAsItsManifestWillBe) {
  const TestCapture scene = ViewerScene(false);
  const std::string local = Local("live", scene);
  std::unique_ptr<GrpcSink> sink = Ingest("live", scene, /*finish=*/false);
  ASSERT_NE(sink, nullptr);
  for (const auto& command : Commands()) ExpectSame(local, "live", command);
  const std::string golden = Local("live_golden", ViewerScene(true));
  const Result l = Viewer({local, "--compare", golden});
  const Result r = Viewer(Cat(Remote("live"), {"--compare", golden}));
  EXPECT_EQ(l.code, 1);
  EXPECT_EQ(l.out, r.out);
  ASSERT_TRUE(sink->Finish(v1::CaptureCounters()).ok());
  for (const auto& command : Commands()) ExpectSame(local, "live", command);
}

// A capture with a kernel table: --func NAME and --func-type select the
// same, and name the same kernels, locally and remotely, live and finished;
// an unknown name is the same exit 2.
TEST_F(ViewerRemoteTest, KernelNamesReadTheSameLocallyAndRemotely) {
  TestCapture scene = ViewerScene(false);
  scene.SetKernels(SceneKernels());
  const std::string local = Local("named", scene);
  const std::vector<std::vector<std::string>> commands = {
      {},
      {"--func", "saxpy"},
      {"--func", "6"},
      {"--func-type", "elementwise", "-s", "after"},
      {"-t", "100000001", "--func", "saxpy"},
      {"--stats", "--func", "strided_affine"},
      {"--first-nonfinite", "--func-type", "elementwise"},
      {"--func", "saxpy", "-t", "0x100000002"},  // nothing matches: names in the suggestions
      {"--func", "sxapy"},
      {"--func-type", "conv"},
  };
  std::unique_ptr<GrpcSink> sink = Ingest("named", scene, /*finish=*/false);
  ASSERT_NE(sink, nullptr);
  for (const auto& command : commands) ExpectSame(local, "named", command);
  ASSERT_TRUE(sink->Finish(v1::CaptureCounters()).ok());
  for (const auto& command : commands) ExpectSame(local, "named", command);
  const Result r = Viewer(Cat(Remote("named"), {"--func", "sxapy"}));
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "dump_viewer: --func 'sxapy': no kernel named \"sxapy\" in this capture; its "
                   "kernels: layer_norm, saxpy, strided_affine\n");
  const Result listed = Viewer(Cat(Remote("named"), {"--func", "saxpy"}));
  EXPECT_NE(listed.out.find("kernels:\n      6  saxpy (elementwise) [in FLOAT32, out, scalar]\n"),
            std::string::npos)
      << listed.out;
}

// Records of several steps: --step filters (on the service: in the query),
// and the listing says each record's step.
TEST_F(ViewerRemoteTest, StepsFilterTheSameLocallyAndRemotely) {
  TestCapture scene = ViewerScene(false);
  for (size_t i = 0; i < scene.records().size(); ++i) {
    scene.records()[i].set_step(static_cast<uint32_t>(i % 3));
    scene.records()[i].set_overflow(i % 4 == 0);
  }
  const std::string local = Local("stepped", scene);
  Ingest("stepped", scene);
  for (const std::vector<std::string>& command :
       {std::vector<std::string>{}, {"--step", "1"}, {"--step", "2", "-r", "output"},
        {"--step", "7"}, {"--step", "0", "--stats"}, {"--overflow"}, {"--overflow", "-s", "after"}}) {
    ExpectSame(local, "stepped", command);
  }
  const Result one = Viewer({local, "--step", "1"});
  ASSERT_EQ(one.code, 0) << one.err;
  int lines = 0;
  std::istringstream in(one.out);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line) && line.find(" args") == std::string::npos) {
    EXPECT_NE(line.find("step=1"), std::string::npos) << line;
    ++lines;
  }
  EXPECT_EQ(lines, 4);  // records 1, 4, 7, 10 of 12
  const Result flagged = Viewer({local, "--overflow"});
  EXPECT_EQ(std::count(flagged.out.begin(), flagged.out.end(), '\n'), 1 + 3 + 1)
      << flagged.out;  // header, records 0, 4, 8, count
  EXPECT_NE(flagged.out.find("overflow"), std::string::npos);
  EXPECT_NE(ReadFileOrEmpty(local + "/args_dump.json").find("\"step\": 2"), std::string::npos);
}

// Stored statistics (the stats dump mode): served with the records, shown
// by --stats for records without payload, and --nonfinite is a query.
TEST_F(ViewerRemoteTest, StoredStatsReadTheSameLocallyAndRemotely) {
  TestCapture scene;
  const uint64_t t0 = 0x100000000;
  for (uint64_t t = 0; t < 4; ++t) {
    // Stats only: the numbers, no payload.
    v1::ArgRecord& r = scene.Tensor(t0 + t, 1, v1::ROLE_OUTPUT, v1::STAGE_AFTER_COMPLETION,
                                    v1::DTYPE_FLOAT32, {2, 8}, "", 64);
    v1::TensorStats* s = r.mutable_stats();
    s->set_count(16);
    s->set_min(-1.0 - static_cast<double>(t));
    s->set_max(2.5 * static_cast<double>(t + 1));
    s->set_mean(0.125);
    s->set_l2(3.0);
    s->set_nan(t == 2 ? 3 : 0);
    s->set_pos_inf(t == 3 ? 1 : 0);
    s->set_zeros(t);
    // A plain record with its payload beside it.
    scene.Tensor(t0 + t, 0, v1::ROLE_INPUT, v1::STAGE_BEFORE_DISPATCH, v1::DTYPE_FLOAT32, {2},
                 TestCapture::Bytes(std::vector<float>{1, 2}));
  }
  const std::string local = Local("statsful", scene);
  std::unique_ptr<GrpcSink> live = Ingest("statsful", scene, /*finish=*/false);
  ASSERT_NE(live, nullptr);
  const std::vector<std::vector<std::string>> commands = {
      {}, {"--stats"}, {"--nonfinite"}, {"--nonfinite", "--stats"}, {"-t", "100000002", "--stats"}};
  for (const auto& command : commands) ExpectSame(local, "statsful", command);  // live
  ASSERT_TRUE(live->Finish(v1::CaptureCounters()).ok());
  for (const auto& command : commands) ExpectSame(local, "statsful", command);  // finished
  const Result nonfinite = Viewer({local, "--nonfinite"});
  EXPECT_EQ(nonfinite.code, 0);
  EXPECT_NE(nonfinite.out.find("2 args\n"), std::string::npos) << nonfinite.out;
  const Result stats = Viewer({local, "--stats", "-t", "100000002"});
  EXPECT_NE(stats.out.find("     -3             7.5           0.125             7.5       3       0       0         2  stored"),
            std::string::npos)
      << stats.out;
}

// --captures: what a CI step sees of the service, filtered by labels.
TEST_F(ViewerRemoteTest, ListsCapturesByLabel) {
  auto labelled = [&](const std::string& name, const std::string& target) {
    GrpcSinkOptions o;
    o.target = target_;
    o.capture = name;
    o.info.set_level(v1::DUMP_LEVEL_FULL);
    (*o.info.mutable_labels())["target"] = target;
    o.auth_token = kToken;
    auto sink = GrpcSink::Connect(o);
    ASSERT_TRUE(sink.ok()) << sink.status();
    const TestCapture c = ViewerScene(false);
    ASSERT_TRUE((*sink)->WriteBatch(c.RecordPtrs(), c.PayloadViews()).ok());
    v1::CaptureInfo end;
    (*end.mutable_labels())["steps"] = "3";
    ASSERT_TRUE((*sink)->Amend(end).ok());
    ASSERT_TRUE((*sink)->Finish(v1::CaptureCounters()).ok());
  };
  labelled("a_run", "//pkg:a_test");
  labelled("b_run", "//pkg:b_test");
  const std::string long_name = "MyKernelSuite.StridedAffineWithStartOffset-20261204-151500";
  labelled(long_name, "//pkg:long_test");
  const std::vector<std::string> server = {"--server", target_, "--auth_token_file", token_file_,
                                           "--captures"};
  const Result all = Viewer(server);
  EXPECT_EQ(all.code, 0) << all.err;
  EXPECT_NE(all.out.find("\n3 captures\n"), std::string::npos) << all.out;
  // Every column starts where its header does, a 58-character name too:
  // the state after the widest name, the numbers right-aligned under
  // theirs, the labels after them.
  const std::vector<std::string> lines = absl::StrSplit(all.out, '\n');
  ASSERT_GE(lines.size(), 4u) << all.out;
  const std::string& head = lines[0];
  ASSERT_EQ(head.find("capture"), 0u) << all.out;
  const size_t state = head.find("state"), records_end = head.find("records") + 7,
               bytes_end = head.find("bin_bytes") + 9, labels = head.find("labels");
  EXPECT_EQ(state, long_name.size() + 2) << all.out;
  for (size_t i = 1; i <= 3; ++i) {
    const std::string& line = lines[i];
    EXPECT_EQ(line.find("finished"), state) << line;
    EXPECT_EQ(line[records_end - 1], '2') << line;  // 12 records
    EXPECT_EQ(line[records_end], ' ') << line;
    EXPECT_NE(line[bytes_end - 1], ' ') << line;
    EXPECT_EQ(line[bytes_end], ' ') << line;
    EXPECT_EQ(line.find("steps=3,target=//pkg:"), labels) << line;
  }
  const Result a = Viewer(Cat(server, {"--label", "target=//pkg:a_test"}));
  EXPECT_EQ(a.code, 0) << a.err;
  EXPECT_NE(a.out.find("a_run"), std::string::npos) << a.out;
  EXPECT_EQ(a.out.find("b_run"), std::string::npos) << a.out;
  EXPECT_NE(a.out.find("a_run    finished       12"), std::string::npos) << a.out;
  EXPECT_NE(a.out.find("steps=3,target=//pkg:a_test"), std::string::npos) << a.out;
  EXPECT_NE(a.out.find("\n1 capture\n"), std::string::npos) << a.out;
  const Result none = Viewer(Cat(server, {"--label", "target=//pkg:c_test"}));
  EXPECT_EQ(none.code, 1);
  EXPECT_EQ(Viewer({"--captures"}).code, 2);
  EXPECT_EQ(Viewer(Cat(server, {"--label", "novalue"})).code, 2);
}

TEST_F(ViewerRemoteTest, ServiceErrorsAreClearAndExitTwo) {
  Ingest("there", ViewerScene(false));
  Result r = Viewer(Cat(Remote("nope"), {}));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("capture 'nope' on " + target_ +
                       ": no such capture (captures there: there)"),
            std::string::npos)
      << r.err;
  // Without the token.
  r = Viewer({"--server", target_, "--capture", "there"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("capture 'there' on " + target_ + ": GetCapture: "), std::string::npos)
      << r.err;
  // Nobody listening.
  const std::string gone = target_;
  server_->Shutdown(std::chrono::milliseconds(100));
  server_.reset();
  r = Viewer({"--server", gone, "--capture", "there", "--auth_token_file", token_file_});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("capture 'there' on " + gone + ": GetCapture: "), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace argsdump
