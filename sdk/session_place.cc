#include "sdk/session_place.h"

#include <sys/stat.h>

#include <cerrno>
#include <ctime>
#include <functional>
#include <mutex>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "format/job.h"
#include "sdk/exception_dump.h"
#include "sdk/session_log.h"
#include "store/capture_store.h"

extern char* program_invocation_short_name;

namespace argsdump {
namespace {

bool HoldsCapture(const std::string& dir) {
  struct stat st;
  return ::stat((dir + "/" + kManifestName).c_str(), &st) == 0 ||
         ::stat((dir + "/" + kJournalName).c_str(), &st) == 0;
}

std::string Stamp(const char* format) {
  std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), format, std::localtime(&now));
  return stamp;
}

// Session names taken in this process (several sessions of one test case).
std::mutex names_mu;
std::set<std::string>& TakenNames() {
  static auto* names = new std::set<std::string>;
  return *names;
}

// The first of name, name_2, name_3, ... no session of this process took
// and whose folder under `root` holds no capture.
std::string UniqueName(const std::string& root, const std::string& name) {
  std::lock_guard<std::mutex> lock(names_mu);
  for (int k = 1;; ++k) {
    const std::string candidate = k == 1 ? name : absl::StrCat(name, "_", k);
    if (TakenNames().count(candidate) > 0) continue;
    if (!root.empty() && HoldsCapture(absl::StrCat(root, "/", candidate, "/args_dump"))) continue;
    TakenNames().insert(candidate);
    return candidate;
  }
}

// Claims a folder <root>/<name>, <root>/<name>_2, ...: the first that no
// session of this process took and that mkdir creates, so two processes
// naming it in the same second do not share it. `claimed` tells whether a
// folder was created; when `root` cannot hold one, the name is returned
// unclaimed and writing the capture says why.
std::string ClaimFolder(const std::string& root, const std::string& name, bool* claimed) {
  *claimed = false;
  if (!CreateDirectories(root).ok()) return UniqueName(root, name);
  std::lock_guard<std::mutex> lock(names_mu);
  for (int k = 1;; ++k) {
    const std::string candidate = k == 1 ? name : absl::StrCat(name, "_", k);
    if (TakenNames().count(candidate) > 0) continue;
    if (::mkdir(absl::StrCat(root, "/", candidate).c_str(), 0755) != 0) {
      if (errno == EEXIST && k < 100000) continue;
      return candidate;  // not claimed: writing there will say why
    }
    TakenNames().insert(candidate);
    *claimed = true;
    return candidate;
  }
}

// A job's rank folder: <root>/<job>/rank<k>, claimed with mkdir; when a run
// before this one left rank<k> there, <root>/<job>_2/rank<k>, _3, ...: the
// ranks of a job run again meet in the same new folder. `claimed` as
// ClaimFolder's.
std::string ClaimRankFolder(const std::string& root, const v1::JobMember& job, bool* claimed) {
  *claimed = false;
  const std::string rank = JobRankFolder(job.rank());
  for (int k = 1; k < 100000; ++k) {
    const std::string folder =
        absl::StrCat(root, "/", job.job(), k == 1 ? std::string() : absl::StrCat("_", k));
    if (!CreateDirectories(folder).ok()) return absl::StrCat(folder, "/", rank);
    const std::string dir = absl::StrCat(folder, "/", rank);
    if (::mkdir(dir.c_str(), 0755) == 0) {
      *claimed = true;
      return dir;
    }
    if (errno != EEXIST) return dir;  // not claimed: writing there will say why
  }
  return absl::StrCat(root, "/", job.job(), "/", rank);
}

}  // namespace

std::string FolderName(const std::string& s) {
  std::string out = SafeFileName(s);
  while (!out.empty() && out.front() == '.') out.erase(out.begin());  // no "." or ".."
  if (out.size() > 96) out.resize(96);
  return out.empty() ? "session" : out;
}

std::string RemoteCaptureName(const std::string& target, const std::string& session) {
  std::string t = target;
  if (t.rfind("//", 0) == 0) t = t.substr(2);
  for (char& c : t) {
    if (c == ':') c = '.';
  }
  // Seconds and a random tag: test sandboxes reuse pids, and
  // --runs_per_test starts the same test several times at once.
  std::random_device random;
  const uint32_t tag = random();
  std::string name = absl::StrCat(t.empty() ? "" : FolderName(t) + ".", session, ".",
                                  Stamp("%Y%m%d-%H%M%S"), ".",
                                  absl::Hex(tag, absl::kZeroPad8));
  if (name.size() > 128) {
    const size_t hash = std::hash<std::string>()(name);
    name = absl::StrCat(name.substr(0, 111), ".", absl::Hex(hash, absl::kZeroPad16));
  }
  return name;
}

