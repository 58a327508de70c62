// Reading captures back in tests: the args a kernel received and produced
// as values, and gmock matchers over them, without parsing JSON.
//
//   absl::StatusOr<SessionResult> result = session->Finish();
//   if (!result->wrote_capture) GTEST_SKIP() << "the dump is off";
//   auto capture = argsdump::testing::Capture::Of(*result);
//   ASSERT_TRUE(capture.ok()) << capture.status();
//   EXPECT_THAT(*capture, argsdump::testing::HasNoNonFiniteOutputs());
//   auto y = capture->Get(ArgQuery().Func("saxpy").Stage(Stage::kAfterCompletion)
//                                   .Role(Role::kOutput).Step(2));
//   EXPECT_THAT(*y, argsdump::testing::IsCloseTo(expected, /*atol=*/1e-6));
//
// Values: every dtype decodes through the one dtype table (format/dtype.h):
// Values() as doubles (FP8/FP4/BF16/FP16 widened exactly), Integers() and
// Unsigned() exactly for integer and bool dtypes. A truncated tensor has
// the elements its payload holds (fewer than numel); a non-contiguous view
// is captured as its logical elements in row-major order (its strides and
// start_offset are metadata); a scalar has one element, its value.
// Comparisons follow dump_viewer --compare (NumPy isclose: |a - g| <= atol
// + rtol * |g|, NaN equals NaN, an infinity the same infinity).
#ifndef ARGSDUMP_SDK_TESTING_H_
#define ARGSDUMP_SDK_TESTING_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "device/abi.h"
#include "gmock/gmock.h"
#include "sdk/argsdump.h"

namespace argsdump {
class ArgSource;  // viewer/arg_source.h
namespace testing {

using Role = abi::ArgRole;     // kInput, kOutput, kInOut
using Stage = abi::Stage;      // kBeforeDispatch, kAfterCompletion
using Kind = abi::ArgKind;     // kTensor, kScalar

class Capture;

// One captured argument.
struct CapturedArg {
  uint64_t index = 0;    // position in the manifest (dump_viewer --index)
  uint64_t task_id = 0;
  uint32_t step = 0;
  std::vector<int64_t> func_ids;  // [-1] when unknown
  std::string func;      // the kernels' names ("mix_sum+mix_max"), when known
  Role role = Role::kInput;
  Stage stage = Stage::kBeforeDispatch;
  Kind kind = Kind::kTensor;
  uint32_t arg_index = 0;
  DataType dtype = DataType::kFloat32;
  std::vector<uint64_t> shape, strides;
  uint64_t start_offset = 0;
  bool is_contiguous = true;
  uint64_t numel = 0;
  bool truncated = false, overwritten = false, ambiguous = false, in_flight_snapshot = false,
       overflow = false;
  uint64_t bin_size = 0;  // payload bytes captured (0: metadata only)

  // The elements captured, in logical row-major order (see above).
  absl::StatusOr<std::vector<double>> Values() const;
  // Exactly, for integer and bool dtypes (InvalidArgument for floats).
  absl::StatusOr<std::vector<int64_t>> Integers() const;
  absl::StatusOr<std::vector<uint64_t>> Unsigned() const;
  // The payload bytes (logical contiguous, little endian; "" for scalars).
  absl::StatusOr<std::string> Bytes() const;
  // "task 0x0000000100000003 after output arg 2 (layer_norm) FLOAT32 [4,8]".
  std::string Describe() const;

 private:
  friend class Capture;
  friend class CaptureArgSource;
  struct Source;
  std::shared_ptr<Source> source_;
  size_t entry_ = 0;   // in source_'s entries
  std::string value_;  // scalars: the manifest's token
};
std::ostream& operator<<(std::ostream& os, const CapturedArg& arg);

// Which args: unset fields match everything.
class ArgQuery {
 public:
  ArgQuery& Task(uint64_t task_id) { task_ = task_id; return *this; }
  ArgQuery& Step(uint32_t step) { step_ = step; return *this; }
  ArgQuery& Stage(testing::Stage stage) { stage_ = stage; return *this; }
  ArgQuery& Role(testing::Role role) { role_ = role; return *this; }
  ArgQuery& Arg(uint32_t arg_index) { arg_ = arg_index; return *this; }
  ArgQuery& Kind(testing::Kind kind) { kind_ = kind; return *this; }
  // A kernel of the task, by name (the session's registry) or func_id.
  ArgQuery& Func(const std::string& name) { func_ = name; return *this; }
  ArgQuery& FuncId(uint16_t func_id) { func_id_ = func_id; return *this; }

  bool Matches(const CapturedArg& arg) const;
  std::string Describe() const;

