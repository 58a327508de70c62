// The HTTP face's JSON: protobuf's proto3 JSON mapping of the service's own
// messages, with the .proto field names (snake_case, as the manifest and
// grpc_cli spell them) and every field without presence printed, so a
// dashboard sees counters that are zero. 64-bit integers are JSON strings,
// enums their names, NaN/Infinity the strings the mapping defines.
#ifndef ARGSDUMP_SERVER_PROTO_JSON_H_
#define ARGSDUMP_SERVER_PROTO_JSON_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"

namespace argsdump {

std::string ProtoToJson(const google::protobuf::Message& message);
// InvalidArgument naming what is wrong (unknown fields are refused).
absl::Status ProtoFromJson(absl::string_view json, google::protobuf::Message* message);

}  // namespace argsdump

#endif  // ARGSDUMP_SERVER_PROTO_JSON_H_
