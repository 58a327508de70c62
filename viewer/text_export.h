// One captured arg as a text file (dump_viewer --export), byte for byte what
// the reference viewer (`python -m simpler_setup.tools.dump_viewer`) writes
// for the same manifest entry and payload, so goldens made with it diff
// clean. The grammar ("\n" ends every line):
//   # task_id: <as the manifest spells it>     ten header lines, this order;
//   # role: <role>                             booleans True/False, lists
//   # stage: <stage>                           "[a, b]" ("[]" for none)
//   # arg_index: <n>
//   # dtype: <dtype>
//   # kind: <kind>
//   # is_contiguous: True|False
//   # shape: [a, b]
//   # strides: [a, b]
//   # start_offset: <n>
//   [# step: <n>]               ours only: records of step 1 and later
//   [# overflow: True (...)]    ours only: the overflow check's records
// then the first that applies:
//   # DATA OVERWRITTEN (host too slow)               (and nothing more)
//   [# DATA TRUNCATED (tensor too large for arena)]  (then as below)
//   # value: <the scalar as Python prints its JSON value>   (scalars)
//   # (no data)                                      (bin_size 0)
//   <empty line>
//   # Overview:
//   <elements, right-aligned to the widest, one space apart, a line per
//    last-dimension row>
//   <empty line>
//   # Detail:
//   [i, j] <element>               one per element, row-major indices
// Elements shown: min(prod(shape) or 1 when it is 0, elements the payload
// holds), so a truncated payload shows what it holds. Element text:
// float32 %.6g, float16 %.4g, bfloat16 %.3g (the reference's); NaN "nan"
// whatever its sign, "inf", "-inf", "-0"; integers in decimal; BOOL
// True/False (a manifest naming a dtype this build does not know is an
// error of the reader, manifest_reader.h). Our extra dtypes, by
// their significands: float64 %.15g (DBL_DIG, as float32's 6 is FLT_DIG);
// the 8- and 4-bit floats the fewest digits that print each of their
// finite values apart from the others, never one (which prints E8M0's 16
// as 2e+01): FP8E4M3FN %.3g, FP8E8M0 %.2g, FP4E2M1 %.2g (two elements per
// byte, low nibble first).
// The listing, not the text, says arg_index_ambiguous and in-flight
// snapshots: the reference prints neither for records that carry them.
#ifndef ARGSDUMP_VIEWER_TEXT_EXPORT_H_
#define ARGSDUMP_VIEWER_TEXT_EXPORT_H_

#include <string>

#include "absl/strings/string_view.h"
#include "format/element_stats.h"
#include "viewer/manifest_reader.h"

namespace argsdump {

// task_<task_id as in the manifest>_<before|after>_<in|out|inout><arg_index>.txt
std::string TextFileName(const ManifestEntry& entry);

// `payload`: the entry's bytes from args.bin (bin_size of them).
std::string FormatArgText(const ManifestEntry& entry, absl::string_view payload);

// Over the elements present in `payload` (a truncated payload counts what
// it holds). Non-finite values are counted, not folded into min/max/mean.
// (format/element_stats.h: the same numbers the stats dump mode stores.)
ElementStats ComputeStats(const ManifestEntry& entry, absl::string_view payload);

}  // namespace argsdump

#endif  // ARGSDUMP_VIEWER_TEXT_EXPORT_H_
