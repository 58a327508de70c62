// Tests with real processes: capture_server started on 127.0.0.1, port 0
// (or a port given again after a restart), batches of records for a sink,
// and what an uninterrupted capture of them looks like on disk.
#ifndef ARGSDUMP_TESTS_PROCESS_FIXTURES_H_
#define ARGSDUMP_TESTS_PROCESS_FIXTURES_H_

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "collector/grpc_sink.h"
#include "collector/local_sink.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/argsdump/v1/capture_service.grpc.pb.h"
#include "tests/testing/arg_records.h"
#include "tests/testing/record_batch.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {

// How long a step that waits on a child (its first line, its exit) may
// take before the test fails naming the step instead of hanging until the
// test runner's timeout, which says nothing about where it hung. Far above
// any step's real time, even under a sanitizer on a loaded machine.
inline constexpr int kChildStepLimitMs = 120 * 1000;

// Whether `fd` became readable within kChildStepLimitMs.
inline bool ReadableInTime(int fd) {
  struct pollfd p = {fd, POLLIN, 0};
  int n;
  do {
    n = ::poll(&p, 1, kChildStepLimitMs);
  } while (n < 0 && errno == EINTR);
  return n > 0;
}

inline std::string ServerBinary() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return absl::StrCat(srcdir ? srcdir : ".", "/argsdump/server/capture_server");
}

// capture_server in a child process; Start returns once it printed its port.
// SIGKILLed by the destructor if still running.
class ServerProcess {
 public:
  ~ServerProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      Wait();
    }
    if (log_ != nullptr) std::fclose(log_);
  }
  // Before Start: the server's log (stderr) comes to the test through a
  // pipe, for NextLogLine (it must be read: a full pipe stalls the server).
  void PipeLog() { pipe_log_ = true; }
  void Start(const std::string& root, const std::string& listen = "127.0.0.1:0",
             const std::vector<std::string>& flags = {}) {
    int out[2], err[2] = {-1, -1};
    ASSERT_EQ(::pipe(out), 0);
    if (pipe_log_) {
      ASSERT_EQ(::pipe(err), 0);
    }
    pid_ = ::fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      ::close(out[0]);
      ::close(out[1]);
      if (err[1] >= 0) {
        ::dup2(err[1], 2);
        ::close(err[0]);
        ::close(err[1]);
      }
      const std::string bin = ServerBinary();
      std::vector<std::string> args = {bin, "--listen=" + listen, "--root=" + root,
                                       "--shutdown_grace_ms=500"};
      args.insert(args.end(), flags.begin(), flags.end());
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(bin.c_str(), argv.data());
      _exit(127);
    }
    ::close(out[1]);
    if (err[1] >= 0) {
      ::close(err[1]);
      log_ = ::fdopen(err[0], "r");
    }
    // Blocks until the server prints its first line (or exits).
    if (!ReadableInTime(out[0])) {
      ::close(out[0]);
      FAIL() << "capture_server (pid " << pid_ << ") printed no line in "
             << kChildStepLimitMs / 1000 << " s";
    }
    FILE* f = ::fdopen(out[0], "r");
    char line[512] = {};
    ASSERT_NE(std::fgets(line, sizeof(line), f), nullptr) << "capture_server printed nothing";
    std::fclose(f);
    const std::string text = line;
    const size_t colon = text.find("127.0.0.1:");
    ASSERT_NE(colon, std::string::npos) << text;
    port_ = std::atoi(text.c_str() + colon + 10);
    ASSERT_GT(port_, 0) << text;
  }
  void Signal(int sig) { ::kill(pid_, sig); }
  // The child's wait status once it exited; a child still running after
  // kChildStepLimitMs is a failure naming it, and is SIGKILLed.
  int Wait() {
    int status = 0;
    const int child = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
    if (child >= 0) {
      if (!ReadableInTime(child)) {
        ADD_FAILURE() << "capture_server (pid " << pid_ << ") did not exit in "
                      << kChildStepLimitMs / 1000 << " s; killed";
        ::kill(pid_, SIGKILL);
      }
      ::close(child);
    }
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }
  std::string target() const { return absl::StrCat("127.0.0.1:", port_); }
  pid_t pid() const { return pid_; }

  // PipeLog: the next line the server logs, without its newline (blocks
  // until it logs one); false once it closed its stderr (it exited).
  bool NextLogLine(std::string* line) {
    line->clear();
    if (log_ == nullptr) return false;
    for (int c; (c = std::fgetc(log_)) != EOF;) {
      if (c == '\n') return true;
      line->push_back(static_cast<char>(c));
    }
    return !line->empty();
  }
  // Log lines up to the first containing `text`, which it returns ("" when
  // the server exited first); the lines before it go to `skipped`.
  std::string WaitForLogLine(const std::string& text, std::vector<std::string>* skipped = nullptr) {
    for (std::string line; NextLogLine(&line);) {
      if (line.find(text) != std::string::npos) return line;
      if (skipped != nullptr) skipped->push_back(line);
    }
    return "";
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  bool pipe_log_ = false;
  std::FILE* log_ = nullptr;
};


