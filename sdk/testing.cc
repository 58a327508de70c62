#include "sdk/testing.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <tuple>
#include <type_traits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/files.h"
#include "collector/abi_convert.h"
#include "format/arg_filter.h"
#include "format/dtype.h"
#include "format/manifest_fields.h"
#include "google/protobuf/util/json_util.h"
#include "proto/argsdump/v1/manifest.pb.h"
#include "sdk/wiring.h"
#include "store/capture_store.h"
#include "format/names.h"
#include "viewer/arg_source.h"
#include "viewer/capture_compare.h"
#include "viewer/capture_location.h"
#include "format/compare.h"
#include "viewer/remote_source.h"

extern char** environ;

#ifndef ARGSDUMP_REPOSITORY
#define ARGSDUMP_REPOSITORY ""
#endif

namespace argsdump {
namespace testing {

// What every arg of one capture reads its payload through.
struct CapturedArg::Source {
  std::mutex mu;
  std::unique_ptr<ArgSource> reader;  // ReadPayload only, after the listing
  std::vector<ManifestEntry> entries;
};

namespace {

std::string Dims(const std::vector<uint64_t>& v) {
  return absl::StrCat("[", absl::StrJoin(v, ","), "]");
}

std::string Num(double v) { return absl::StrFormat("%.9g", v); }

const char* RoleText(Role r) {
  switch (r) {
    case Role::kInput: return "input";
    case Role::kOutput: return "output";
    case Role::kInOut: return "inout";
  }
  return "?";
}

// Where a CapturedArg keeps each simple field of the manifest
// (format/manifest_fields.h): its member, whose public name may differ from
// the manifest's, or nullptr for a field it does not carry. A simple field
// added to the list without a line here does not build, nor does a member
// whose type is not the field's.
#define ARGSDUMP_CAPTURED_ArgIndex &CapturedArg::arg_index
#define ARGSDUMP_CAPTURED_StartOffset &CapturedArg::start_offset
#define ARGSDUMP_CAPTURED_IsContiguous &CapturedArg::is_contiguous
#define ARGSDUMP_CAPTURED_Numel &CapturedArg::numel
#define ARGSDUMP_CAPTURED_ArgIndexAmbiguous &CapturedArg::ambiguous
#define ARGSDUMP_CAPTURED_InFlightSnapshot &CapturedArg::in_flight_snapshot
#define ARGSDUMP_CAPTURED_Overflow &CapturedArg::overflow
#define ARGSDUMP_CAPTURED_Nonfinite nullptr
#define ARGSDUMP_CAPTURED_Truncated &CapturedArg::truncated
#define ARGSDUMP_CAPTURED_Overwritten &CapturedArg::overwritten
#define ARGSDUMP_CAPTURED_BinOffset nullptr
#define ARGSDUMP_CAPTURED_BinSize &CapturedArg::bin_size
#define ARGSDUMP_CAPTURED_DispatchNs nullptr  // task times: not in the SDK's CapturedArg
#define ARGSDUMP_CAPTURED_CompleteNs nullptr

template <typename T>
void CopySimpleField(CapturedArg* a, T CapturedArg::*member, const T& value) {
  a->*member = value;
}
template <typename T>
void CopySimpleField(CapturedArg*, std::nullptr_t, const T&) {}

absl::StatusOr<CapturedArg> FromEntry(const ManifestEntry& e) {
  CapturedArg a;
  a.index = e.index;
  a.task_id = e.task_id;
  a.step = e.step;
  a.func_ids = e.func_ids;
  // The readers refuse other values (manifest_reader.h, EntryFromRecord).
  switch (e.role) {
    case v1::ROLE_INPUT: a.role = Role::kInput; break;
    case v1::ROLE_OUTPUT: a.role = Role::kOutput; break;
    case v1::ROLE_INOUT: a.role = Role::kInOut; break;
    default: return absl::DataLossError(absl::StrCat("entry ", e.index, ": role ", e.role));
  }
  if (e.stage != v1::STAGE_BEFORE_DISPATCH && e.stage != v1::STAGE_AFTER_COMPLETION) {
    return absl::DataLossError(absl::StrCat("entry ", e.index, ": stage ", e.stage));
  }
  a.stage = e.stage == v1::STAGE_BEFORE_DISPATCH ? Stage::kBeforeDispatch : Stage::kAfterCompletion;
  if (!e.is_tensor() && !e.is_scalar()) {
    return absl::DataLossError(absl::StrCat("entry ", e.index, ": kind ", e.kind));
  }
  a.kind = e.is_tensor() ? Kind::kTensor : Kind::kScalar;
  a.dtype = e.dtype;
  a.shape = e.shape;
  a.strides = e.strides;
#define ARGSDUMP_COPY(id, style, member) CopySimpleField(&a, ARGSDUMP_CAPTURED_##id, e.member);
  ARGSDUMP_SIMPLE_MANIFEST_FIELDS(ARGSDUMP_COPY)
#undef ARGSDUMP_COPY
  return a;
}

}  // namespace

// A Capture as an ArgSource (for JoinCaptures): its args in order.
class CaptureArgSource : public ArgSource {
 public:
  explicit CaptureArgSource(const Capture& c, const std::vector<CapturedArg>& args,
                            std::shared_ptr<CapturedArg::Source> source)
      : name_(c.name()), args_(args), source_(std::move(source)) {}
  std::string name() const override { return name_; }
  absl::StatusOr<bool> Next(ManifestEntry* e) override {
    if (next_ == args_.size()) return false;
    *e = source_->entries[args_[next_++].entry_];
    return true;
  }
  absl::Status ReadPayload(const ManifestEntry& e, std::string* bytes) override {
    if (!e.is_tensor() || e.bin_size == 0) {
      bytes->clear();
      return absl::OkStatus();
    }
    std::lock_guard<std::mutex> lock(source_->mu);
    return source_->reader->ReadPayload(e, bytes);
  }
  absl::StatusOr<SomeValues> Suggestions() override { return SomeValues(); }
  std::map<std::string, std::string> Labels() const override { return {}; }

