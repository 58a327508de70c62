// Where a session's records go: the capture service's sink when one is
// configured and takes the capture, else the local store in the session's
// folder. A service that cannot be reached or refuses the capture is a
// WARNING and the local store (strict: the error); a capture name the
// service would refuse, or one another capture holds, is replaced by a
// usable one with a WARNING. A streamed capture the service later loses
// goes on in the local folder (the sink's fallback).
#ifndef ARGSDUMP_SDK_SESSION_SINK_H_
#define ARGSDUMP_SDK_SESSION_SINK_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "collector/grpc_sink.h"
#include "collector/local_sink.h"
#include "collector/sink.h"
#include "device/dump_config.h"
#include "proto/argsdump/v1/record.pb.h"
#include "sdk/argsdump.h"
#include "sdk/wiring.h"

namespace argsdump {

struct SinkRequest {
  // The session's; each outlives the sink (the fallback reads `config` and
  // `options` when it runs).
  const DumpConfig* config = nullptr;
  const SessionOptions* options = nullptr;
  const SessionWiring* wiring = nullptr;
  std::string session_name;  // the session's unique name
  std::string prefix;        // <root>/<name>
  std::string dump_dir;      // <prefix>/args_dump: the local capture
  v1::CaptureInfo info;      // the capture's (its name is set here for a service)
};

struct ChosenSink {
  std::unique_ptr<CaptureSink> sink;
  LocalSink* local = nullptr;   // the sink, when it is the local store
  GrpcSink* remote = nullptr;   // the sink, when it streams
  // Streaming: the service, the capture's name there and the token sent.
  std::string remote_server, remote_name, remote_token;
};

// `warn` prints and keeps a WARNING.
absl::StatusOr<ChosenSink> ChooseSink(const SinkRequest& request,
                                      const std::function<void(const std::string&)>& warn);

}  // namespace argsdump

#endif  // ARGSDUMP_SDK_SESSION_SINK_H_
