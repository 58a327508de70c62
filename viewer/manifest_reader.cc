#include "viewer/manifest_reader.h"

#include <sys/stat.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"

#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "format/device_crash.h"
#include "format/names.h"

namespace argsdump {
namespace {

constexpr int kMaxDepth = 64;  // unknown nested values we skip

}  // namespace

// Past the '}' that closes the current entry, checking only its structure:
// strings (with escapes) and nesting. Runs over the buffer a block at a time.
absl::Status ManifestReader::SkipRestOfEntry() {
  int depth = 1;
  bool in_string = false, escaped = false;
  for (;;) {
    if (at_ == end_ && Refill() < 0) {
      return Error(in_string ? "the file ends inside a string" : "the file ends inside an entry");
    }
    const char* p = buffer_.data() + at_;
    const char* const end = buffer_.data() + end_;
    for (; p < end; ++p) {
      const char c = *p;
      if (in_string) {
        if (escaped) {
          escaped = false;
        } else if (c == '\\') {
          escaped = true;
        } else if (c == '"') {
          in_string = false;
        }
        continue;
      }
      if (c == '"') {
        in_string = true;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if ((c == '}' || c == ']') && --depth == 0) {
        at_ = static_cast<size_t>(p - buffer_.data());
        if (c != '}') return Error("expected '}' at the end of an entry");
        ++at_;
        return absl::OkStatus();
      }
    }
    at_ = end_;
  }
}

absl::Status ManifestReader::ParseStringView(absl::string_view* out, std::string* scratch,
                                             absl::string_view where) {
  SkipSpace();
  // Fast path: the whole string, without escapes, inside the buffer.
  if (at_ < end_ && buffer_[at_] == '"') {
    for (size_t i = at_ + 1; i < end_; ++i) {
      const unsigned char ch = static_cast<unsigned char>(buffer_[i]);
      if (ch == '"') {
        *out = absl::string_view(buffer_.data() + at_ + 1, i - at_ - 1);
        at_ = i + 1;
        return absl::OkStatus();
      }
      if (ch == '\\' || ch < 0x20) break;
    }
  }
  if (absl::Status s = ParseString(scratch, where); !s.ok()) return s;
  *out = *scratch;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ManifestReader>> ManifestReader::Open(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  std::unique_ptr<ManifestReader> r(new ManifestReader(path, f));
  struct stat st;
  const uint64_t size = ::fstat(::fileno(f), &st) == 0 && st.st_size > 0
                            ? static_cast<uint64_t>(st.st_size)
                            : uint64_t{1} << 20;
  r->buffer_.resize(std::min<uint64_t>(std::max<uint64_t>(size + 1, 4096), 1 << 20));
  return r;
}

std::unique_ptr<ManifestReader> ManifestReader::FromBytes(std::string bytes, std::string name) {
  std::unique_ptr<ManifestReader> r(new ManifestReader(std::move(name), nullptr));
  r->bytes_ = std::move(bytes);
  r->f_ = ::fmemopen(r->bytes_.data(), r->bytes_.size(), "rb");  // null: reads as empty
  r->buffer_.resize(std::min<size_t>(r->bytes_.size() + 1, 1 << 20));
  return r;
}

ManifestReader::~ManifestReader() {
  if (f_ != nullptr) std::fclose(f_);
}

int ManifestReader::Refill() {
  consumed_ += end_;
  end_ = f_ == nullptr ? 0 : std::fread(buffer_.data(), 1, buffer_.size(), f_);
  at_ = 0;
  if (end_ == 0) return -1;
  return static_cast<unsigned char>(buffer_[0]);
}


absl::Status ManifestReader::Error(absl::string_view what) const {
  return absl::DataLossError(absl::StrCat(path_, ": byte ", consumed_ + at_, ": ",
                                          in_entry_ ? absl::StrCat("entry ", entry_, ": ") : "",
                                          what));
}

absl::Status ManifestReader::Expect(char c, absl::string_view where) {
  SkipSpace();
  const int got = Get();
  if (ABSL_PREDICT_TRUE(got == c)) return absl::OkStatus();
  return Error(absl::StrCat(where, ": expected '", std::string(1, c), "', found ",
                            got < 0 ? std::string("the end of the file")
                                    : absl::StrCat("'", std::string(1, static_cast<char>(got)), "'")));
}

absl::Status ManifestReader::ParseString(std::string* out, absl::string_view where) {
  if (absl::Status s = Expect('"', where); !s.ok()) return s;
  out->clear();
  for (;;) {
    // The plain characters up to the end of the buffer, as one block.
    size_t run = at_;
    while (run < end_) {
      const unsigned char ch = static_cast<unsigned char>(buffer_[run]);
      if (ch == '"' || ch == '\\' || ch < 0x20) break;
      ++run;
    }
    out->append(buffer_.data() + at_, run - at_);
    at_ = run;
    int c = Get();
    if (c < 0) return Error(absl::StrCat(where, ": the file ends inside a string"));
    if (c == '"') return absl::OkStatus();
    if (c < 0x20) return Error(absl::StrCat(where, ": a control character inside a string"));
    if (c != '\\') {
      out->push_back(static_cast<char>(c));
      continue;
    }
    c = Get();
    switch (c) {
      case '"': case '\\': case '/': out->push_back(static_cast<char>(c)); break;
      case 'b': out->push_back('\b'); break;
      case 'f': out->push_back('\f'); break;
      case 'n': out->push_back('\n'); break;
      case 'r': out->push_back('\r'); break;
      case 't': out->push_back('\t'); break;
      case 'u': {
        uint32_t cp = 0;
        for (int i = 0; i < 4; ++i) {
          const int h = Get();
          const int v = h >= '0' && h <= '9' ? h - '0'
                        : h >= 'a' && h <= 'f' ? h - 'a' + 10
                        : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
          if (v < 0) return Error(absl::StrCat(where, ": a bad \\u escape"));
          cp = cp * 16 + static_cast<uint32_t>(v);
        }
        // UTF-8 (surrogate pairs are kept as two code points: names here are ASCII).
        if (cp < 0x80) {
          out->push_back(static_cast<char>(cp));
        } else if (cp < 0x800) {
          out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
          out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        } else {
          out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
          out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
          out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
        }
        break;
      }
      default:
        return Error(absl::StrCat(where, ": a bad escape in a string"));
    }
  }
}

absl::Status ManifestReader::ParseNumberToken(std::string* out, absl::string_view where) {
  absl::string_view token;
  if (absl::Status s = NumberToken(&token, where); !s.ok()) return s;
  out->assign(token.data(), token.size());
  return absl::OkStatus();
}

absl::Status ManifestReader::NumberToken(absl::string_view* out, absl::string_view where) {
  SkipSpace();
  size_t n = 0;
  for (int c = Peek(); c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' ||
                       (c >= '0' && c <= '9');
       c = Peek()) {
    if (n == sizeof(number_)) {
      return Error(absl::StrCat(where, ": a number longer than ", sizeof(number_), " characters"));
    }
    number_[n++] = static_cast<char>(Get());
  }
  if (n == 0) return Error(absl::StrCat(where, ": expected a number"));
  *out = absl::string_view(number_, n);
  return absl::OkStatus();
}

absl::Status ManifestReader::ParseUint(uint64_t* out, absl::string_view where) {
  SkipSpace();
  // Fast path: plain digits that fit, followed by something not numeric.
  uint64_t v = 0;
  size_t digits = 0;
  for (int c = Peek(); c >= '0' && c <= '9' && digits < 19; c = Peek(), ++digits) {
    v = v * 10 + static_cast<uint64_t>(c - '0');
    ++at_;
  }
  const int next = Peek();
  if (digits > 0 && !(next >= '0' && next <= '9') && next != '.' && next != 'e' &&
      next != 'E' && next != '-' && next != '+') {
    *out = v;
    return absl::OkStatus();
  }
  // Anything else (20 digits, a sign, a fraction): the whole token, and
  // the digits already read in front of it.
  absl::string_view rest;
  if (next >= 0 && (absl::ascii_isdigit(next) || next == '.' || next == 'e' || next == 'E' ||
                    next == '-' || next == '+')) {
    if (absl::Status s = NumberToken(&rest, where); !s.ok()) return s;
  }
  const std::string token = digits > 0 ? absl::StrCat(v, rest) : std::string(rest);
  if (token.empty()) return Error(absl::StrCat(where, ": expected a number"));
  if (!absl::SimpleAtoi(token, out)) {
    return Error(absl::StrCat(where, ": expected an unsigned integer, found ", token));
  }
  return absl::OkStatus();
}

absl::Status ManifestReader::ParseInt(int64_t* out, absl::string_view where) {
  absl::string_view token;
  if (absl::Status s = NumberToken(&token, where); !s.ok()) return s;
  if (!absl::SimpleAtoi(token, out)) {
    return Error(absl::StrCat(where, ": expected an integer, found ", token));
  }
  return absl::OkStatus();
}

absl::Status ManifestReader::ParseBool(bool* out, absl::string_view where) {
  SkipSpace();
  const int c = Peek();
  const char* word = c == 't' ? "true" : c == 'f' ? "false" : nullptr;
  if (word == nullptr) return Error(absl::StrCat(where, ": expected true or false"));
  for (const char* p = word; *p; ++p) {
    if (Get() != *p) return Error(absl::StrCat(where, ": expected true or false"));
  }
  *out = c == 't';
  return absl::OkStatus();
}

absl::Status ManifestReader::ParseUintArray(std::vector<uint64_t>* out, absl::string_view where) {
  out->clear();
  if (absl::Status s = Expect('[', where); !s.ok()) return s;
  SkipSpace();
  if (Peek() == ']') {
    Get();
    return absl::OkStatus();
  }
  for (;;) {
    uint64_t v;
    if (absl::Status s = ParseUint(&v, where); !s.ok()) return s;
    out->push_back(v);
    if (out->size() > 64) return Error(absl::StrCat(where, ": more than 64 elements"));
    SkipSpace();
    const int c = Get();
    if (c == ']') return absl::OkStatus();
    if (c != ',') return Error(absl::StrCat(where, ": expected ',' or ']' in an array"));
  }
}

absl::Status ManifestReader::SkipValue(absl::string_view where, int depth) {
  if (depth > kMaxDepth) return Error(absl::StrCat(where, ": nested more than 64 deep"));
  SkipSpace();
  const int c = Peek();
  if (c == '"') {
    std::string ignored;
    return ParseString(&ignored, where);
  }
  if (c == '{' || c == '[') {
    const char close = c == '{' ? '}' : ']';
    Get();
    SkipSpace();
    if (Peek() == close) {
      Get();
      return absl::OkStatus();
    }
    for (;;) {
      if (c == '{') {
        std::string key;
        if (absl::Status s = ParseString(&key, where); !s.ok()) return s;
        if (absl::Status s = Expect(':', where); !s.ok()) return s;
      }
      if (absl::Status s = SkipValue(where, depth + 1); !s.ok()) return s;
      SkipSpace();
      const int n = Get();
      if (n == close) return absl::OkStatus();
      if (n != ',') return Error(absl::StrCat(where, ": expected ',' or '", std::string(1, close), "'"));
    }
  }
  if (c == 't' || c == 'f') {
    bool ignored;
    return ParseBool(&ignored, where);
  }
  if (c == 'n') {
    for (const char* p = "null"; *p; ++p) {
      if (Get() != *p) return Error(absl::StrCat(where, ": expected a value"));
    }
    return absl::OkStatus();
  }
  std::string ignored;
  return ParseNumberToken(&ignored, where);
}

// {"count": N, "min": x, ...}: known keys read, unknown ones skipped.
absl::Status ManifestReader::ParseStats(ManifestEntry::Stats* out, absl::string_view where) {
  return ParseObject(where, [&](const std::string& key) -> absl::Status {
    uint64_t* count = key == "count"     ? &out->count
                      : key == "nan"     ? &out->nan
                      : key == "pos_inf" ? &out->pos_inf
                      : key == "neg_inf" ? &out->neg_inf
                      : key == "zeros"   ? &out->zeros
                                         : nullptr;
    double* number = key == "min"    ? &out->min
                     : key == "max"  ? &out->max
                     : key == "mean" ? &out->mean
                     : key == "l2"   ? &out->l2
                                     : nullptr;
    if (count != nullptr) return ParseUint(count, where);
    if (number == nullptr) return SkipValue(where, 1);
    absl::string_view token;
    if (absl::Status s = NumberToken(&token, where); !s.ok()) return s;
    if (!absl::SimpleAtod(token, number)) {
      return Error(absl::StrCat(where, ": \"", key, "\": expected a number, found ", token));
    }
    return absl::OkStatus();
  });
}

absl::Status ManifestReader::ParseObject(
    absl::string_view where, const std::function<absl::Status(const std::string& key)>& field) {
  if (absl::Status s = Expect('{', where); !s.ok()) return s;
  SkipSpace();
  if (Peek() == '}') {
    Get();
    return absl::OkStatus();
  }
  std::string key;
  for (;;) {
    if (absl::Status s = ParseString(&key, where); !s.ok()) return s;
    if (absl::Status s = Expect(':', where); !s.ok()) return s;
    if (absl::Status s = field(key); !s.ok()) return s;
    SkipSpace();
    const int c = Get();
    if (c == '}') return absl::OkStatus();
    if (c != ',') return Error(absl::StrCat(where, ": expected ',' or '}'"));
  }
}

absl::Status ManifestReader::ParseInt32(int32_t* out, absl::string_view where) {
  int64_t v;
  if (absl::Status s = ParseInt(&v, where); !s.ok()) return s;
  if (v < INT32_MIN || v > INT32_MAX) return Error(absl::StrCat(where, ": out of range"));
  *out = static_cast<int32_t>(v);
  return absl::OkStatus();
}

// {"signal": 11, "signal_name": "SIGSEGV", ..., "executing": [{...}]}:
// known keys read (a wrong type is an error), unknown ones skipped; then
// the service's bounds (CheckDeviceCrash).
absl::Status ManifestReader::ParseDeviceCrash(v1::DeviceCrash* out, absl::string_view where) {
  std::string text;
  absl::Status parsed = ParseObject(where, [&](const std::string& key) -> absl::Status {
    const std::string at = absl::StrCat(where, ": \"", key.substr(0, 40), "\"");
    if (key == "signal") {
      int32_t v;
      if (absl::Status s = ParseInt32(&v, at); !s.ok()) return s;
      out->set_signal(v);
    } else if (key == "exit_status") {
      int32_t v;
      if (absl::Status s = ParseInt32(&v, at); !s.ok()) return s;
      out->set_exit_status(v);
    } else if (key == "signal_name") {
      return ParseString(out->mutable_signal_name(), at);
    } else if (key == "description") {
      return ParseString(out->mutable_description(), at);
    } else if (key == "tasks_in_flight") {
      uint64_t v;
      if (absl::Status s = ParseUint(&v, at); !s.ok()) return s;
      out->set_tasks_in_flight(v);
    } else if (key == "fault_address") {
      if (absl::Status s = ParseString(&text, at); !s.ok()) return s;
      const std::optional<uint64_t> a = absl::StartsWith(text, "0x") ? ParseTaskIdHex(text)
                                                                      : std::nullopt;
      if (!a) {
        return Error(absl::StrCat(at, ": expected \"0x\" and up to 16 hex digits, found \"",
                                  text.substr(0, 40), "\""));
      }
      out->set_has_fault_address(true);
      out->set_fault_address(*a);
    } else if (key == "executing") {
      if (absl::Status s = Expect('[', at); !s.ok()) return s;
      SkipSpace();
      if (Peek() == ']') {
        Get();
        return absl::OkStatus();
      }
      for (;;) {
        if (out->executing_size() == kMaxCrashedTasks) {
          return Error(absl::StrCat(at, ": more than ", kMaxCrashedTasks, " tasks"));
        }
        if (absl::Status s = ParseCrashedTask(out->add_executing(), at); !s.ok()) return s;
        SkipSpace();
        const int c = Get();
        if (c == ']') break;
        if (c != ',') return Error(absl::StrCat(at, ": expected ',' or ']' in an array"));
      }
    } else {
      return SkipValue(at, 1);
    }
    return absl::OkStatus();
  });
  if (!parsed.ok()) return parsed;
  if (absl::Status s = CheckDeviceCrash(*out); !s.ok()) {
    return Error(absl::StrCat(where, ": ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status ManifestReader::ParseCrashedTask(v1::CrashedTask* out, absl::string_view where) {
  std::string text;
  return ParseObject(where, [&](const std::string& key) -> absl::Status {
    const std::string at = absl::StrCat(where, ": \"", key.substr(0, 40), "\"");
    if (key == "task_id") {
      if (absl::Status s = ParseString(&text, at); !s.ok()) return s;
      const std::optional<uint64_t> id = ParseTaskIdHex(text);
      if (!id) {
        return Error(absl::StrCat(at, ": expected \"0x\" and up to 16 hex digits, found \"",
                                  text.substr(0, 40), "\""));
      }
      out->set_task_id(*id);
    } else if (key == "func_ids") {
      std::vector<uint64_t> ids;
      if (absl::Status s = ParseUintArray(&ids, at); !s.ok()) return s;
      out->clear_func_ids();
      for (uint64_t id : ids) {
        if (id > UINT32_MAX) return Error(absl::StrCat(at, ": ", id, " is out of range"));
        out->add_func_ids(static_cast<uint32_t>(id));
      }
    } else if (key == "func") {
      return ParseString(out->mutable_func(), at);
    } else if (key == "func_type") {
      return ParseString(out->mutable_func_type(), at);
    } else if (key == "worker" || key == "thread" || key == "step") {
      uint32_t v;
      if (absl::Status s = ParseUint32(&v, at); !s.ok()) return s;
      if (key == "worker") out->set_worker(v);
      if (key == "thread") out->set_thread(v);
      if (key == "step") out->set_step(v);
    } else if (key == "crashing") {
      bool v;
      if (absl::Status s = ParseBool(&v, at); !s.ok()) return s;
      out->set_crashing(v);
    } else {
      return SkipValue(at, 2);
    }
    return absl::OkStatus();
  });
}

bool ManifestReader::Rejects(const EntryFilter& filter, Field field, const ManifestEntry& e) {
  const ArgFilter& f = filter.args;
  switch (field) {
    case Field::kTaskId: return !f.TaskOk(e.task_id);
    case Field::kStep: return !f.StepOk(e.step);
    case Field::kFuncId: return !f.ManifestFuncIdsOk(e.func_ids);
    case Field::kRole: return !f.RoleOk(e.role);
    case Field::kStage: return !f.StageOk(e.stage);
    case Field::kArgIndex: return !f.ArgIndexOk(e.arg_index);
    case Field::kKind: return !f.KindOk(e.kind);
    case Field::kDtype: return !f.DTypeOk(ToProtoDType(e.dtype));
    default: return false;
  }
}

bool EntryFilter::Matches(const ManifestEntry& e) const {
  if (index && e.index != *index) return false;
  return args.TaskOk(e.task_id) && args.StepOk(e.step) && args.ManifestFuncIdsOk(e.func_ids) &&
         args.RoleOk(e.role) && args.StageOk(e.stage) && args.ArgIndexOk(e.arg_index) &&
         args.KindOk(e.kind) && args.DTypeOk(ToProtoDType(e.dtype)) && args.OverflowOk(e.overflow) &&
         args.NonfiniteOk(e.stats && e.stats->has_nonfinite());
}

// Clears an entry for reuse, keeping what its strings and vectors hold.
void ManifestReader::ResetEntry(ManifestEntry* e) {
  e->index = e->record_id = e->task_id = 0;
  e->task_id_text.clear();
  e->step = 0;
  e->func_ids.clear();
  e->role = v1::ROLE_UNSPECIFIED;
  e->stage = v1::STAGE_UNSPECIFIED;
  e->kind = v1::KIND_UNSPECIFIED;
  e->dtype = DataType::kFloat32;
  e->shape.clear();
  e->strides.clear();
  e->has_value = false;
  e->value.clear();
  e->stats.reset();
#define ARGSDUMP_RESET(id, style, member) e->member = {};
  ARGSDUMP_SIMPLE_MANIFEST_FIELDS(ARGSDUMP_RESET)
#undef ARGSDUMP_RESET
}

// One case per field of format/manifest_fields.h: a field added there and
// not read here does not build.
absl::Status ManifestReader::ParseField(Field field, absl::string_view where, ManifestEntry* e) {
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wswitch"
  switch (field) {
    case Field::kTaskId: {
      absl::string_view text;
      if (absl::Status s = ParseStringView(&text, &scratch_, where); !s.ok()) return s;
      e->task_id_text.assign(text.data(), text.size());  // exports name files by it
      const std::optional<uint64_t> id = ParseTaskIdHex(text);
      if (!id) {
        return Error(absl::StrCat(where, ": expected \"0x\" and up to 16 hex digits, found \"",
                                  text, "\""));
      }
      e->task_id = *id;
      return absl::OkStatus();
    }
    case Field::kStep: return ParseUint32(&e->step, where);
#define ARGSDUMP_PARSE(id, style, member) \
  case Field::k##id:                      \
    return ParseSimple<FieldStyle::style>(&e->member, where);
    ARGSDUMP_SIMPLE_MANIFEST_FIELDS(ARGSDUMP_PARSE)
#undef ARGSDUMP_PARSE
    case Field::kFuncId: return ParseFuncIds(&e->func_ids, where);
    case Field::kRole: return ParseName(&RoleFromName, "input, output or inout", &e->role, where);
    case Field::kStage:
      return ParseName(&StageFromName, "before_dispatch or after_completion", &e->stage, where);
    case Field::kKind: return ParseName(&KindFromName, "tensor or scalar", &e->kind, where);
    case Field::kDtype: return ParseDtype(&e->dtype, where);
    case Field::kValue: return ParseScalarValue(e, where);
    case Field::kShape: return ParseUintArray(&e->shape, where);
    case Field::kStrides: return ParseUintArray(&e->strides, where);
    case Field::kStats:
      e->stats.emplace();
      return ParseStats(&*e->stats, where);
    case Field::kUnknown: return SkipValue(where, 0);  // an addition we do not know: fine
  }
#pragma GCC diagnostic pop
  return SkipValue(where, 0);
}

template <FieldStyle S>
absl::Status ManifestReader::ParseSimple(typename FieldType<S>::type* out,
                                         absl::string_view where) {
  if constexpr (S == FieldStyle::kUint32) return ParseUint32(out, where);
  if constexpr (S == FieldStyle::kUint64) return ParseUint(out, where);
  if constexpr (S == FieldStyle::kBool || S == FieldStyle::kTrueFlag) return ParseBool(out, where);
}

absl::Status ManifestReader::ParseUint32(uint32_t* out, absl::string_view where) {
  uint64_t v;
  if (absl::Status s = ParseUint(&v, where); !s.ok()) return s;
  if (v > 0xFFFFFFFFull) return Error(absl::StrCat(where, ": out of range"));
  *out = static_cast<uint32_t>(v);
  return absl::OkStatus();
}

// One of the schema's names (`from_name`: format/names.h); anything else
// names the field, what it holds and what it may hold.
template <typename Enum>
absl::Status ManifestReader::ParseName(std::optional<Enum> (*from_name)(absl::string_view),
                                       absl::string_view expected, Enum* out,
                                       absl::string_view where) {
  absl::string_view text;
  if (absl::Status s = ParseStringView(&text, &scratch_, where); !s.ok()) return s;
  const std::optional<Enum> v = from_name(text);
  if (!v) {
    return Error(absl::StrCat(where, ": \"", text.substr(0, 40), "\" is not ", expected));
  }
  *out = *v;
  return absl::OkStatus();
}

absl::Status ManifestReader::ParseDtype(DataType* out, absl::string_view where) {
  absl::string_view text;
  if (absl::Status s = ParseStringView(&text, &scratch_, where); !s.ok()) return s;
  const std::optional<DataType> d = DataTypeFromName(std::string_view(text.data(), text.size()));
  if (!d) {
    return Error(absl::StrCat(where, ": \"", text.substr(0, 40),
                              "\" is not a dtype this build knows (FLOAT32, BFLOAT16, INT8, ...)"));
  }
  *out = *d;
  return absl::OkStatus();
}

absl::Status ManifestReader::ParseFuncIds(std::vector<int64_t>* out, absl::string_view where) {
  if (absl::Status s = Expect('[', where); !s.ok()) return s;
  out->clear();
  SkipSpace();
  if (Peek() == ']') {
    Get();
    return absl::OkStatus();
  }
  for (;;) {
    int64_t v;
    if (absl::Status s = ParseInt(&v, where); !s.ok()) return s;
    out->push_back(v);
    SkipSpace();
    const int c = Get();
    if (c == ']') return absl::OkStatus();
    if (c != ',' || out->size() > 16) return Error(absl::StrCat(where, ": bad array"));
  }
}

// A scalar's value as the JSON token written: a number, true/false, or a
// string ("NaN", "Infinity", ...) kept with its quotes.
absl::Status ManifestReader::ParseScalarValue(ManifestEntry* e, absl::string_view where) {
  SkipSpace();
  e->has_value = true;
  const int c = Peek();
  if (c == '"') {
    std::string text;
    if (absl::Status s = ParseString(&text, where); !s.ok()) return s;
    e->value = absl::StrCat("\"", text, "\"");
    return absl::OkStatus();
  }
  if (c == 't' || c == 'f') {
    bool b;
    if (absl::Status s = ParseBool(&b, where); !s.ok()) return s;
    e->value = b ? "true" : "false";
    return absl::OkStatus();
  }
  return ParseNumberToken(&e->value, where);
}

absl::Status ManifestReader::ParseEntry(ManifestEntry* e) {
  if (absl::Status s = Expect('{', "an args[] entry"); !s.ok()) return s;
  ManifestFieldSet seen = 0;
  SkipSpace();
  if (Peek() == '}') {
    Get();
  } else {
    Field last = static_cast<Field>(-1);  // none yet
    for (;;) {
      // The key is looked at in place (it cannot cross a refill before
      // the field is known and `where` is copied out).
      absl::string_view k;
      if (absl::Status s = ParseStringView(&k, &key_, "a field name"); !s.ok()) return s;
      const size_t n = std::min(k.size(), sizeof(where_) - 8);
      std::memcpy(where_, "field \"", 7);
      std::memcpy(where_ + 7, k.data(), n);
      where_[7 + n] = '"';
      const absl::string_view where(where_, 8 + n);
      const Field field = ManifestFieldOf(k, last);  // k is not used after this
      if (absl::Status s = Expect(':', where); !s.ok()) return s;
      if (absl::Status s = ParseField(field, where, e); !s.ok()) return s;
      if (field != Field::kUnknown) {
        last = field;
        seen |= Bit(field);
      }
      if (filter_ && field <= Field::kDtype && Rejects(*filter_, field, *e)) {
        // Not selected: the rest of the entry is skimmed, not parsed.
        skipped_ = true;
        return SkipRestOfEntry();
      }
      SkipSpace();
      const int c = Get();
      if (c == '}') break;
      if (c != ',') return Error("expected ',' or '}' after a field");
    }
  }
  if ((seen & kRequiredManifestFields) != kRequiredManifestFields) {
    for (size_t i = 0; i < kManifestFieldCount; ++i) {
      if ((kRequiredManifestFields & ~seen) & (ManifestFieldSet{1} << i)) {
        return Error(absl::StrCat("missing ", kManifestFields[i].key));
      }
    }
  }
  if (e->shape.size() != e->strides.size()) return Error("shape and strides differ in length");
  return absl::OkStatus();
}

absl::Status ManifestReader::ForEach(const std::function<bool(const ManifestEntry&)>& fn) {
  ManifestEntry e;
  for (;;) {
    absl::StatusOr<bool> got = Next(&e);
    if (!got.ok()) return got.status();
    if (!*got || !fn(e)) return absl::OkStatus();
  }
}

absl::StatusOr<bool> ManifestReader::Next(ManifestEntry* e) {
  if (!error_.ok()) return error_;
  absl::StatusOr<bool> got = Step(e);
  if (!got.ok()) {
    error_ = got.status();
    in_entry_ = false;
  }
  return got;
}

// The top level is walked as a small state machine so that entries can be
// handed out one call at a time (Next) while the reader keeps its place.
absl::StatusOr<bool> ManifestReader::Step(ManifestEntry* e) {
  for (;;) {
    switch (state_) {
      case State::kEnd:
        return false;
      case State::kStart:
        if (absl::Status s = Expect('{', "the top level"); !s.ok()) return s;
        SkipSpace();
        if (Peek() == '}') return Error("no \"args\" array");
        state_ = State::kFieldName;
        break;
      case State::kFieldName: {
        std::string key;
        if (absl::Status s = ParseString(&key, "a top-level field name"); !s.ok()) return s;
        if (absl::Status s = ParseTopLevelValue(key); !s.ok()) return s;
        break;
      }
      case State::kAfterField: {
        SkipSpace();
        const int c = Get();
        if (c == ',') {
          state_ = State::kFieldName;
          break;
        }
        if (c != '}') return Error("expected ',' or '}' between top-level fields");
        if (!saw_args_) return Error("no \"args\" array");
        SkipSpace();
        if (Peek() >= 0) return Error("text after the end of the manifest");
        state_ = State::kEnd;
        return false;
      }
      case State::kEntry: {
        ResetEntry(e);
        e->index = next_index_;
        in_entry_ = true;
        entry_ = next_index_;
        skipped_ = false;
        if (filter_ && filter_->index && next_index_ != *filter_->index) {
          // Not the one asked for: structure only.
          if (absl::Status s = Expect('{', "an args[] entry"); !s.ok()) return s;
          if (absl::Status s = SkipRestOfEntry(); !s.ok()) return s;
          skipped_ = true;
        } else if (absl::Status s = ParseEntry(e); !s.ok()) {
          return s;
        }
        ++next_index_;
        state_ = State::kAfterEntry;
        if (skipped_) break;  // another task: on to the next entry
        return true;
      }
      case State::kAfterEntry: {
        SkipSpace();
        const int c = Get();
        if (c == ']') {
          in_entry_ = false;
          state_ = State::kAfterField;
        } else if (c == ',') {
          state_ = State::kEntry;
        } else {
          return Error("expected ',' or ']' between entries");
        }
        break;
      }
    }
  }
}

absl::Status ManifestReader::ParseTopLevelValue(const std::string& key) {
  const std::string where = absl::StrCat("top-level field \"", key, "\"");
  if (absl::Status s = Expect(':', where); !s.ok()) return s;
  SkipSpace();
  state_ = State::kAfterField;
  if (key == "args") {
    saw_args_ = true;
    if (absl::Status s = Expect('[', where); !s.ok()) return s;
    SkipSpace();
    if (Peek() == ']') {
      Get();
    } else {
      state_ = State::kEntry;
    }
  } else if (key == "device_crash") {
    summary_.device_crash.emplace();
    return ParseDeviceCrash(&*summary_.device_crash, where);
  } else if (key == "bin_file") {
    if (Peek() == 'n') return SkipValue(where, 0);
    summary_.has_bin_file = true;
    return ParseString(&summary_.bin_file, where);
  } else if (Peek() == '-' || (Peek() >= '0' && Peek() <= '9')) {
    int64_t v;
    if (absl::Status s = ParseInt(&v, where); !s.ok()) return s;
    summary_.counters[key] = v;
  } else if (Peek() == '{') {
    // dropped_by_cause, device_waits: numbers one level down; labels:
    // strings.
    Get();
    SkipSpace();
    if (Peek() == '}') {
      Get();
      return absl::OkStatus();
    }
    for (;;) {
      std::string sub;
      if (absl::Status s = ParseString(&sub, where); !s.ok()) return s;
      if (absl::Status s = Expect(':', where); !s.ok()) return s;
      SkipSpace();
      if (Peek() == '-' || (Peek() >= '0' && Peek() <= '9')) {
        int64_t v;
        if (absl::Status s = ParseInt(&v, where); !s.ok()) return s;
        summary_.counters[absl::StrCat(key, ".", sub)] = v;
      } else if (key == "labels" && Peek() == '"') {
        if (absl::Status s = ParseString(&summary_.labels[sub], where); !s.ok()) return s;
      } else if (absl::Status s = SkipValue(where, 1); !s.ok()) {
        return s;
      }
      SkipSpace();
      const int c = Get();
      if (c == '}') break;
      if (c != ',') return Error(absl::StrCat(where, ": expected ',' or '}'"));
    }
  } else {
    return SkipValue(where, 0);
  }
  return absl::OkStatus();
}

}  // namespace argsdump
