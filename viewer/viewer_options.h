// dump_viewer's command line (the usage is in viewer.h): its absl flags,
// each value checked and named as the user typed it, and the combinations
// that go together, turned into one ViewerOptions. The flags are global:
// every parse starts from their defaults and runs under one lock, so the
// viewer may be called many times, from several threads, in one process.
#ifndef ARGSDUMP_VIEWER_VIEWER_OPTIONS_H_
#define ARGSDUMP_VIEWER_VIEWER_OPTIONS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/progress.h"
#include "viewer/arg_source.h"
#include "format/compare.h"
#include "viewer/remote_source.h"

namespace argsdump {

struct ViewerOptions {
  bool help = false;  // --help / -h: print ViewerHelp() and nothing else
  std::string dir;    // DIR (empty: the newest under outputs/)
  Selection selection;
  // How the user spelled --func / --func-type, when they named a kernel
  // or a type (selection.args.func_name / func_type): for the message when
  // the capture's kernel table has no such kernel.
  std::string func_flag, func_type_flag;
  bool export_text = false, npy = false, stats = false, first_nonfinite = false;
  std::string compare;  // GOLDEN
  Tolerance tolerance;
  bool tolerance_set = false;
  std::string out_dir;
  RemoteCapture remote;  // target empty: a local capture; auth_token read
  bool geometry = false;  // --geometry: the listing's view columns
  bool list_captures = false;                 // --captures
  std::map<std::string, std::string> labels;  // --label k=v (with --captures)
  ProgressMode progress = ProgressMode::kAuto;  // --progress / --noprogress
  // A job of many ranks (--job): a folder of rank<k>/args_dump captures, or
  // a job's name on remote.target. Its questions: first_nonfinite, a job to
  // compare with rank by rank (--compare-job), the reference rank of
  // --compare-ranks; ranks: only these (empty: all).
  std::string job;
  std::string compare_job;
  std::optional<uint32_t> compare_ranks;
  std::vector<uint32_t> ranks;
  // --trace FILE: write the capture's (or --job's) task timeline there.
  std::string trace;
};

// InvalidArgument naming the flag and what it takes, or the combination
// that does not go together (without the "dump_viewer: " prefix).
absl::StatusOr<ViewerOptions> ParseViewerCommandLine(const std::vector<std::string>& args);

// What --help prints: the synopsis and every flag with its meaning.
std::string ViewerHelp();

}  // namespace argsdump

#endif  // ARGSDUMP_VIEWER_VIEWER_OPTIONS_H_
