// A session's setup before anything runs: its options checked, the dump
// configuration resolved from its entry points (the command line > the API
// > the environment > the config file, or the caller's resolution), later
// changes of it (SetDumpConfig, an edited config file), and the capture's
// labels. Every line the resolution logs is printed; the WARNINGs are kept
// for the session's result.
#ifndef ARGSDUMP_SDK_SESSION_SETUP_H_
#define ARGSDUMP_SDK_SESSION_SETUP_H_

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "device/dump_config.h"
#include "device/sim/sim_runtime.h"
#include "sdk/argsdump.h"
#include "sdk/wiring.h"

namespace argsdump {

// SessionOptions within their ranges; InvalidArgument naming the field.
absl::Status CheckSessionOptions(const SessionOptions& options);

class SessionSetup {
 public:
  // Resolves the configuration as Open does: `wiring.resolved` as it is,
  // else the one resolution sim_run uses too (device/dump_config.h).
  static SessionSetup Resolve(const SessionOptions& options, const SessionWiring& wiring);

  const DumpConfig& config() const { return config_; }
  // What the resolution warned of (printed already), in order.
  const std::vector<std::string>& warnings() const { return warnings_; }
  // Whether the session records anything: a level, the dynamic switch or
  // the overflow check.
  bool WantsCapture(const SessionOptions& options) const {
    return config_.level > 0 || options.dynamic_switch || config_.overflow;
  }
  // The runtime's configuration: wiring.sim's, else the options' threads,
  // with this dump configuration.
  SimConfig RuntimeConfig(const SessionOptions& options, const SessionWiring& wiring) const;
  // The job this session is a rank of: the caller's (wiring.job), else the
  // command line's, the options', the environment's (format/job.h); a
  // value that cannot be used was a WARNING and there is none.
  const std::optional<v1::JobMember>& job() const { return job_; }
  // A config file is watched for edits.
  bool watching() const { return watcher_ != nullptr; }

  // SetDumpConfig: `api` replaces the API entry (or, when the caller
  // resolved the configuration, is all of it); resolved again.
  void SetApi(const DumpConfigEntry& api, bool resolved_by_caller);
  // BeginStep: the watched file read again; true when the configuration
  // changed (config() holds the new one).
  bool PollFile();

 private:
  DumpConfig config_;
  std::vector<DumpConfigSource> above_file_;  // command line, API, environment
  std::string config_file_;
  std::unique_ptr<DumpConfigWatcher> watcher_;
  std::optional<int> default_level_;
  std::vector<std::string> warnings_;
  std::optional<v1::JobMember> job_;

  void ResolveJob(const SessionOptions& options, const SessionWiring& wiring);
};

using CaptureLabels = std::vector<std::pair<std::string, std::string>>;

// Sets `key` (in place when present, else appended).
void SetLabel(CaptureLabels* labels, const std::string& key, const std::string& value);

// The capture's labels: the test's identity (under bazel test, when
// wiring.test_labels), then the configuration's, then the code's; a later
// one replaces an earlier of the same key.
CaptureLabels SessionLabels(const SessionOptions& options, const SessionWiring& wiring,
                            const DumpConfig& config, const std::string& test_case);

}  // namespace argsdump

#endif  // ARGSDUMP_SDK_SESSION_SETUP_H_
