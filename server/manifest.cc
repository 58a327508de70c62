#include "server/manifest.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "server/record_format.h"

namespace argsdump {
namespace {

void AppendUintArray(std::string* out, const uint32_t* v, uint32_t n) {
  out->push_back('[');
  for (uint32_t i = 0; i < n; ++i) {
    if (i > 0) out->append(", ");
    absl::StrAppend(out, v[i]);
  }
  out->push_back(']');
}

void AppendEntry(std::string* out, const ManifestRow& r) {
  absl::StrAppend(out, "    {\"task_id\": \"", TaskIdHex(r.task_id), "\", \"func_id\": ");
  if (r.func_count == 0) {
    out->append("[-1]");
  } else {
    uint32_t ids[abi::kMaxFuncIds];
    for (uint32_t i = 0; i < r.func_count; ++i) ids[i] = r.func_ids[i];
    AppendUintArray(out, ids, r.func_count);
  }
  absl::StrAppend(out, ", \"role\": \"", RoleName(static_cast<v1::Role>(r.role)),
                  "\", \"stage\": \"", StageName(static_cast<v1::Stage>(r.stage)),
                  "\", \"arg_index\": ", r.arg_index, ", \"kind\": \"",
                  KindName(static_cast<v1::Kind>(r.kind)), "\", \"dtype\": \"",
                  DTypeName(r.dtype), "\"");
  if (r.kind == v1::KIND_SCALAR) {
    absl::StrAppend(out, ", \"value\": ", FormatScalarJson(r.dtype, r.scalar_bits));
  }
  out->append(", \"shape\": ");
  AppendUintArray(out, r.shape, r.ndims);
  out->append(", \"strides\": ");
  AppendUintArray(out, r.strides, r.ndims);
  absl::StrAppend(out, ", \"start_offset\": ", r.start_offset,
                  ", \"is_contiguous\": ", r.is_contiguous ? "true" : "false",
                  ", \"numel\": ", r.numel);
  if (r.arg_index_ambiguous) out->append(", \"arg_index_ambiguous\": true");
  if (r.in_flight_snapshot) out->append(", \"in_flight_snapshot\": true");
  absl::StrAppend(out, ", \"truncated\": ", r.truncated ? "true" : "false",
                  ", \"overwritten\": ", r.overwritten ? "true" : "false",
                  ", \"bin_offset\": ", r.bin_offset, ", \"bin_size\": ", r.bin_size, "}");
}

}  // namespace

void CountRecords(const RecordList& records, v1::CaptureCounters* c) {
  c->set_total_args(records.size());
  uint64_t before = 0, input = 0, output = 0, inout = 0, truncated = 0, overwritten = 0,
           bytes = 0, in_flight = 0;
  for (const ManifestRow& r : records) {
    before += r.stage == v1::STAGE_BEFORE_DISPATCH;
    input += r.role == v1::ROLE_INPUT;
    output += r.role == v1::ROLE_OUTPUT;
    inout += r.role == v1::ROLE_INOUT;
    truncated += r.truncated;
    overwritten += r.overwritten;
    bytes += r.bin_size;
    in_flight += r.in_flight_snapshot;
  }
  c->set_before_dispatch(before);
  c->set_after_completion(records.size() - before);
  c->set_input_args(input);
  c->set_output_args(output);
  c->set_inout_args(inout);
  c->set_truncated_args(truncated);
  c->set_dropped_overwrite(overwritten);
  c->set_payload_bytes(bytes);
  c->set_in_flight_snapshots(in_flight);
}

absl::Status WriteManifest(const std::string& path, const ManifestContents& m) {
  const std::string tmp = path + ".tmp";
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(tmp.c_str(), "wb"), &std::fclose);
  if (f == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("manifest ", tmp, ": cannot create: ", std::strerror(errno)));
  }
  const v1::CaptureCounters& c = m.counters;
  std::string out;
  out.reserve(1 << 20);
  absl::StrAppend(
      &out, "{\n  \"run_dir\": \"args_dump\",\n",
      "  \"bin_format\": {\"type\": \"logical_contiguous\", \"byte_order\": \"little_endian\"},\n",
      "  \"dump_args_level\": ", static_cast<int>(m.level), ",\n",
      "  \"total_args\": ", c.total_args(), ",\n",
      "  \"before_dispatch\": ", c.before_dispatch(), ",\n",
      "  \"after_completion\": ", c.after_completion(), ",\n",
      "  \"input_args\": ", c.input_args(), ",\n",
      "  \"output_args\": ", c.output_args(), ",\n",
      "  \"inout_args\": ", c.inout_args(), ",\n",
      "  \"truncated_args\": ", c.truncated_args(), ",\n");
  absl::StrAppend(
      &out, "  \"dropped_records\": ", c.dropped_records(), ",\n",
      "  \"dropped_overwrite\": ", c.dropped_overwrite(), ",\n",
      "  \"dropped_by_cause\": {\"ready_queue_full\": ", c.dropped_ready_queue_full(),
      ", \"free_queue_empty\": ", c.dropped_free_queue_empty(),
      ", \"arena_ack_timeout\": ", c.dropped_arena_ack_timeout(),
      ", \"flush_timeout\": ", c.dropped_flush_timeout(), "},\n",
      "  \"in_flight_snapshots\": ", c.in_flight_snapshots(), ",\n",
      "  \"device_waits\": {\"arena\": ", c.arena_waits(), ", \"gate\": ", c.gate_waits(),
      "},\n",
      "  \"payload_bytes\": ", c.payload_bytes(), ",\n");
  if (m.recovered) out.append("  \"recovered_from_journal\": true,\n");
  absl::StrAppend(&out, "  \"bin_file\": ", m.has_bin_file ? "\"args.bin\"" : "null", ",\n",
                  "  \"args\": [");
  bool first = true;
  for (uint32_t index : *m.order) {
    out.append(first ? "\n" : ",\n");
    first = false;
    AppendEntry(&out, (*m.records)[index]);
    if (out.size() > (1 << 20)) {
      if (std::fwrite(out.data(), 1, out.size(), f.get()) != out.size()) {
        return absl::DataLossError(absl::StrCat("manifest ", tmp, ": write failed"));
      }
      out.clear();
    }
  }
  out.append(first ? "]\n}\n" : "\n  ]\n}\n");
  if (std::fwrite(out.data(), 1, out.size(), f.get()) != out.size() ||
      std::fflush(f.get()) != 0 || ::fsync(fileno(f.get())) != 0) {
    return absl::DataLossError(absl::StrCat("manifest ", tmp, ": write failed"));
  }
  f.reset();
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::DataLossError(absl::StrCat("manifest ", path, ": rename failed: ",
                                            std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace argsdump
