#include "collector/refused_record_dump.h"

#include <cstdio>
#include <cstring>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/files.h"
#include "format/names.h"
#include "store/manifest.h"

namespace argsdump {
namespace {

// A refusal's message comes from the record's own numbers; kept whole up to
// this many bytes.
constexpr size_t kMaxReasonBytes = 1024;

void Error(const std::string& text) {
  std::fprintf(stderr, "[argsdump dumper] ERROR: %s\n", text.c_str());
}

std::string Json(absl::string_view text) {
  std::string out;
  AppendJsonString(text, &out);
  return out;
}

// Every field of the record as the bytes say, not as they should be.
std::string FieldsJson(const abi::ArgsDumpRecord& r) {
  std::vector<uint32_t> funcs(std::begin(r.func_ids), std::end(r.func_ids));
  std::vector<uint32_t> strides(std::begin(r.strides), std::end(r.strides));
  std::vector<uint32_t> shapes(std::begin(r.shapes), std::end(r.shapes));
  return absl::StrCat(
      "{\"task_id\": \"", TaskIdHex(r.task_id), "\", \"role\": ", r.role,
      ", \"stage\": ", r.stage, ", \"ndims\": ", r.ndims, ", \"arg_index\": ", r.arg_index,
      ", \"dtype\": ", r.dtype, ", \"truncated\": ", r.truncated,
      ", \"is_contiguous\": ", r.is_contiguous, ", \"payload_offset\": ", r.payload_offset,
      ", \"payload_size\": ", r.payload_size, ", \"scalar_value\": \"",
      absl::StrFormat("0x%016x", r.scalar_value), "\", \"kind\": ", r.kind,
      ", \"flags\": ", r.flags, ", \"func_ids\": [", absl::StrJoin(funcs, ", "),
      "], \"func_count\": ", r.func_count, ", \"start_offset\": ", r.start_offset,
      ", \"strides\": [", absl::StrJoin(strides, ", "), "], \"shapes\": [",
      absl::StrJoin(shapes, ", "), "], \"logical_bytes\": ", r.logical_bytes,
      ", \"step\": ", r.step, "}");
}

}  // namespace

RefusedRecordDump::RefusedRecordDump(RefusedRecordDumpOptions options)
    : options_(std::move(options)) {}

void RefusedRecordDump::Dump(RegionTransport& transport, const abi::ArgsDumpRecord& record,
                             const RefusedRecordPlace& place, const absl::Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (write_failed_ || taken_ >= options_.max_records) {
    if (++not_dumped_ == 1 && !write_failed_) {
      Error(absl::StrCat("more records refused than the ", options_.max_records,
                         " saved in ", options_.root, "/exception_dump/refused_*: the rest "
                         "are only counted (\"invalid\" in the summary)"));
    }
    return;
  }
  const uint32_t n = ++taken_;
  // The record is copied first: the payload view below only reads.
  abi::ArgsDumpRecord raw;
  std::memcpy(&raw, &record, sizeof(raw));
  const std::string dir =
      absl::StrCat(options_.root, "/exception_dump/",
                   absl::StrFormat("refused_%03u_%u_", n, place.thread), TaskIdHex(raw.task_id));

  std::string payload_json;
  absl::string_view kept;
  if (raw.payload_size == 0) {
    payload_json = "{\"readable\": false, \"why_not\": \"the record has no payload\"}";
  } else {
    bool overwritten = false;
    auto view = transport.PayloadView(place.thread, raw, &overwritten);
    if (!view.ok()) {
      payload_json = absl::StrCat("{\"readable\": false, \"why_not\": ",
                                  Json(view.status().message()), "}");
    } else {
      kept = view->substr(0, options_.max_payload_bytes);
      payload_json = absl::StrCat(
          "{\"readable\": true, \"bytes\": ", view->size(), ", \"kept_bytes\": ", kept.size(),
          ", \"overwritten\": ", overwritten ? "true" : "false", ", \"file\": \"payload.bin\"}");
    }
  }
  const absl::string_view reason = why.message().substr(0, kMaxReasonBytes);
  const std::string context = absl::StrCat(
      "{\n  \"scenario\": \"refused_record\",\n  \"reason\": ", Json(reason),
      ",\n  \"device_thread\": ", place.thread, ",\n  \"buffer_sequence\": ",
      place.buffer_sequence, ",\n  \"index_in_buffer\": ", place.index,
      ",\n  \"record\": \"record.bin\",\n  \"record_bytes\": ", sizeof(raw),
      ",\n  \"fields\": ", FieldsJson(raw), ",\n  \"payload\": ", payload_json, "\n}\n");

  absl::Status written = CreateDirectories(dir);
  if (written.ok()) {
    written = WriteStringToFile(
        dir + "/record.bin",
        absl::string_view(reinterpret_cast<const char*>(&raw), sizeof(raw)));
  }
  if (written.ok() && !kept.empty()) written = WriteStringToFile(dir + "/payload.bin", kept);
  if (written.ok()) written = WriteStringToFile(dir + "/context.json", context);
  if (!written.ok()) {
    write_failed_ = true;
    ++not_dumped_;
    Error(absl::StrCat("the collector refused a record: ", reason,
                       "; its exception dump could not be written: ",
                       written.message(), "; later refused records are only counted"));
    return;
  }
  folders_.push_back(dir);
  Error(absl::StrCat("the collector refused a record: ", reason,
                     "; its raw bytes and context are in ", dir));
}

std::vector<std::string> RefusedRecordDump::folders() const {
  std::lock_guard<std::mutex> lock(mu_);
  return folders_;
}

uint64_t RefusedRecordDump::not_dumped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return not_dumped_;
}

}  // namespace argsdump
