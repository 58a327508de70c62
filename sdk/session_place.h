// Where a session's capture goes, and where messages say it is: the
// session's unique name and folder (<root>/<name>, claimed with mkdir so two
// sessions, of this or another process, never share one), the capture's
// name on a capture service, and CapturePlace (sdk/wiring.h) for paths that
// bazel test zips into outputs.zip.
#ifndef ARGSDUMP_SDK_SESSION_PLACE_H_
#define ARGSDUMP_SDK_SESSION_PLACE_H_

#include <string>

#include "proto/argsdump/v1/record.pb.h"
#include "sdk/wiring.h"

namespace argsdump {

// A name as a folder (and capture) name: [A-Za-z0-9._-], the rest '_', no
// leading '.', at most 96 characters ("session" when nothing is left).
std::string FolderName(const std::string& s);

// The capture's name on a service: <target>.<session>.<stamp>.<tag>, in
// [A-Za-z0-9._-], at most 128 characters (unique per run).
std::string RemoteCaptureName(const std::string& target, const std::string& session);

// The session's name before it is made unique: the options', the test
// case's, else the program's.
std::string SessionBaseName(const std::string& option_name, const std::string& test_case);

struct SessionPlace {
  std::string name;      // the session's unique name
  std::string prefix;    // <root>/<name>: the capture's parent
  std::string dump_dir;  // <prefix>/args_dump
  bool claimed = false;  // created by this session (removed at Finish if left empty)
};

// The place of a session named `base`: under wiring.output_prefix when
// set, else under `config_path`, $TEST_UNDECLARED_OUTPUTS_DIR or
// ./outputs (then with a stamp). A rank of a `job` (not null) goes to
// <that root>/<job>/rank<k> (no stamp: every rank of the job meets there),
// or <job>_2/rank<k>, ... when an earlier run left that rank's folder. Only
// a session that `captures` claims a folder.
SessionPlace PlaceSession(const std::string& base, bool captures,
                          const std::string& config_path, const SessionWiring& wiring,
                          const v1::JobMember* job = nullptr);

}  // namespace argsdump

#endif  // ARGSDUMP_SDK_SESSION_PLACE_H_
