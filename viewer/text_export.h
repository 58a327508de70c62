// One captured arg as a text file (dump_viewer --export): "# key: value"
// header lines, "# Overview:" (row-major, a line per last-dimension row,
// right-aligned columns) and "# Detail:" ("[i, j, ...] value" per element);
// scalars print "# value:". Truncated, overwritten and payload-less args
// say so in the header. Every dtype decodes (FP4E2M1: two per byte).
#ifndef ARGSDUMP_VIEWER_TEXT_EXPORT_H_
#define ARGSDUMP_VIEWER_TEXT_EXPORT_H_

#include <string>

#include "absl/strings/string_view.h"
#include "format/element_stats.h"
#include "viewer/manifest_reader.h"

namespace argsdump {

// task_<16 hex digits>_<before|after>_<in|out|inout><arg_index>.txt
std::string TextFileName(const ManifestEntry& entry);

// `payload`: the entry's bytes from args.bin (bin_size of them).
std::string FormatArgText(const ManifestEntry& entry, absl::string_view payload);

// One element as text: integers exactly, floats as the shortest decimal
// that reads back to the same value, nan / inf / -inf.
std::string FormatElement(const std::string& dtype, const unsigned char* payload, uint64_t index);

// Over the elements present in `payload` (a truncated payload counts what
// it holds). Non-finite values are counted, not folded into min/max/mean.
// (format/element_stats.h: the same numbers the stats dump mode stores.)
ElementStats ComputeStats(const ManifestEntry& entry, absl::string_view payload);

}  // namespace argsdump

#endif  // ARGSDUMP_VIEWER_TEXT_EXPORT_H_
