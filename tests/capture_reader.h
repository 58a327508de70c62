// Test helper: reads a capture directory (args_dump.json + args.bin) back
// into plain structs with protobuf's JSON parser, strictly (ManifestFile).
#ifndef ARGSDUMP_TESTS_CAPTURE_READER_H_
#define ARGSDUMP_TESTS_CAPTURE_READER_H_

#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "base/files.h"
#include "google/protobuf/struct.pb.h"
#include "proto/argsdump/v1/manifest.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace argsdump {

struct Entry {
  std::string task_id, role, stage, kind, dtype;
  int arg_index = 0;
  uint32_t step = 0;
  std::vector<int> func_id, shape, strides;
  uint64_t start_offset = 0, numel = 0, bin_offset = 0, bin_size = 0;
  bool is_contiguous = false, truncated = false, overwritten = false, ambiguous = false,
       in_flight = false, overflow = false, nonfinite = false;
  bool has_stats = false;
  v1::TensorStats stats;
  google::protobuf::Value value;
  std::string payload;  // the bytes of args.bin this entry points at

  std::tuple<std::string, std::string, int, std::string> Key() const {
    return {task_id, stage, arg_index, role};
  }
  template <typename T>
  std::vector<T> As() const {
    std::vector<T> out(payload.size() / sizeof(T));
    std::memcpy(out.data(), payload.data(), out.size() * sizeof(T));
    return out;
  }
};

struct CaptureFiles {
  v1::ManifestFile manifest;  // parsed strictly: unknown fields fail
  std::vector<Entry> entries;
  std::string bin;
  std::string manifest_text;
};

// The file's bytes, or "" when it cannot be read.
inline std::string ReadWholeFile(const std::string& path) {
  return ReadFileToString(path, kUnboundedFileBytes).value_or("");
}

inline CaptureFiles ReadCapture(const std::string& dir) {
  CaptureFiles c;
  c.manifest_text = ReadWholeFile(dir + "/args_dump.json");
  google::protobuf::util::JsonParseOptions strict;
  strict.ignore_unknown_fields = false;
  auto status = google::protobuf::util::JsonStringToMessage(c.manifest_text, &c.manifest, strict);
  EXPECT_TRUE(status.ok()) << dir << ": " << status.ToString();
  c.bin = ReadWholeFile(dir + "/args.bin");
  for (const v1::ManifestEntry& m : c.manifest.args()) {
    Entry e;
    e.task_id = m.task_id();
    e.role = m.role();
    e.stage = m.stage();
    e.kind = m.kind();
    e.dtype = m.dtype();
    e.arg_index = static_cast<int>(m.arg_index());
    e.step = m.step();
    e.func_id.assign(m.func_id().begin(), m.func_id().end());
    e.shape.assign(m.shape().begin(), m.shape().end());
    e.strides.assign(m.strides().begin(), m.strides().end());
    e.start_offset = m.start_offset();
    e.numel = m.numel();
    e.bin_offset = m.bin_offset();
    e.bin_size = m.bin_size();
    e.is_contiguous = m.is_contiguous();
    e.truncated = m.truncated();
    e.overwritten = m.overwritten();
    e.ambiguous = m.arg_index_ambiguous();
    e.in_flight = m.in_flight_snapshot();
    e.overflow = m.overflow();
    e.nonfinite = m.nonfinite();
    e.has_stats = m.has_stats();
    e.stats = m.stats();
    e.value = m.value();
    EXPECT_LE(e.bin_offset + e.bin_size, c.bin.size()) << e.task_id;
    if (e.bin_offset + e.bin_size <= c.bin.size()) e.payload = c.bin.substr(e.bin_offset, e.bin_size);
    c.entries.push_back(std::move(e));
  }
  return c;
}

}  // namespace argsdump

#endif  // ARGSDUMP_TESTS_CAPTURE_READER_H_
