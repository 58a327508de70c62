// Streams an args_dump.json (its schema: proto/argsdump/v1/manifest.proto)
// entry by entry, without building a document of it: a 10 M-entry
// manifest is a few GB of text. Accepts any
// JSON layout of the schema (key order, whitespace, unknown keys skipped),
// and reports what is wrong as "<file>: byte N: <where>: <what>" instead of
// crashing on truncated or corrupted files.
#ifndef ARGSDUMP_VIEWER_MANIFEST_READER_H_
#define ARGSDUMP_VIEWER_MANIFEST_READER_H_

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/status/status.h"
#include "absl/base/optimization.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "format/arg_filter.h"
#include "format/dtype.h"
#include "format/kernel_table.h"
#include "proto/argsdump/v1/record.pb.h"
#include "format/manifest_fields.h"

namespace argsdump {

// The stats dump mode's numbers of an entry (ManifestEntry::Stats; outside
// it so that std::optional<> of it is constructible inside the class).
struct ManifestEntryStats {
#define ARGSDUMP_STATS_MEMBER(member, type) type member = 0;
  ARGSDUMP_MANIFEST_STATS_FIELDS(ARGSDUMP_STATS_MEMBER)
#undef ARGSDUMP_STATS_MEMBER
  bool has_nonfinite() const { return nan + pos_inf + neg_inf > 0; }
};

// One entry of args[]: the manifest's spellings of role, stage, kind and
// dtype are read into the vocabulary's enums (format/names.h); a spelling
// that is not the schema's is an error of the manifest, not a value.
struct ManifestEntry {
  uint64_t index = 0;  // position in args[] (what --index takes)
  uint64_t record_id = 0;  // remote captures: the id ReadPayload takes
  uint64_t task_id = 0;
  // The task_id string as the manifest spells it ("0x0000000200000a00");
  // empty for entries that did not come from a manifest's text (remote).
  std::string task_id_text;
  uint32_t step = 0;  // the workload step; 0 when the manifest has none
  std::vector<int64_t> func_ids;  // [-1] when unknown
  v1::Role role = v1::ROLE_UNSPECIFIED;
  v1::Stage stage = v1::STAGE_UNSPECIFIED;
  v1::Kind kind = v1::KIND_UNSPECIFIED;
  DataType dtype = DataType::kFloat32;

  bool is_tensor() const { return kind == v1::KIND_TENSOR; }
  bool is_scalar() const { return kind == v1::KIND_SCALAR; }
  std::vector<uint64_t> shape, strides;
  bool has_value = false;
  std::string value;  // scalars: the JSON token as written (1, 0.5, "NaN", true)
  // arg_index, start_offset, is_contiguous, numel, the flags, bin_offset,
  // bin_size: format/manifest_fields.h's simple fields.
  ARGSDUMP_SIMPLE_MANIFEST_FIELDS(ARGSDUMP_SIMPLE_FIELD_MEMBER)
  // The stats dump mode's numbers, when the manifest carries them.
  using Stats = ManifestEntryStats;
  std::optional<Stats> stats;
  // The device thread that recorded it: remote records only (the manifest
  // does not write it; 0 otherwise).
  uint32_t device_thread = 0;
};

// Which entries to hand out: the records' filter (format/arg_filter.h: the
// capture service's meaning, so local and remote reads pick the same) and,
// read locally, one position in args[].
struct EntryFilter {
  ArgFilter args;
  std::optional<uint64_t> index;

