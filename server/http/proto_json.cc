#include "server/http/proto_json.h"

#include <cstdint>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "format/names.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "proto/argsdump/v1/record.pb.h"

namespace argsdump {
namespace {

namespace pb = google::protobuf;

bool IsTaskIdField(const pb::FieldDescriptor& f) {
  if (f.is_repeated()) return false;
  if (f.type() != pb::FieldDescriptor::TYPE_FIXED64 &&
      f.type() != pb::FieldDescriptor::TYPE_UINT64) {
    return false;
  }
  return f.name() == "task_id" || absl::EndsWith(f.name(), "_task");
}

// Copies protobuf's JSON text of a message (compact, as
// MessageToJsonString prints it) to `out`, walking the message beside it:
// each member is matched to its field by name, so what is added goes beside
// the right value whatever order the printer chose. Returns false on text
// it does not expect (the caller then keeps the printer's text as it is).
class Annotator {
 public:
  Annotator(absl::string_view json, std::string* out) : in_(json), out_(out) {}

  bool Run(const pb::Message& m) {
    if (!Object(m)) return false;
    SkipSpace();
    return at_ == in_.size();
  }

 private:
  void SkipSpace() {
    while (at_ < in_.size() && (in_[at_] == ' ' || in_[at_] == '\n' || in_[at_] == '\r' ||
                                in_[at_] == '\t')) {
      out_->push_back(in_[at_++]);
    }
  }
  bool Peek(char c) {
    SkipSpace();
    return at_ < in_.size() && in_[at_] == c;
  }
  bool Expect(char c) {
    if (!Peek(c)) return false;
    out_->push_back(in_[at_++]);
    return true;
  }

  // A JSON string, copied; `text` gets its raw characters between the quotes.
  bool String(std::string* text) {
    if (!Expect('"')) return false;
    const size_t begin = at_;
    while (at_ < in_.size() && in_[at_] != '"') at_ += in_[at_] == '\\' ? 2 : 1;
    if (at_ >= in_.size()) return false;
    if (text != nullptr) text->assign(in_.data() + begin, at_ - begin);
    out_->append(in_.data() + begin, at_ - begin);
    out_->push_back(in_[at_++]);
    return true;
  }

  // Any JSON value, copied as it is.
  bool CopyValue(int depth = 0) {
    if (depth > 100) return false;
    SkipSpace();
    if (at_ >= in_.size()) return false;
    const char c = in_[at_];
    if (c == '"') return String(nullptr);
    if (c == '{' || c == '[') {
      const char close = c == '{' ? '}' : ']';
      out_->push_back(in_[at_++]);
      if (Expect(close)) return true;
      for (;;) {
        if (c == '{' && !(String(nullptr) && Expect(':'))) return false;
        if (!CopyValue(depth + 1)) return false;
        if (Expect(close)) return true;
        if (!Expect(',')) return false;
      }
    }
    const size_t begin = at_;
    while (at_ < in_.size() && in_[at_] != ',' && in_[at_] != '}' && in_[at_] != ']' &&
           in_[at_] != ' ' && in_[at_] != '\n') {
      ++at_;
    }
    if (at_ == begin) return false;
    out_->append(in_.data() + begin, at_ - begin);
    return true;
  }

  // The value of field `f` of `m` (a message, a list of them, or a leaf).
  bool FieldValue(const pb::Message& m, const pb::FieldDescriptor* f) {
    if (f == nullptr || f->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE || f->is_map()) {
      return CopyValue();
    }
    const pb::Reflection& r = *m.GetReflection();
    if (!f->is_repeated()) return Peek('{') ? Object(r.GetMessage(m, f)) : CopyValue();
    if (!Peek('[')) return CopyValue();
    Expect('[');
    if (Expect(']')) return true;
    for (int i = 0;; ++i) {
      if (i < r.FieldSize(m, f) && Peek('{')) {
        if (!Object(r.GetRepeatedMessage(m, f, i))) return false;
      } else if (!CopyValue()) {
        return false;
      }
      if (Expect(']')) return true;
      if (!Expect(',')) return false;
    }
  }

  // What goes after field `f`'s value in `m`'s object.
  void Additions(const pb::Message& m, const pb::FieldDescriptor& f) {
    const pb::Reflection& r = *m.GetReflection();
    if (IsTaskIdField(f)) {
      absl::StrAppend(out_, ",\"", f.name(), "_hex\":\"", TaskIdHex(r.GetUInt64(m, &f)), "\"");
    }
    const pb::Descriptor* record = v1::ArgRecord::descriptor();
    if (m.GetDescriptor() == record && f.number() == v1::ArgRecord::kScalarBitsFieldNumber) {
      const pb::FieldDescriptor* kind = record->FindFieldByNumber(v1::ArgRecord::kKindFieldNumber);
      const pb::FieldDescriptor* dtype =
          record->FindFieldByNumber(v1::ArgRecord::kDtypeFieldNumber);
      if (r.GetEnumValue(m, kind) == v1::KIND_SCALAR) {
        absl::StrAppend(out_, ",\"scalar_value\":",
                        FormatScalarJson(r.GetEnumValue(m, dtype), r.GetUInt64(m, &f)));
      }
    }
  }

  bool Object(const pb::Message& m) {
    if (!Expect('{')) return false;
    if (Expect('}')) return true;
    for (;;) {
      std::string key;
      if (!String(&key) || !Expect(':')) return false;
      const pb::FieldDescriptor* f = m.GetDescriptor()->FindFieldByName(key);
      if (!FieldValue(m, f)) return false;
      if (f != nullptr) Additions(m, *f);
      if (Expect('}')) return true;
      if (!Expect(',')) return false;
    }
  }

  absl::string_view in_;
  size_t at_ = 0;
  std::string* out_;
};

}  // namespace

std::string ProtoToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string printed;
  // Printing fails only for values the mapping cannot spell (a Value
  // holding NaN); the service's messages have none.
  if (!google::protobuf::util::MessageToJsonString(message, &printed, options).ok()) return "{}";
  // A request is printed as the mapping alone, so that ProtoFromJson
  // takes back what this printed of it.
  if (absl::EndsWith(message.GetDescriptor()->name(), "Request")) return printed;
  std::string out;
  out.reserve(printed.size() + printed.size() / 4);
  if (!Annotator(printed, &out).Run(message)) return printed;
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
