// dump_viewer --server host:port --capture NAME: a capture service as an
// ArgSource. Entries come from QueryArgs (the selection's task, stage, role,
// arg and func are sent as the query's filter, so a task lookup reads one
// page), payloads from ReadPayload, only for the entries a command needs.
//
// A finished capture is read in the server's manifest order with the
// server's manifest indices. A live capture has no manifest order yet: its
// records so far are fetched (metadata only) and put in the order the
// manifest will have (ManifestOrder) if nothing else arrives, so the
// indices are positions among the records so far.
#ifndef ARGSDUMP_VIEWER_REMOTE_SOURCE_H_
#define ARGSDUMP_VIEWER_REMOTE_SOURCE_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "proto/argsdump/v1/capture_service.pb.h"
#include "proto/argsdump/v1/record.pb.h"
#include "viewer/arg_source.h"

namespace argsdump {

struct RemoteCapture {
  std::string target;   // host:port
  std::string capture;  // its name on the service
  std::shared_ptr<grpc::ChannelCredentials> credentials;  // null: insecure
  std::string auth_token;  // "authorization: Bearer <token>" when set
};

// NotFound naming the capture and a few that exist; the service's status
// (with what was asked) when it cannot be reached or refuses.
absl::StatusOr<std::unique_ptr<ArgSource>> OpenRemoteCapture(const RemoteCapture& remote,
                                                             const Selection& selection);

// The captures on the service whose labels include all of `labels`, by
// name (every page). The service's status, with the call, on failure.
absl::StatusOr<std::vector<v1::CaptureSummary>> ListRemoteCaptures(
    const RemoteCapture& remote, const std::map<std::string, std::string>& labels);

// A record as the manifest reader would read its args_dump.json entry;
// DataLoss for a role, stage, kind or dtype that is not the schema's (the
// manifest reader's rule).
absl::StatusOr<ManifestEntry> EntryFromRecord(const v1::ArgRecord& record, uint64_t index,
                                              uint64_t record_id);

}  // namespace argsdump

#endif  // ARGSDUMP_VIEWER_REMOTE_SOURCE_H_
