#include "viewer/manifest_transcript.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace argsdump {
namespace {

std::string Bits(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return absl::StrCat(absl::Hex(bits));
}

}  // namespace

std::string DescribeEntry(const ManifestEntry& e) {
  std::string s = absl::StrCat(
      "index ", e.index, " record_id ", e.record_id, " task_id ", e.task_id, " task_id_text [",
      e.task_id_text, "] step ", e.step, " func_ids [", absl::StrJoin(e.func_ids, ","),
      "] role ", e.role, " stage ", e.stage, " kind ", e.kind, " dtype ",
      static_cast<int>(e.dtype), " shape [", absl::StrJoin(e.shape, ","), "] strides [",
      absl::StrJoin(e.strides, ","), "] has_value ", e.has_value, " value [", e.value, "]");
#define ARGSDUMP_DESCRIBE(id, style, member) absl::StrAppend(&s, " " #member " ", e.member);
  ARGSDUMP_SIMPLE_MANIFEST_FIELDS(ARGSDUMP_DESCRIBE)
#undef ARGSDUMP_DESCRIBE
  if (e.stats) {
    const ManifestEntry::Stats& t = *e.stats;
    absl::StrAppend(&s, " stats ", t.count, " ", Bits(t.min), " ", Bits(t.max), " ",
                    Bits(t.mean), " ", Bits(t.l2), " ", t.nan, " ", t.pos_inf, " ", t.neg_inf,
                    " ", t.zeros);
  }
  return s;
}

std::string ReadTranscript(const std::string& manifest, const EntryFilter& filter,
                           bool scanner, size_t max_entries, size_t buffer_bytes) {
  auto reader = ManifestReader::FromBytes(manifest, "fuzz.json", buffer_bytes);
  reader->set_filter(filter);
  reader->set_store_layout_scanner(scanner);
  std::string out;
  ManifestEntry e;
  size_t n = 0;
  for (; n < max_entries; ++n) {
    absl::StatusOr<bool> more = reader->Next(&e);
    if (!more.ok()) {
      absl::StrAppend(&out, "status: ", more.status().ToString(), "\n");
      break;
    }
    if (!*more) {
      absl::StrAppend(&out, "end\n");
      break;
    }
    absl::StrAppend(&out, DescribeEntry(e), "\n");
  }
  if (n == max_entries) absl::StrAppend(&out, "stopped\n");
  const ManifestSummary& sum = reader->summary();
  for (const auto& [k, v] : sum.counters) absl::StrAppend(&out, "counter ", k, " ", v, "\n");
  absl::StrAppend(&out, "bin_file ", sum.has_bin_file, " [", sum.bin_file, "]\n");
  for (const auto& [k, v] : sum.labels) absl::StrAppend(&out, "label [", k, "] [", v, "]\n");
  if (sum.device_crash) absl::StrAppend(&out, "device_crash ", sum.device_crash->ShortDebugString(), "\n");
  for (const v1::Kernel& k : sum.kernels) absl::StrAppend(&out, "kernel ", k.ShortDebugString(), "\n");
  return out;
}

}  // namespace argsdump
