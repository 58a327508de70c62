#include "sdk/session_sink.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "format/job.h"
#include "format/names.h"
#include "sdk/session_log.h"
#include "sdk/session_place.h"

namespace argsdump {
namespace {

absl::StatusOr<std::unique_ptr<LocalSink>> MakeLocal(const SinkRequest& request,
                                                     const v1::CaptureInfo& info) {
  return LocalSink::Create(request.dump_dir, info,
                           LocalSinkOptions{request.options->keep_journal,
                                            request.config->dedup});
}

// The capture's name on the service: the caller's, the folder's when the
// caller named the folder, else one made unique; a name the service would
// refuse (its rule, checked before any wait for the service) is replaced
// with a WARNING (strict: InvalidArgument).
absl::StatusOr<std::string> RemoteName(const SinkRequest& request,
                                       const std::function<void(const std::string&)>& warn) {
  const SessionWiring& wiring = *request.wiring;
  const std::string target = wiring.test_labels ? EnvOrEmpty("TEST_TARGET") : "";
  const size_t slash = request.prefix.find_last_of('/');
  const std::string name =
      !wiring.capture_name.empty() ? wiring.capture_name
      : request.info.has_job()
          ? JobCaptureName(request.info.job().job(), request.info.job().rank())
      : !wiring.output_prefix.empty()
          ? (slash == std::string::npos ? request.prefix : request.prefix.substr(slash + 1))
          : RemoteCaptureName(target, request.session_name);
  absl::Status valid = ValidateCaptureName(name);
  if (valid.ok()) return name;
  if (wiring.strict) {
    return absl::InvalidArgumentError(
        absl::StrCat("capture name '", name, "': ", valid.message()));
  }
  const std::string usable = RemoteCaptureName(target, request.session_name);
  warn(absl::StrCat("capture name '", name, "' cannot be used on the capture service (",
                    valid.message(), "); the capture is named '", usable, "' instead"));
  return usable;
}

// Connects to the service; a name another capture holds: the first free
// <name>_2, _3, ..., with a WARNING naming both (as a local capture takes a
// fresh folder).
absl::StatusOr<std::unique_ptr<GrpcSink>> Connect(
    GrpcSinkOptions* options, const std::function<void(const std::string&)>& warn) {
  GrpcSinkOptions& g = *options;
  auto remote = GrpcSink::Connect(g);
  const std::string wanted = g.capture;
  // A job's rank is one capture: taken, it is not taken again under
  // another name (the service would refuse the rank anyway).
  for (int k = 2; k <= 100 && !g.info.has_job() && !remote.ok() &&
                  remote.status().code() == absl::StatusCode::kAlreadyExists;
       ++k) {
    const std::string suffix = absl::StrCat("_", k);
    g.capture = absl::StrCat(wanted.substr(0, 128 - suffix.size()), suffix);
    g.info.set_name(g.capture);
    remote = GrpcSink::Connect(g);
    if (remote.ok()) {
      warn(absl::StrCat("capture service ", g.target, ": capture name '", wanted,
                        "' is taken; the capture is named '", g.capture, "' instead"));
    }
  }
  return remote;
}

// The service's sink; OK with no sink when the capture stays local.
// `info` gets the capture's name on the service (a local capture made
// instead carries it too).
absl::Status ChooseRemote(const SinkRequest& request,
                          const std::function<void(const std::string&)>& warn,
                          v1::CaptureInfo* info, ChosenSink* out) {
  const DumpConfig& config = *request.config;
  const SessionWiring& wiring = *request.wiring;
  GrpcSinkOptions g;
  g.target = config.capture_server;
  auto name = RemoteName(request, warn);
  if (!name.ok()) return name.status();
  g.capture = *name;
  info->set_name(g.capture);
  g.info = *info;
  g.payload_dedup = config.dedup;
  g.auth_token = wiring.auth_token;
  if (g.auth_token.empty() && !config.auth_token_file.empty()) {
    // Checked when the configuration was resolved; unreadable now: none.
    g.auth_token = ReadTokenFile(config.auth_token_file).value_or("");
  }
  if (!wiring.strict) g.connect_timeout = request.options->connect_timeout;
  g.retry_deadline = request.options->capture_retry_deadline;
  // A service that lost the capture (deleted while it was down): what it
  // had not acknowledged is kept here instead.
  g.fallback = [request, info = g.info]() -> absl::StatusOr<std::unique_ptr<CaptureSink>> {
    auto local = MakeLocal(request, info);
    if (!local.ok()) return local.status();
    return std::unique_ptr<CaptureSink>(std::move(local).value());
  };
  auto remote = Connect(&g, warn);
  if (remote.ok()) {
    out->remote_token = g.auth_token;
    out->remote_name = g.capture;
    out->remote_server = config.capture_server;
    out->remote = remote->get();
    out->sink = std::move(remote).value();
    PrintDumpLog(DumpLog::kInfo,
                 absl::StrCat("capture service ", out->remote_server, ": capture '",
                              out->remote_name, "' opened; streaming to it"));
    return absl::OkStatus();
  }
  if (wiring.strict) return remote.status();
  const absl::StatusCode code = remote.status().code();
  warn(absl::StrCat("capture service ", config.capture_server,
                    code == absl::StatusCode::kUnavailable ||
                            code == absl::StatusCode::kDeadlineExceeded
                        ? " cannot be reached ("
                        : " refused the capture (",
                    remote.status().message(), "); the capture is kept locally in ",
                    CapturePlace(request.dump_dir)));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ChosenSink> ChooseSink(const SinkRequest& request,
                                      const std::function<void(const std::string&)>& warn) {
  ChosenSink out;
  v1::CaptureInfo info = request.info;
  if (!request.config->capture_server.empty()) {
    if (absl::Status st = ChooseRemote(request, warn, &info, &out); !st.ok()) return st;
  }
  if (out.sink == nullptr) {
    auto local = MakeLocal(request, info);
    if (!local.ok()) return local.status();
    out.local = local->get();
    out.sink = std::move(local).value();
  }
  return out;
}

}  // namespace argsdump