std::string SessionBaseName(const std::string& option_name, const std::string& test_case) {
  if (!option_name.empty()) return option_name;
  if (!test_case.empty()) return test_case;
  return program_invocation_short_name;
}

SessionPlace PlaceSession(const std::string& base, bool captures,
                          const std::string& config_path, const SessionWiring& wiring,
                          const v1::JobMember* job) {
  SessionPlace p;
  if (job != nullptr && wiring.output_prefix.empty()) {
    std::string root = config_path;
    if (root.empty()) root = EnvOrEmpty("TEST_UNDECLARED_OUTPUTS_DIR");
    if (root.empty()) {
      const std::string cwd = EnvOrEmpty("BUILD_WORKING_DIRECTORY");
      root = cwd.empty() ? "outputs" : cwd + "/outputs";
    }
    p.name = base;
    p.prefix = captures ? ClaimRankFolder(root, *job, &p.claimed)
                        : absl::StrCat(root, "/", job->job(), "/", JobRankFolder(job->rank()));
  } else if (!wiring.output_prefix.empty() && !wiring.claim_output_prefix) {
    p.name = base;
    p.prefix = wiring.output_prefix;
  } else if (!wiring.output_prefix.empty()) {
    // A default prefix: it, or a sibling _2, _3, ... (only a session that
    // may write claims a folder).
    const size_t slash = wiring.output_prefix.find_last_of('/');
    const std::string root =
        slash == std::string::npos ? "." : wiring.output_prefix.substr(0, slash);
    const std::string leaf = wiring.output_prefix.substr(slash + 1);
    const std::string taken = captures ? ClaimFolder(root, leaf, &p.claimed) : leaf;
    p.name = base;
    p.prefix = slash == std::string::npos ? taken : absl::StrCat(root, "/", taken);
  } else {
    std::string root = config_path;
    std::string name = FolderName(base);
    if (root.empty()) root = EnvOrEmpty("TEST_UNDECLARED_OUTPUTS_DIR");
    if (root.empty()) {
      const std::string cwd = EnvOrEmpty("BUILD_WORKING_DIRECTORY");
      root = cwd.empty() ? "outputs" : cwd + "/outputs";
      name = absl::StrCat(name, "_", Stamp("%Y%m%d_%H%M%S"));
    }
    p.name = captures ? ClaimFolder(root, name, &p.claimed) : UniqueName(root, name);
    p.prefix = absl::StrCat(root, "/", p.name);
  }
  p.dump_dir = p.prefix + "/args_dump";
  return p;
}

std::string CapturePlace(const std::string& path) {
  std::string dir = EnvOrEmpty("TEST_UNDECLARED_OUTPUTS_DIR");
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (dir.empty() || path.size() <= dir.size() + 1 || path.compare(0, dir.size(), dir) != 0 ||
      path[dir.size()] != '/') {
    return path;
  }
  std::string inner = path.substr(dir.size() + 1);
  while (!inner.empty() && inner.back() == '/') inner.pop_back();
  std::string zip = EnvOrEmpty("TEST_UNDECLARED_OUTPUTS_ZIP");
  if (zip.empty()) zip = dir + "/outputs.zip";
  // Outside the sandbox: <output base>/sandbox/<strategy>/<n>/execroot/...
  // is <output base>/execroot/...
  const size_t sandbox = zip.find("/sandbox/");
  const size_t execroot = zip.find("/execroot/", sandbox == std::string::npos ? 0 : sandbox);
  if (sandbox != std::string::npos && execroot != std::string::npos) {
    zip.erase(sandbox, execroot - sandbox);
  }
  // From the workspace: <execroot>/bazel-out/<config>/testlogs/... is
  // bazel-testlogs/...
  const size_t out = zip.find("/bazel-out/");
  const size_t logs = out == std::string::npos ? out : zip.find("/testlogs/", out + 1);
  if (logs == std::string::npos) return absl::StrCat(zip, "/", inner);
  return absl::StrCat("bazel-testlogs/", zip.substr(logs + 10), "/", inner, " (the zip: ", zip,
                      ")");
}

}  // namespace argsdump