  bool Matches(const ManifestEntry& e) const;
  bool any() const { return args.any() || index.has_value(); }
};

// The top-level fields other than args[]: numbers by name (total_args,
// dropped_records, dump_args_level, ...), bin_file.
struct ManifestSummary {
  std::map<std::string, int64_t> counters;
  std::string bin_file;  // empty when null
  bool has_bin_file = false;
  std::map<std::string, std::string> labels;  // "labels", when present
  // "device_crash", when present: how the device process died (the store
  // writes it before args[], so it is known once the first entry is read).
  // Its task ids and fault address read back from their hex spellings;
  // held to format/device_crash.h's bounds like the service's.
  std::optional<v1::DeviceCrash> device_crash;
  // "kernels", when present: the kernel table (what each func_id names),
  // held to format/kernel_table.h's bounds. The store writes it before
  // args[], so it is known once ReadHeader or the first Next returned.
  KernelTable kernels;
  // "clock", when present: what the entries' times count from
  // (CaptureInfo.clock). Written before args[], as the kernels are.
  std::optional<v1::CaptureClock> clock;
};

class ManifestReader {
 public:
  // NotFound naming the file when it cannot be opened.
  static absl::StatusOr<std::unique_ptr<ManifestReader>> Open(const std::string& path);
  // The same over a manifest's bytes in memory, named `name` in errors
  // (the fuzz target; a manifest read out of a zip), read `buffer_bytes`
  // at a time (the fuzz target's small buffers put refills everywhere).
  static std::unique_ptr<ManifestReader> FromBytes(std::string bytes, std::string name,
                                                   size_t buffer_bytes = 1 << 20);
  ~ManifestReader();

  // Calls `fn` for every entry in order until it returns false. The summary
  // is complete when this returns OK (fields after args[] included).
  // DataLoss "<file>: byte N: ..." for anything that is not the schema.
  absl::Status ForEach(const std::function<bool(const ManifestEntry&)>& fn);
  // The same one entry at a time: true with the next entry in `e`, false at
  // the end (the summary is then complete); an error stays the answer.
  absl::StatusOr<bool> Next(ManifestEntry* e);
  // Reads the top-level fields before args[] (the summary is then what
  // the manifest says before its entries: the store's header, kernels
  // included) and stops there; Next goes on with the first entry.
  absl::Status ReadHeader();
  // Only entries that match are handed out. An entry is dropped as soon as
  // a field it is filtered on is read (task_id, func_id, role, stage and
  // arg_index come first in what the store writes), and the rest of it is
  // checked for structure only (strings, escapes, nesting), not parsed:
  // a selective filter runs at close to scanning speed. Indices still
  // count every entry.
  void set_filter(const EntryFilter& filter) {
    filter_ = filter;
    drops_early_ = filter.args.any();
  }
  // Entries in exactly the layout the store writes (store/manifest.cc) are
  // read by a scanner made for it, any other entry by the general parser;
  // the results are the same either way. false: the general parser only
  // (the fuzz target and the tests compare the two).
  void set_store_layout_scanner(bool enabled) { scan_store_layout_ = enabled; }
  const ManifestSummary& summary() const { return summary_; }