// Tasks [first_task, first_task + n), each a float32 input of 4096 bytes
// (every byte the task id's low byte), the payloads from *offset on.
inline RecordBatch MakeBatch(uint64_t first_task, int n, uint64_t* offset) {
  RecordBatch b(*offset);
  for (int i = 0; i < n; ++i) {
    b.Add(TensorRecord(first_task + i).Shape({1024}),
          std::string(4096, static_cast<char>(first_task + i)));
  }
  *offset = b.end_bin_offset();
  return b;
}

// The points of an ingest a server is killed at, and what its client sends
// around them: six batches of tasks 1000, 2000, ..., the fourth of 300
// records (a batch of several messages, killed in the middle of), the
// others of 40.
enum class KillAt { kAfterOpen, kAfterOneBatch, kAfterThreeBatches, kMidBatch, kDuringFinish };
inline std::vector<RecordBatch> KillBatches() {
  uint64_t offset = 0;
  std::vector<RecordBatch> batches;
  for (int b = 0; b < 6; ++b) {
    batches.push_back(MakeBatch(1000 + b * 1000, b == 3 ? 300 : 40, &offset));
  }
  return batches;
}
// Batches sent whole before the kill (kMidBatch: then the fourth races it).
inline int BatchesBeforeKill(KillAt at) {
  return at == KillAt::kAfterOpen       ? 0
         : at == KillAt::kAfterOneBatch ? 1
         : at == KillAt::kDuringFinish  ? 6
                                        : 3;
}
// The first batch the client sends once the server is back.
inline int FirstBatchAfterRestart(KillAt at) {
  return at == KillAt::kMidBatch ? 4 : BatchesBeforeKill(at);
}

inline absl::Status Send(CaptureSink* sink, const RecordBatch& b) {
  return sink->WriteBatch(b.RecordPtrs(), b.PayloadViews());
}

inline std::unique_ptr<GrpcSink> Connect(const std::string& target, const std::string& name,
                                  bool resume = false) {
  GrpcSinkOptions o;
  o.target = target;
  o.capture = name;
  o.info.set_level(v1::DUMP_LEVEL_FULL);
  o.resume = resume;
  auto sink = GrpcSink::Connect(o);
  EXPECT_TRUE(sink.ok()) << sink.status();
  return sink.ok() ? std::move(sink).value() : nullptr;
}

inline v1::CaptureSummary GetCapture(const std::string& target, const std::string& name) {
  auto stub = v1::CaptureService::NewStub(
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::GetCaptureRequest get;
  get.set_capture(name);
  v1::CaptureSummary summary;
  EXPECT_TRUE(stub->GetCapture(&ctx, get, &summary).ok());
  return summary;
}

// The batches written through the local store: what an uninterrupted
// capture's files are.
inline std::string WriteUninterrupted(const std::string& name,
                                      const std::vector<RecordBatch>& batches) {
  const std::string dir = TempPath(name) + "/args_dump";
  v1::CaptureInfo info;
  info.set_level(v1::DUMP_LEVEL_FULL);
  auto sink = LocalSink::Create(dir, info);
  EXPECT_TRUE(sink.ok());
  for (const RecordBatch& b : batches) EXPECT_TRUE(Send(sink->get(), b).ok());
  EXPECT_TRUE((*sink)->Finish(v1::CaptureCounters()).ok());
  return dir;
}

}  // namespace argsdump

#endif  // ARGSDUMP_TESTS_PROCESS_FIXTURES_H_
