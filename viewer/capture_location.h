// Which capture directory a path names, for dump_viewer and the SDK's test
// library: a capture directory (holding args_dump.json), a folder holding
// args_dump/, a folder of captures (<name>/args_dump/ each: an output
// prefix, a test's undeclared outputs), a test.outputs folder or an
// outputs.zip (what Bazel 4 makes of a test's undeclared outputs), or a
// path inside a zip (bazel-testlogs/pkg/t/test.outputs/outputs.zip/Suite.Case).
// A capture inside a zip is extracted once into a cache folder (keyed by
// the zip's path, size and time) and opened from there; nothing of the
// archive is written outside that folder (viewer/zip_extract.h). Where there is a
// choice, the newest capture is picked and the note says which and how to
// pick another.
#ifndef ARGSDUMP_VIEWER_CAPTURE_LOCATION_H_
#define ARGSDUMP_VIEWER_CAPTURE_LOCATION_H_

#include <string>

#include "absl/status/statusor.h"

namespace argsdump {

struct LocatedCapture {
  std::string dir;   // the capture directory to open (holds args_dump.json)
  std::string name;  // how to call it: the path given, or ZIP/inner
  std::string note;  // "" when the path named exactly one capture
  bool from_zip = false;
  std::string zip;   // from a zip: the zip file's path (as given)
  // From a zip: a name for the capture made of its folder there (less a
  // last "args_dump"), else of the zip's file name less ".zip". One plain
  // name part; it comes from the archive.
  std::string zip_capture_name;
};

// NotFound naming the path when it names no capture; DataLoss for a
// damaged or hostile zip (file, member and byte: viewer/zip_archive.h);
// the errors of ExtractZipFolder (viewer/zip_extract.h: caps exceeded, a
// link or special file in the cache); Unavailable when the cache cannot
// be written.
absl::StatusOr<LocatedCapture> LocateCapture(const std::string& path);

// Nothing named: the newest capture under ./outputs/ (sim_run's, the SDK's
// outside bazel test) and ./bazel-testlogs/ or ./.bazel/testlogs/ (test
// outputs). NotFound when there is none.
absl::StatusOr<LocatedCapture> LocateNewestCapture();

// Where zip members are extracted: $XDG_CACHE_HOME/argsdump/unzipped,
// else ~/.cache/argsdump/unzipped, else /tmp/argsdump-<uid>/unzipped.
std::string CaptureCacheDir();

}  // namespace argsdump

#endif  // ARGSDUMP_VIEWER_CAPTURE_LOCATION_H_
