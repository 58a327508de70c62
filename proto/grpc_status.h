// absl::Status <-> grpc::Status: the one conversion both ends of the
// capture service use (the server's reactors, client/capture_client).
// Codes map one to one (both are google.rpc.Code); a code outside them
// becomes UNKNOWN. Messages are kept, cut to at most
// kMaxStatusMessageBytes (on a UTF-8 boundary, saying how much was cut), so
// an error never outgrows the call's trailing metadata.
//
// Why here: capture_service.proto states the contract this implements
// ("errors are gRPC status codes with a message"), and every side of the
// service already depends on //proto; the client does not reach into
// server/ for it, and the server does not reach into the client.
#ifndef ARGSDUMP_PROTO_GRPC_STATUS_H_
#define ARGSDUMP_PROTO_GRPC_STATUS_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/status.h"

namespace argsdump {

// gRPC carries the message percent-encoded in a header; its receivers refuse
// metadata past 8 KiB. 1 KiB stays well inside that even fully escaped.
inline constexpr size_t kMaxStatusMessageBytes = 1024;

// `message` when it fits in kMaxStatusMessageBytes; otherwise its head,
// cut on a UTF-8 character boundary, and " ... (N more bytes)", together
// at most kMaxStatusMessageBytes.
std::string BoundedStatusMessage(absl::string_view message);

// OK stays OK (its message, if any, is dropped, as absl does).
grpc::Status ToGrpcStatus(const absl::Status& status);

// A status from the other end of a call. `context` (when not empty) says
// which call: the message reads "<context>: <message>".
absl::Status FromGrpcStatus(const grpc::Status& status, absl::string_view context = {});

}  // namespace argsdump

#endif  // ARGSDUMP_PROTO_GRPC_STATUS_H_
