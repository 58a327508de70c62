#include "server/proto_json.h"

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"

namespace argsdump {

std::string ProtoToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string out;
  // Printing fails only for values the mapping cannot spell (a Value
  // holding NaN); the service's messages have none.
  if (!google::protobuf::util::MessageToJsonString(message, &out, options).ok()) out = "{}";
  return out;
}

absl::Status ProtoFromJson(absl::string_view json, google::protobuf::Message* message) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto s = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), message, options);
  if (!s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("request body is not a ",
                                                   message->GetDescriptor()->full_name(),
                                                   " in JSON: ", std::string(s.message())));
  }
  return absl::OkStatus();
}

}  // namespace argsdump
