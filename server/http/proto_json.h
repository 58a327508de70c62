// The HTTP face's JSON: protobuf's proto3 JSON mapping of the service's own
// messages, with the .proto field names (snake_case, as the manifest and
// grpc_cli spell them) and every field without presence printed, so a
// dashboard sees counters that are zero. 64-bit integers are JSON strings,
// enums their names, NaN/Infinity the strings the mapping defines.
//
// Two kinds of member are added beside what the mapping prints, so a reader
// needs neither BigInt nor a bit decoder:
//   "<f>_hex": "0x0000000100000003"   beside every 64-bit task id field f
//       (a field named task_id or ending in _task: ArgRecord.task_id,
//       CrashedTask.task_id, CaptureCounters.first_overflow_task, ...),
//       spelled as the manifest and the viewer spell task ids;
//   "scalar_value": 0.1 | -3 | true | "NaN" | "Infinity" | "-Infinity"
//       right after scalar_bits in an ArgRecord of kind KIND_SCALAR: the
//       bits read as the record's dtype (float16 and bfloat16 included),
//       the manifest's token for it (format/names.h FormatScalarJson):
//       floats the shortest decimal that reads back to the same value,
//       integers exact (64-bit ones beyond 2^53 too: parse them as
//       big integers if you need every digit), bools true/false.
#ifndef ARGSDUMP_SERVER_HTTP_PROTO_JSON_H_
#define ARGSDUMP_SERVER_HTTP_PROTO_JSON_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"

namespace argsdump {

std::string ProtoToJson(const google::protobuf::Message& message);
// InvalidArgument naming what is wrong (unknown fields are refused; the
// added members above are not fields: a request holds none of them).
absl::Status ProtoFromJson(absl::string_view json, google::protobuf::Message* message);

}  // namespace argsdump

#endif  // ARGSDUMP_SERVER_HTTP_PROTO_JSON_H_