 private:
  const std::string name_;
  const std::vector<CapturedArg>& args_;
  std::shared_ptr<CapturedArg::Source> source_;
  size_t next_ = 0;
};

// ---- CapturedArg -----------------------------------------------------------

absl::StatusOr<std::string> CapturedArg::Bytes() const {
  if (kind == Kind::kScalar) return std::string();
  if (source_ == nullptr) return absl::FailedPreconditionError("this arg was not read from a capture");
  if (bin_size == 0) return std::string();
  std::string bytes;
  std::lock_guard<std::mutex> lock(source_->mu);
  if (absl::Status s = source_->reader->ReadPayload(source_->entries[entry_], &bytes); !s.ok()) {
    return s;
  }
  return bytes;
}

absl::StatusOr<std::vector<double>> CapturedArg::Values() const {
  if (kind == Kind::kScalar) {
    double v;
    if (!ScalarAsDouble(value_, &v)) {
      return absl::DataLossError(absl::StrCat(Describe(), ": value '", value_, "' is not a number"));
    }
    // The manifest prints a FLOAT32 with the digits that round-trip the
    // float: its value is the float they name, not the nearest double.
    if (dtype == DataType::kFloat32) v = static_cast<float>(v);
    return std::vector<double>{v};
  }
  absl::StatusOr<std::string> bytes = Bytes();
  if (!bytes.ok()) return bytes.status();
  const uint64_t n = ElementsIn(source_ ? source_->entries[entry_] : ManifestEntry(), bytes->size());
  std::vector<double> out(n);
  const auto* p = reinterpret_cast<const uint8_t*>(bytes->data());
  for (uint64_t i = 0; i < n; ++i) out[i] = ElementAsDouble(dtype, p, i);
  return out;
}

namespace {

// The elements of an integer or bool arg, exactly, as T (int64_t or
// uint64_t): OutOfRange for one T cannot hold.
template <typename T>
absl::StatusOr<std::vector<T>> ExactElements(const CapturedArg& a, const std::string& value,
                                             absl::StatusOr<std::string> bytes,
                                             const ManifestEntry* entry) {
  constexpr bool kSigned = std::is_signed_v<T>;
  const char* other = kSigned ? "Unsigned()" : "Integers()";
  if (KindOf(a.dtype) == ElementKind::kFloat) {
    return absl::InvalidArgumentError(absl::StrCat(a.Describe(), ": ",
                                                   std::string(DataTypeName(a.dtype)),
                                                   " elements are not integers; use Values()"));
  }
  if (a.kind == Kind::kScalar) {
    T v;
    if (value == "true" || value == "false") return std::vector<T>{value == "true"};
    if (!absl::SimpleAtoi(value, &v)) {
      return absl::OutOfRangeError(absl::StrCat(a.Describe(), ": ", value, " is not a",
                                                kSigned ? "n int64" : " uint64", " (use ", other,
                                                ")"));
    }
    return std::vector<T>{v};
  }
  if (!bytes.ok()) return bytes.status();
  const uint64_t n = ElementsIn(*entry, bytes->size());
  std::vector<T> out(n);
  const auto* p = reinterpret_cast<const uint8_t*>(bytes->data());
  for (uint64_t i = 0; i < n; ++i) {
    const bool fits = kSigned ? a.dtype != DataType::kUint64 || ElementAsUint64(a.dtype, p, i) <= INT64_MAX
                              : KindOf(a.dtype) != ElementKind::kSigned || ElementAsInt64(a.dtype, p, i) >= 0;
    if (!fits) {
      return absl::OutOfRangeError(absl::StrCat(
          a.Describe(), ": element ", i, " = ",
          kSigned ? absl::StrCat(ElementAsUint64(a.dtype, p, i)) : absl::StrCat(ElementAsInt64(a.dtype, p, i)),
          kSigned ? " is beyond int64" : " is negative", " (use ", other, ")"));
    }
    out[i] = kSigned ? static_cast<T>(ElementAsInt64(a.dtype, p, i))
                     : static_cast<T>(ElementAsUint64(a.dtype, p, i));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> CapturedArg::Integers() const {
  return ExactElements<int64_t>(*this, value_, Bytes(),
                                source_ ? &source_->entries[entry_] : nullptr);
}

absl::StatusOr<std::vector<uint64_t>> CapturedArg::Unsigned() const {
  return ExactElements<uint64_t>(*this, value_, Bytes(),
                                 source_ ? &source_->entries[entry_] : nullptr);
}

std::string CapturedArg::Describe() const {
  return absl::StrCat("task ", TaskIdHex(task_id), step != 0 ? absl::StrCat(" step ", step) : "",
                      " ", stage == Stage::kBeforeDispatch ? "before" : "after", " ",
                      RoleText(role), " arg ", arg_index, func.empty() ? "" : " (" + func + ")",
                      " ", std::string(DataTypeName(dtype)), " ",
                      kind == Kind::kScalar ? absl::StrCat("= ", value_) : Dims(shape),
                      truncated ? " truncated" : "");
}

std::ostream& operator<<(std::ostream& os, const CapturedArg& arg) {
  return os << arg.Describe();
}

std::ostream& operator<<(std::ostream& os, const Capture& capture) {
  return os << "capture " << capture.name() << " (" << capture.args().size() << " args)";
}

// ---- ArgQuery ----------------------------------------------------------------

namespace {

v1::Kind ProtoKind(Kind kind) { return kind == Kind::kTensor ? v1::KIND_TENSOR : v1::KIND_SCALAR; }

// A captured arg as a record the filter (format/arg_filter.h) tests, for
// the subjects ArgQuery sets.
struct CapturedArgView {
  const CapturedArg& a;
  uint64_t TaskId() const { return a.task_id; }
  uint32_t Step() const { return a.step; }
  int Stage() const { return ToProtoStage(a.stage); }
  int Role() const { return ToProtoRole(a.role); }
  uint32_t ArgIndex() const { return a.arg_index; }
  int Kind() const { return ProtoKind(a.kind); }
  FuncIdRange<std::vector<int64_t>::const_iterator> FuncId() const {
    return ManifestFuncIdRange(a.func_ids);
  }
};

}  // namespace

// The one filter's rule (format/arg_filter.h) for every field it has; the
// kernel by name is the session's registry's, so it is checked here.
bool ArgQuery::Matches(const CapturedArg& a) const {
  ArgFilter f;
  f.task_id = task_;
  f.step = step_;
  if (stage_) f.stage = ToProtoStage(*stage_);
  if (role_) f.role = ToProtoRole(*role_);
  f.arg_index = arg_;
  if (kind_) f.kind = ProtoKind(*kind_);
  f.func_id = func_id_;
  const CapturedArgView v{a};
  if (!f.AdmitsAt<ManifestField::kTaskId>(v) || !f.AdmitsAt<ManifestField::kStep>(v) ||
      !f.AdmitsAt<ManifestField::kStage>(v) || !f.AdmitsAt<ManifestField::kRole>(v) ||
      !f.AdmitsAt<ManifestField::kArgIndex>(v) || !f.AdmitsAt<ManifestField::kKind>(v) ||
      !f.AdmitsAt<ManifestField::kFuncId>(v)) {
    return false;
  }
  if (!func_.empty()) {
    bool named = false;
    for (absl::string_view name : absl::StrSplit(a.func, '+')) named = named || name == func_;
    if (!named) return false;
  }
  return true;
}

std::string ArgQuery::Describe() const {
  std::vector<std::string> parts;
  if (task_) parts.push_back(absl::StrCat("task ", TaskIdHex(*task_)));
  if (step_) parts.push_back(absl::StrCat("step ", *step_));
  if (stage_) parts.push_back(*stage_ == Stage::kBeforeDispatch ? "before" : "after");
  if (role_) parts.push_back(RoleText(*role_));
  if (arg_) parts.push_back(absl::StrCat("arg ", *arg_));
  if (kind_) parts.push_back(*kind_ == Kind::kTensor ? "tensor" : "scalar");
  if (!func_.empty()) parts.push_back(absl::StrCat("func ", func_));
  if (func_id_) parts.push_back(absl::StrCat("func_id ", *func_id_));
  return parts.empty() ? "any arg" : absl::StrJoin(parts, " ");
}

// ---- Capture -------------------------------------------------------------------

absl::Status Capture::Load(absl::StatusOr<std::unique_ptr<ArgSource>> opened) {
  if (!opened.ok()) return opened.status();
  auto s = std::make_shared<CapturedArg::Source>();
  s->reader = std::move(opened).value();
  ManifestEntry e;
  for (;;) {
    absl::StatusOr<bool> got = s->reader->Next(&e);
    if (!got.ok()) return got.status();
    if (!*got) break;
    absl::StatusOr<CapturedArg> a = FromEntry(e);
    if (!a.ok()) {
      return absl::DataLossError(absl::StrCat(s->reader->name(), ": ", a.status().message()));
    }
    a->value_ = e.value;
    a->entry_ = s->entries.size();
    a->source_ = s;
    s->entries.push_back(e);
    args_.push_back(*std::move(a));
  }
  labels_ = s->reader->Labels();
  // Names from the capture's own kernel table (a session's result may
  // name them again, the same).
  std::map<uint16_t, std::string> names;
  for (const v1::Kernel& k : s->reader->Kernels()) {
    if (k.func_id() <= 0xFFFF) names[static_cast<uint16_t>(k.func_id())] = k.name();
  }
  if (!names.empty()) SetKernelNames(names);
  source_ = std::move(s);
  return absl::OkStatus();
}

absl::StatusOr<Capture> Capture::Open(const std::string& path) {
  absl::StatusOr<LocatedCapture> at = LocateCapture(path);
  if (!at.ok()) return at.status();
  Capture c;
  c.name_ = CapturePlace(at->name);  // where it is once a bazel test ended
  if (absl::Status s = c.Load(OpenLocalCapture(at->dir, Selection())); !s.ok()) return s;
  return c;
}

absl::StatusOr<Capture> Capture::OpenRemote(const std::string& target, const std::string& name,
                                            const std::string& auth_token) {
  RemoteCapture r;
  r.target = target;
  r.capture = name;
  r.auth_token = auth_token;
  Capture c;
  c.name_ = absl::StrCat(target, "/", name);
  if (absl::Status s = c.Load(OpenRemoteCapture(r, Selection())); !s.ok()) return s;
  return c;
}

absl::StatusOr<Capture> Capture::Of(const SessionResult& result) {
  absl::StatusOr<Capture> c;
  if (!result.wrote_capture) {
    return absl::FailedPreconditionError(absl::StrCat(
        "session ", result.name, " wrote no capture (dump level ", result.dump.level,
        result.dump.level == 0 ? ": the dump is off" : ": nothing was selected", ")"));
  }
  if (!result.capture_server.empty()) {
    std::string token;
    if (!result.dump.auth_token_file.empty()) {
      // Checked when the session's configuration was resolved; a file
      // changed since is named here rather than read without a token.
      absl::StatusOr<std::string> read = ReadTokenFile(result.dump.auth_token_file);
      if (!read.ok()) return read.status();
      token = *std::move(read);
    }
    c = OpenRemote(result.capture_server, result.capture_name, token);
  } else {
    c = Open(result.capture_dir);
  }
  if (c.ok()) c->SetKernelNames(result.kernels);
  return c;
}

void Capture::SetKernelNames(const std::map<uint16_t, std::string>& names) {
  for (CapturedArg& a : args_) {
    std::vector<std::string> parts;
    for (int64_t id : a.func_ids) {
      auto it = id >= 0 && id <= 0xFFFF ? names.find(static_cast<uint16_t>(id)) : names.end();
      parts.push_back(it != names.end() ? it->second : absl::StrCat("func_", id));
    }
    a.func = absl::StrJoin(parts, "+");
  }
}

std::vector<CapturedArg> Capture::Find(const ArgQuery& query) const {
  std::vector<CapturedArg> out;
  for (const CapturedArg& a : args_) {
    if (query.Matches(a)) out.push_back(a);
  }
  return out;
}

absl::StatusOr<CapturedArg> Capture::Get(const ArgQuery& query) const {
  std::vector<CapturedArg> found = Find(query);
  if (found.empty()) {
    return absl::NotFoundError(absl::StrCat(name_, ": no arg matches ", query.Describe(), " (of ",
                                            args_.size(), " args)"));
  }
  if (found.size() > 1) {
    std::vector<std::string> some;
    for (size_t i = 0; i < found.size() && i < 4; ++i) some.push_back(found[i].Describe());
    return absl::FailedPreconditionError(absl::StrCat(
        name_, ": ", found.size(), " args match ", query.Describe(), ", not one (",
        absl::StrJoin(some, "; "), found.size() > 4 ? "; ..." : "", ")"));
  }
  return found.front();
}

absl::StatusOr<std::optional<std::string>> FirstDivergence(const Capture& actual,
                                                           const Capture& golden, double atol,
                                                           double rtol) {
  if (actual.source_ == nullptr || golden.source_ == nullptr) {
    return absl::FailedPreconditionError("FirstDivergence: a capture that was not opened");
  }
  CaptureArgSource a(actual, actual.args_, actual.source_);
  CaptureArgSource g(golden, golden.args_, golden.source_);
  const Tolerance tol{atol, rtol};
  std::optional<std::string> first;
  const absl::Status stop = absl::CancelledError("found");
  absl::Status s = JoinCaptures(a, g, [&](const ManifestEntry* x, const ManifestEntry* y) {
    if (y == nullptr) {
      first = absl::StrCat(WhereIs(*x), ": not in the golden");
      return stop;
    }
    if (x == nullptr) {
      first = absl::StrCat(WhereIs(*y), ": only in the golden");
      return stop;
    }
    std::string px, py;
    if (absl::Status r = a.ReadPayload(*x, &px); !r.ok()) return r;
    if (absl::Status r = g.ReadPayload(*y, &py); !r.ok()) return r;
    const ArgVerdict v = CompareArg(*x, px, *y, py, tol);
    if (!v.differs) return absl::OkStatus();
    first = v.detail;
    return stop;
  });
  if (!s.ok() && !first) return s;
  return first;
}

absl::Status CheckCaptureFiles(const std::string& dir) {
  const std::string path = dir + "/args_dump.json";
  // A manifest is as long as its capture: read whole, a regular file only.
  absl::StatusOr<std::string> text = ReadFileToString(path, kUnboundedFileBytes);
  if (!text.ok()) return absl::NotFoundError(text.status().message());
  v1::ManifestFile m;
  google::protobuf::util::JsonParseOptions strict;
  strict.ignore_unknown_fields = false;
  if (auto s = google::protobuf::util::JsonStringToMessage(*text, &m, strict); !s.ok()) {
    return absl::DataLossError(absl::StrCat(path, ": not the manifest schema: ",
                                            std::string(s.message())));
  }
  auto bad = [&](const std::string& what) {
    return absl::DataLossError(absl::StrCat(path, ": ", what));
  };
  if (m.run_dir() != "args_dump" || m.bin_format().type() != "logical_contiguous" ||
      m.bin_format().byte_order() != "little_endian") {
    return bad("run_dir / bin_format are not the reference's");
  }
  // Level 0 holds records only with the overflow check on (dump_scope).
  if (m.dump_args_level() > 3 || (m.dump_args_level() == 0 && !m.dump_scope().overflow())) {
    return bad(absl::StrCat("dump_args_level ", m.dump_args_level(),
                            m.dump_args_level() == 0 ? " without the overflow check" : ""));
  }
  uint64_t before = 0, after = 0, input = 0, output = 0, inout = 0, truncated = 0, bytes = 0;
  const bool has_bin = m.bin_file().has_string_value();
  if (has_bin && m.bin_file().string_value() != "args.bin") return bad("bin_file is not args.bin");
  struct stat st;
  const uint64_t bin_size =
      ::stat((dir + "/args.bin").c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  std::optional<std::tuple<std::string, int, uint32_t, int>> last;
  for (int i = 0; i < m.args_size(); ++i) {
    const v1::ManifestEntry& e = m.args(i);
    const std::string at = absl::StrCat("args[", i, "]: ");
    if (e.task_id().size() != 18 || e.task_id().rfind("0x", 0) != 0 ||
        !ParseTaskIdHex(e.task_id())) {
      return bad(at + "task_id '" + e.task_id() + "' is not 0x + 16 hex digits");
    }
    const std::optional<v1::Stage> stage = StageFromName(e.stage());
    const std::optional<v1::Role> role = RoleFromName(e.role());
    if (!stage || !role || !KindFromName(e.kind()) ||
        !DataTypeFromName(e.dtype()) || e.dtype() != absl::AsciiStrToUpper(e.dtype())) {
      return bad(at + "stage/role/kind/dtype not the schema's");
    }
    const auto key = std::make_tuple(e.task_id(), static_cast<int>(*stage), e.arg_index(),
                                     static_cast<int>(*role));
    if (last && key < *last) return bad(at + "out of manifest order (task_id, stage, arg_index, role)");
    last = key;
    before += *stage == v1::STAGE_BEFORE_DISPATCH;
    after += *stage == v1::STAGE_AFTER_COMPLETION;
    input += *role == v1::ROLE_INPUT;
    output += *role == v1::ROLE_OUTPUT;
    inout += *role == v1::ROLE_INOUT;
    truncated += e.truncated();
    bytes += e.bin_size();
    uint64_t numel = 1;
    for (uint32_t d : e.shape()) numel *= d;
    if (e.kind() == "tensor" && numel != e.numel()) return bad(at + "numel is not its shape's");
    if (e.shape_size() != e.strides_size()) return bad(at + "shape and strides differ in length");
    if (e.bin_size() > 0 && (!has_bin || e.bin_offset() + e.bin_size() > bin_size)) {
      return bad(at + absl::StrCat("payload ", e.bin_offset(), "+", e.bin_size(),
                                   " is not inside args.bin (", bin_size, " bytes)"));
    }
  }
  if (m.total_args() != static_cast<uint64_t>(m.args_size()) || m.before_dispatch() != before ||
      m.after_completion() != after || m.input_args() != input || m.output_args() != output ||
      m.inout_args() != inout || m.truncated_args() != truncated || m.payload_bytes() != bytes) {
    return bad("the summary counters disagree with the entries");
  }
  return absl::OkStatus();
}

// ---- Matchers ------------------------------------------------------------------

namespace {

// The first non-finite element of `values`, as "element [i, j] = nan".
std::optional<std::string> FirstNonFinite(const CapturedArg& a, const std::vector<double>& values,
                                          uint64_t* count) {
  std::optional<std::string> first;
  *count = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    if (std::isfinite(values[i])) continue;
    ++*count;
    if (!first) {
      first = absl::StrCat("element ",
                           a.kind == Kind::kScalar ? "[]" : ElementPosition(a.shape, i), " = ",
                           Num(values[i]));
    }
  }
  return first;
}

class IsFiniteMatcher : public ::testing::MatcherInterface<const CapturedArg&> {
 public:
  bool MatchAndExplain(const CapturedArg& a,
                       ::testing::MatchResultListener* listener) const override {
    absl::StatusOr<std::vector<double>> values = a.Values();
    if (!values.ok()) {
      *listener << "cannot be read: " << values.status().message();
      return false;
    }
    uint64_t count;
    const std::optional<std::string> first = FirstNonFinite(a, *values, &count);
    if (!first) return true;
    *listener << "holds " << count << " NaN/Inf of " << values->size() << " elements; the first: "
              << *first;
    return false;
  }
  void DescribeTo(std::ostream* os) const override { *os << "holds no NaN or infinity"; }
  void DescribeNegationTo(std::ostream* os) const override { *os << "holds a NaN or an infinity"; }
};

class NoNonFiniteOutputsMatcher : public ::testing::MatcherInterface<const Capture&> {
 public:
  bool MatchAndExplain(const Capture& c,
                       ::testing::MatchResultListener* listener) const override {
    uint64_t bad_args = 0, checked = 0;
    std::string first;
    for (const CapturedArg& a : c.args()) {
      if (a.stage != Stage::kAfterCompletion || a.role == Role::kInput || a.kind != Kind::kTensor) {
        continue;
      }
      ++checked;
      absl::StatusOr<std::vector<double>> values = a.Values();
      if (!values.ok()) {
        *listener << a.Describe() << " cannot be read: " << values.status().message();
        return false;
      }
      uint64_t count;
      const std::optional<std::string> f = FirstNonFinite(a, *values, &count);
      if (!f) continue;
      if (bad_args++ == 0) first = absl::StrCat(a.Describe(), ": ", count, " NaN/Inf, the first ", *f);
    }
    if (bad_args == 0) {
      *listener << checked << " outputs checked";
      return true;
    }
    *listener << bad_args << " of " << checked << " outputs hold a NaN or an infinity; the first: "
              << first;
    return false;
  }
  void DescribeTo(std::ostream* os) const override {
    *os << "has no NaN or infinity in any captured output";
  }
  void DescribeNegationTo(std::ostream* os) const override {
    *os << "has a NaN or an infinity in a captured output";
  }
};

class IsCloseToMatcher : public ::testing::MatcherInterface<const CapturedArg&> {
 public:
  IsCloseToMatcher(std::vector<double> golden, Tolerance t) : golden_(std::move(golden)), t_(t) {}
  bool MatchAndExplain(const CapturedArg& a,
                       ::testing::MatchResultListener* listener) const override {
    absl::StatusOr<std::vector<double>> values = a.Values();
    if (!values.ok()) {
      *listener << "cannot be read: " << values.status().message();
      return false;
    }
    if (values->size() != golden_.size()) {
      *listener << "has " << values->size() << " elements"
                << (a.truncated ? " (truncated)" : "") << ", the golden " << golden_.size();
      return false;
    }
    const ElementDiff d = CompareSequences(*values, golden_, t_);
    if (d.mismatches == 0) return true;
    *listener << d.mismatches << " of " << d.compared << " elements differ beyond atol " << t_.atol
              << " + rtol " << t_.rtol << " * |golden|; the first: element "
              << (a.kind == Kind::kScalar ? "[]" : ElementPosition(a.shape, d.first_mismatch))
              << " = " << Num(d.first_actual) << ", golden " << Num(d.first_golden)
              << " (max abs error " << Num(d.max_abs) << ", max rel error " << Num(d.max_rel)
              << ")";
    return false;
  }
  void DescribeTo(std::ostream* os) const override {
    *os << "is within atol " << t_.atol << " + rtol " << t_.rtol << " * |golden| of the "
        << golden_.size() << " golden values";
  }
  void DescribeNegationTo(std::ostream* os) const override {
    *os << "is not within atol " << t_.atol << " + rtol " << t_.rtol << " * |golden| of the "
        << golden_.size() << " golden values";
  }

 private:
  const std::vector<double> golden_;
  const Tolerance t_;
};

class MatchesCaptureMatcher : public ::testing::MatcherInterface<const Capture&> {
 public:
  MatchesCaptureMatcher(Capture golden, double atol, double rtol)
      : golden_(std::move(golden)), atol_(atol), rtol_(rtol) {}
  bool MatchAndExplain(const Capture& c,
                       ::testing::MatchResultListener* listener) const override {
    absl::StatusOr<std::optional<std::string>> first = FirstDivergence(c, golden_, atol_, rtol_);
    if (!first.ok()) {
      *listener << "cannot be compared: " << first.status().message();
      return false;
    }
    if (!*first) return true;
    *listener << "first divergence: " << **first;
    return false;
  }
  void DescribeTo(std::ostream* os) const override {
    *os << "matches capture " << golden_.name() << " (atol " << atol_ << ", rtol " << rtol_ << ")";
  }
  void DescribeNegationTo(std::ostream* os) const override {
    *os << "differs from capture " << golden_.name();
  }

 private:
  const Capture golden_;
  const double atol_, rtol_;
};

class TestCaseListener : public ::testing::EmptyTestEventListener {
  void OnTestStart(const ::testing::TestInfo& info) override {
    SetRunningTestCase(absl::StrCat(info.test_suite_name(), ".", info.name()));
  }
  void OnTestEnd(const ::testing::TestInfo&) override { SetRunningTestCase(""); }
};

}  // namespace

::testing::Matcher<const CapturedArg&> IsFinite() {
  return ::testing::MakeMatcher(new IsFiniteMatcher);
}

::testing::Matcher<const Capture&> HasNoNonFiniteOutputs() {
  return ::testing::MakeMatcher(new NoNonFiniteOutputsMatcher);
}

::testing::Matcher<const CapturedArg&> IsCloseTo(std::vector<double> golden, double atol,
                                                 double rtol) {
  return ::testing::MakeMatcher(new IsCloseToMatcher(std::move(golden), Tolerance{atol, rtol}));
}

::testing::Matcher<const Capture&> MatchesCapture(const Capture& golden, double atol,
                                                  double rtol) {
  return ::testing::MakeMatcher(new MatchesCaptureMatcher(golden, atol, rtol));
}

absl::Status InitTestMain(int* argc, char** argv) {
  if (absl::Status s = ConsumeDumpFlags(argc, argv); !s.ok()) return s;
  ::testing::InitGoogleMock(argc, argv);
  ::testing::UnitTest::GetInstance()->listeners().Append(new TestCaseListener);
  return absl::OkStatus();
}

// ---- CaptureServerProcess ----------------------------------------------------------

namespace {

bool Executable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

// capture_server in the test's runfiles.
std::string RunfilesServer() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  if (srcdir == nullptr) return "";
  std::string repo = ARGSDUMP_REPOSITORY;  // "@argsdump", or "@" in argsdump itself
  if (!repo.empty() && repo[0] == '@') repo = repo.substr(1);
  std::vector<std::string> candidates;
  if (!repo.empty()) candidates.push_back(absl::StrCat(srcdir, "/", repo, "/server/capture_server"));
  if (const char* ws = std::getenv("TEST_WORKSPACE")) {
    candidates.push_back(absl::StrCat(srcdir, "/", ws, "/server/capture_server"));
    if (!repo.empty()) {
      candidates.push_back(absl::StrCat(srcdir, "/", ws, "/external/", repo, "/server/capture_server"));
    }
  }
  for (const std::string& c : candidates) {
    if (Executable(c)) return c;
  }
  return "";
}

int PidFd(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

// Waits up to `timeout` for `pid` to exit (a pidfd: no polling loop).
bool WaitExit(pid_t pid, std::chrono::milliseconds timeout, int* status) {
  const int fd = PidFd(pid);
  if (fd >= 0) {
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(timeout.count()));
    ::close(fd);
    if (ready <= 0) return false;
  }
  return ::waitpid(pid, status, 0) == pid;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CaptureServerProcess>> CaptureServerProcess::Start(
    const std::string& root, const std::string& binary) {
  const std::string bin = binary.empty() ? RunfilesServer() : binary;
  if (bin.empty() || !Executable(bin)) {
    return absl::NotFoundError(absl::StrCat(
        "capture_server not found", bin.empty() ? " in the runfiles" : absl::StrCat(" at ", bin),
        " (add data = [\"@argsdump//server:capture_server\"] to the test, or pass its path)"));
  }
  if (absl::Status s = CreateDirectories(root); !s.ok()) return s;
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  const std::string root_flag = "--root=" + root;
  std::vector<std::string> args = {bin, "--listen=127.0.0.1:0", root_flag, "--shutdown_grace_ms=2000"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid;
  const int rc = ::posix_spawn(&pid, bin.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  if (rc != 0) {
    ::close(out[0]);
    return absl::InternalError(absl::StrCat("cannot start ", bin, ": ", std::strerror(rc)));
  }
  std::unique_ptr<CaptureServerProcess> p(new CaptureServerProcess);
  p->pid_ = pid;
  p->root_ = root;
  // Its first line says where it listens; bounded wait for it.
  std::string line;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (line.find('\n') == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd pfd{out[0], POLLIN, 0};
    if (left.count() <= 0 || ::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) break;
    char buf[256];
    const ssize_t n = ::read(out[0], buf, sizeof(buf));
    if (n <= 0) break;
    line.append(buf, static_cast<size_t>(n));
  }
  ::close(out[0]);
  const size_t at = line.find("listening on 127.0.0.1:");
  int port = 0;
  if (at == std::string::npos ||
      !absl::SimpleAtoi(absl::string_view(line).substr(at + 23, line.find(' ', at + 23) - at - 23),
                        &port) ||
      port <= 0) {
    return absl::UnavailableError(absl::StrCat(bin, " did not come up (it printed '", line, "')"));
  }
  p->address_ = absl::StrCat("127.0.0.1:", port);
  return p;
}

absl::Status CaptureServerProcess::Stop() {
  if (pid_ <= 0) return absl::OkStatus();
  ::kill(pid_, SIGTERM);
  int status = 0;
  const pid_t pid = pid_;
  pid_ = -1;
  if (!WaitExit(pid, std::chrono::seconds(30), &status)) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    return absl::DeadlineExceededError("capture_server did not stop within 30 s of SIGTERM");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat("capture_server ended with status ", status));
  }
  return absl::OkStatus();
}

CaptureServerProcess::~CaptureServerProcess() { Stop().IgnoreError(); }

}  // namespace testing
}  // namespace argsdump