 private:
  explicit ManifestReader(std::string path, std::FILE* f) : path_(std::move(path)), f_(f) {}
  // The scanner of the store's layout (manifest_reader.cc): reads the
  // buffer and the filter, never refills.
  class StoreLayoutScanner;
  // The tokenizer over a buffered file (inline: it runs per character).
  int Peek() {
    if (ABSL_PREDICT_FALSE(at_ == end_)) return Refill();
    return static_cast<unsigned char>(buffer_[at_]);
  }
  int Get() {
    const int c = Peek();
    if (ABSL_PREDICT_TRUE(c >= 0)) ++at_;
    return c;
  }
  void SkipSpace() {
    for (int c = Peek(); c == ' ' || c == '\n' || c == '\r' || c == '\t'; c = Peek()) ++at_;
  }
  int Refill();  // the next buffer; its first character or -1 at the end
  absl::Status Error(absl::string_view what) const;
  absl::Status Expect(char c, absl::string_view where);
  // [e, e, ...]: `element` reads one element (no bracket, no comma) each
  // time; an empty array reads none. A stray character is an error at
  // `where`.
  template <typename Element>
  absl::Status ParseArray(absl::string_view where, Element element) {
    if (absl::Status s = Expect('[', where); !s.ok()) return s;
    SkipSpace();
    if (Peek() == ']') {
      Get();
      return absl::OkStatus();
    }
    for (;;) {
      if (absl::Status s = element(); !s.ok()) return s;
      SkipSpace();
      const int c = Get();
      if (c == ']') return absl::OkStatus();
      if (c != ',') return Error(absl::StrCat(where, ": expected ',' or ']' in an array"));
    }
  }
  absl::Status ParseString(std::string* out, absl::string_view where);
  absl::Status ParseNumberToken(std::string* out, absl::string_view where);
  absl::Status ParseUint(uint64_t* out, absl::string_view where);
  absl::Status ParseInt(int64_t* out, absl::string_view where);
  absl::Status ParseBool(bool* out, absl::string_view where);
  absl::Status ParseUintArray(std::vector<uint64_t>* out, absl::string_view where);
  absl::Status SkipValue(absl::string_view where, int depth);
  absl::Status ParseEntry(ManifestEntry* e);
  absl::Status ParseField(ManifestField field, absl::string_view where, ManifestEntry* e);
  absl::Status ParseUint32(uint32_t* out, absl::string_view where);
  template <FieldStyle S>
  absl::Status ParseSimple(typename FieldType<S>::type* out, absl::string_view where);
  absl::Status ParseFuncIds(std::vector<int64_t>* out, absl::string_view where);
  template <typename Enum>
  absl::Status ParseName(std::optional<Enum> (*from_name)(absl::string_view),
                         absl::string_view expected, Enum* out, absl::string_view where);
  absl::Status ParseDtype(DataType* out, absl::string_view where);
  absl::Status ParseScalarValue(ManifestEntry* e, absl::string_view where);
  static void ResetEntry(ManifestEntry* e);
  absl::Status SkipRestOfEntry();
  absl::Status ParseStats(ManifestEntry::Stats* out, absl::string_view where);
  absl::Status ParseDeviceCrash(v1::DeviceCrash* out, absl::string_view where);
  absl::Status ParseCrashedTask(v1::CrashedTask* out, absl::string_view where);
  absl::Status ParseKernels(KernelTable* out, absl::string_view where);
  absl::Status ParseClock(v1::CaptureClock* out, absl::string_view where);
  absl::Status ParseKernel(v1::Kernel* out, absl::string_view where);
  absl::Status ParseBoundedString(std::string* out, size_t max, absl::string_view where);
  absl::Status ParseInt32(int32_t* out, absl::string_view where);
  // {"key": value, ...}: `field` per key, until the closing '}'.
  absl::Status ParseObject(absl::string_view where,
                           const std::function<absl::Status(const std::string& key)>& field);
  using Field = ManifestField;  // format/manifest_fields.h: the fields, once
  // Whether `field`, just read into `e`, already fails `f`.
  static bool Rejects(const EntryFilter& f, Field field, const ManifestEntry& e);
  // A string, in place in the buffer when it can be (valid until the next
  // read), else unescaped into `scratch`.
  absl::Status ParseStringView(absl::string_view* out, std::string* scratch,
                               absl::string_view where);
  // A number's characters, in number_ (valid until the next token).
  absl::Status NumberToken(absl::string_view* out, absl::string_view where);
  absl::StatusOr<bool> Step(ManifestEntry* e);
  // A top-level field's value; enters args[] (state kEntry) for "args".
  absl::Status ParseTopLevelValue(const std::string& key);

  const std::string path_;
  std::string bytes_;  // FromBytes: what f_ reads
  std::FILE* f_;
  // Up to 1 MiB, no more than the file needs (a small manifest, read many
  // times by the viewer or a fuzzer, does not pay for a large buffer).
  std::vector<char> buffer_;
  size_t at_ = 0, end_ = 0;
  uint64_t consumed_ = 0;  // bytes before buffer_[0]
  ManifestSummary summary_;
  std::optional<EntryFilter> filter_;
  // The filter has fields an entry can fail before it is read whole.
  bool drops_early_ = false;
  bool skipped_ = false;  // the entry just parsed was another task's
  bool in_entry_ = false;  // errors then say "entry N"
  uint64_t entry_ = 0;
  std::string key_, scratch_;  // strings with escapes (rare), reused
  char where_[48];              // 'field "<name>"' for messages
  char number_[64];
  enum class State { kStart, kFieldName, kAfterField, kEntry, kAfterEntry, kEnd };
  State state_ = State::kStart;
  bool saw_args_ = false;
  bool stop_at_args_ = false;  // ReadHeader: Step returns at the first entry
  uint64_t next_index_ = 0;
  absl::Status error_;
  bool scan_store_layout_ = true;
  // The last dtype name the scanner looked up, and what it is.
  std::string scanned_dtype_name_;
  DataType scanned_dtype_ = DataType::kFloat32;
};

}  // namespace argsdump

#endif  // ARGSDUMP_VIEWER_MANIFEST_READER_H_
