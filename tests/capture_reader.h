// Test helper: reads a capture directory (args_dump.json + args.bin) back
// into plain structs with protobuf's JSON parser, strictly (ManifestFile).
// Role, stage, kind and dtype are read into the vocabulary's enums with the
// names the store writes (format/names.h, format/dtype.h): a spelling that is
// not the schema's fails the test. The simple fields are the manifest's list
// (format/manifest_fields.h), with the manifest's names.
#ifndef ARGSDUMP_TESTS_CAPTURE_READER_H_
#define ARGSDUMP_TESTS_CAPTURE_READER_H_

#include <cstring>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "base/files.h"
#include "format/dtype.h"
#include "format/manifest_fields.h"
#include "format/names.h"
#include "google/protobuf/struct.pb.h"
#include "proto/argsdump/v1/manifest.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {

// Which record an entry is: task id, stage, arg index, role.
using EntryKey = std::tuple<std::string, v1::Stage, uint32_t, v1::Role>;

struct Entry {
  std::string task_id;
  v1::Role role = v1::ROLE_UNSPECIFIED;
  v1::Stage stage = v1::STAGE_UNSPECIFIED;
  v1::Kind kind = v1::KIND_UNSPECIFIED;
  DataType dtype = DataType::kFloat32;
  uint32_t step = 0;
  std::vector<int> func_id, shape, strides;
  // arg_index, start_offset, is_contiguous, numel, the flags, bin_offset,
  // bin_size: the manifest's simple fields, under their manifest names.
  ARGSDUMP_SIMPLE_MANIFEST_FIELDS(ARGSDUMP_SIMPLE_FIELD_MEMBER)
  bool has_stats = false;
  v1::TensorStats stats;
  google::protobuf::Value value;
  std::string payload;  // the bytes of args.bin this entry points at

  EntryKey Key() const {
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
// `name` read with `parse` (an inverse of format/names.h), or `fallback`
// with a test failure when it is not one of the schema's spellings.
template <typename T, typename Parse>
T ParseManifestName(const std::string& task_id, const char* field, const std::string& name,
                    Parse parse, T fallback) {
  auto parsed = parse(name);
  EXPECT_TRUE(parsed.has_value()) << task_id << ": " << field << " \"" << name << "\"";
  return parsed.has_value() ? static_cast<T>(*parsed) : fallback;
}

inline CaptureFiles ReadCapture(const std::string& dir) {
  CaptureFiles c;
  c.manifest_text = ReadFileOrEmpty(dir + "/args_dump.json");
  google::protobuf::util::JsonParseOptions strict;
  strict.ignore_unknown_fields = false;
  auto status = google::protobuf::util::JsonStringToMessage(c.manifest_text, &c.manifest, strict);
  EXPECT_TRUE(status.ok()) << dir << ": " << status.ToString();
  c.bin = ReadFileOrEmpty(dir + "/args.bin");
  for (const v1::ManifestEntry& m : c.manifest.args()) {
    Entry e;
    e.task_id = m.task_id();
    e.role = ParseManifestName(e.task_id, "role", m.role(), RoleFromName, v1::ROLE_UNSPECIFIED);
    e.stage =
        ParseManifestName(e.task_id, "stage", m.stage(), StageFromName, v1::STAGE_UNSPECIFIED);
    e.kind = ParseManifestName(e.task_id, "kind", m.kind(), KindFromName, v1::KIND_UNSPECIFIED);
    e.dtype = ParseManifestName(
        e.task_id, "dtype", m.dtype(),
        [](const std::string& name) {  // the exact spelling the store writes
          const std::optional<DataType> d = DataTypeFromName(name);
          return d.has_value() && DataTypeName(*d) == name ? d : std::nullopt;
        },
        DataType::kFloat32);
    e.step = m.step();
    e.func_id.assign(m.func_id().begin(), m.func_id().end());
    e.shape.assign(m.shape().begin(), m.shape().end());
    e.strides.assign(m.strides().begin(), m.strides().end());
#define ARGSDUMP_COPY_SIMPLE_FIELD(id, style, member) e.member = m.member();
    ARGSDUMP_SIMPLE_MANIFEST_FIELDS(ARGSDUMP_COPY_SIMPLE_FIELD)
#undef ARGSDUMP_COPY_SIMPLE_FIELD
    e.has_stats = m.has_stats();
    e.stats = m.stats();
    e.value = m.value();
    EXPECT_LE(e.bin_offset + e.bin_size, c.bin.size()) << e.task_id;
    if (e.bin_offset + e.bin_size <= c.bin.size()) e.payload = c.bin.substr(e.bin_offset, e.bin_size);
    c.entries.push_back(std::move(e));
  }
  return c;
}

// A manifest's text without what differs from run to run: the entries'
// task times and the head's "clock" line (for comparing two runs' files).
inline std::string ManifestWithoutTimes(const std::string& manifest) {
  std::string out;
  std::istringstream lines(manifest);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("  \"clock\": ", 0) == 0) continue;
    for (const char* key : {", \"dispatch_ns\": ", ", \"complete_ns\": "}) {
      for (size_t at; (at = line.find(key)) != std::string::npos;) {
        size_t end = at + std::string(key).size();
        while (end < line.size() && line[end] >= '0' && line[end] <= '9') ++end;
        line.erase(at, end - at);
      }
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace argsdump

#endif  // ARGSDUMP_TESTS_CAPTURE_READER_H_