 private:
  std::optional<uint64_t> task_;
  std::optional<uint32_t> step_, arg_;
  std::optional<testing::Stage> stage_;
  std::optional<testing::Role> role_;
  std::optional<testing::Kind> kind_;
  std::string func_;
  std::optional<uint16_t> func_id_;
};

// A capture, read back: a local folder (.../args_dump, a folder holding one
// or several), an outputs.zip or a folder in one, or a capture service.
// The args are listed when it is opened; payloads are read when asked for
// (from the files, or from the service: it must still be up then).
class Capture {
 public:
  // See viewer/capture_location.h for what a path may name.
  static absl::StatusOr<Capture> Open(const std::string& path);
  static absl::StatusOr<Capture> OpenRemote(const std::string& target, const std::string& name,
                                            const std::string& auth_token = "");
  // Where a finished session put its capture (FailedPrecondition when it
  // wrote none). Func names come from the capture's kernel table (and, for
  // a capture without one, from the session's kernels).
  static absl::StatusOr<Capture> Of(const SessionResult& result);

  const std::string& name() const { return name_; }
  const std::vector<CapturedArg>& args() const { return args_; }
  std::vector<CapturedArg> Find(const ArgQuery& query) const;
  // Exactly one: NotFound when none matches, FailedPrecondition naming
  // how many when several do.
  absl::StatusOr<CapturedArg> Get(const ArgQuery& query) const;
  const std::map<std::string, std::string>& labels() const { return labels_; }
  // Names for func_ids (Find by Func, CapturedArg::func).
  void SetKernelNames(const std::map<uint16_t, std::string>& names);

 private:
  // Lists every arg of `source` (its payloads are read later, through it).
  absl::Status Load(absl::StatusOr<std::unique_ptr<ArgSource>> source);
  std::string name_;
  std::vector<CapturedArg> args_;
  std::map<std::string, std::string> labels_;
  std::shared_ptr<CapturedArg::Source> source_;
  friend absl::StatusOr<std::optional<std::string>> FirstDivergence(const Capture&,
                                                                    const Capture&, double,
                                                                    double);
};

std::ostream& operator<<(std::ostream& os, const Capture& capture);

// Checks a capture folder against the manifest schema (proto/argsdump/v1/manifest.proto):
// args_dump.json parses strictly as argsdump.v1.ManifestFile (no field the
// schema does not name), its counters agree with its entries, entries are
// in manifest order, and every payload lies inside args.bin. DataLoss
// naming the file and what is wrong.
absl::Status CheckCaptureFiles(const std::string& dir);

// The first arg (manifest order) where `actual` and `golden` differ, as
// dump_viewer --compare's last line says it ("task 0x... after output arg
// 1: element [0, 3] = 2.5, golden 2"), or nullopt when they match (args on
// one side only are differences).
absl::StatusOr<std::optional<std::string>> FirstDivergence(const Capture& actual,
                                                           const Capture& golden,
                                                           double atol = 1e-8,
                                                           double rtol = 1e-5);

// Matchers. Failure messages name the arg, the first offending element and
// its value.
// No NaN or infinity in the arg's elements.
::testing::Matcher<const CapturedArg&> IsFinite();
// No NaN or infinity in any captured output (after_completion outputs and
// inouts) of the capture.
::testing::Matcher<const Capture&> HasNoNonFiniteOutputs();
// Element-wise within tolerance of `golden` (same count).
::testing::Matcher<const CapturedArg&> IsCloseTo(std::vector<double> golden, double atol = 1e-8,
                                                 double rtol = 1e-5);
// Every arg of the capture matches the golden capture's.
::testing::Matcher<const Capture&> MatchesCapture(const Capture& golden, double atol = 1e-8,
                                                  double rtol = 1e-5);

// For a test's own main: ConsumeDumpFlags, InitGoogleMock, and the
// listener that names sessions after the running test case
// (//sdk:gtest_main does exactly this).
absl::Status InitTestMain(int* argc, char** argv);

// A capture_server process on 127.0.0.1, port 0, for tests: started by
// Start, stopped (SIGTERM, waited for) by the destructor.
class CaptureServerProcess {
 public:
  // `binary`: the capture_server to run; empty: found in the test's
  // runfiles (data = ["@argsdump//server:capture_server"]). `root`: its
  // --root (created). Fails when it does not come up within 30 s.
  static absl::StatusOr<std::unique_ptr<CaptureServerProcess>> Start(
      const std::string& root, const std::string& binary = "");
  ~CaptureServerProcess();
  const std::string& address() const { return address_; }  // 127.0.0.1:<port>
  const std::string& root() const { return root_; }
  // SIGTERM and wait: the server finishes live captures first.
  absl::Status Stop();

 private:
  CaptureServerProcess() = default;
  int pid_ = -1;
  std::string address_, root_;
};

}  // namespace testing
}  // namespace argsdump

#endif  // ARGSDUMP_SDK_TESTING_H_
