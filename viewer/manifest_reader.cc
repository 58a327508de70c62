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
#include "base/files.h"
#include "format/device_crash.h"
#include "format/kernel_table.h"
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
  // A FIFO or device is refused, not waited on or read without end.
  absl::StatusOr<int> fd = OpenRegularFile(path);
  if (!fd.ok()) return fd.status();
  std::FILE* f = ::fdopen(*fd, "rb");
  if (f == nullptr) {
    ::close(*fd);
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

std::unique_ptr<ManifestReader> ManifestReader::FromBytes(std::string bytes, std::string name,
                                                          size_t buffer_bytes) {
  std::unique_ptr<ManifestReader> r(new ManifestReader(std::move(name), nullptr));
  r->bytes_ = std::move(bytes);
  r->f_ = ::fmemopen(r->bytes_.data(), r->bytes_.size(), "rb");  // null: reads as empty
  r->buffer_.resize(std::max<size_t>(std::min(r->bytes_.size() + 1, buffer_bytes), 1));
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
  return ParseArray(where, [&]() -> absl::Status {
    uint64_t v;
    if (absl::Status s = ParseUint(&v, where); !s.ok()) return s;
    out->push_back(v);
    if (out->size() > 64) return Error(absl::StrCat(where, ": more than 64 elements"));
    return absl::OkStatus();
  });
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

namespace {

// Where a stats field of its type is read into.
void StatsTarget(uint64_t* field, uint64_t** count, double** /*number*/) { *count = field; }
void StatsTarget(double* field, uint64_t** /*count*/, double** number) { *number = field; }

}  // namespace

// {"count": N, "min": x, ...}: known keys read, unknown ones skipped.
absl::Status ManifestReader::ParseStats(ManifestEntry::Stats* out, absl::string_view where) {
  return ParseObject(where, [&](const std::string& key) -> absl::Status {
    uint64_t* count = nullptr;
    double* number = nullptr;
#define ARGSDUMP_STATS_KEY(member, type) \
  if (key == #member) StatsTarget(&out->member, &count, &number);
    ARGSDUMP_MANIFEST_STATS_FIELDS(ARGSDUMP_STATS_KEY)
#undef ARGSDUMP_STATS_KEY
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
absl::Status ManifestReader::ParseClock(v1::CaptureClock* out, absl::string_view where) {
  return ParseObject(where, [&](const std::string& key) -> absl::Status {
    const std::string at = absl::StrCat(where, ": \"", key.substr(0, 40), "\"");
    int64_t v = 0;
    if (key == "host") return ParseString(out->mutable_host(), at);
    if (key == "has_server_offset") {
      bool has = false;
      if (absl::Status s = ParseBool(&has, at); !s.ok()) return s;
      out->set_has_server_offset(has);
      return absl::OkStatus();
    }
    if (key != "base_monotonic_ns" && key != "base_unix_ns" && key != "server_offset_ns") {
      return SkipValue(at, 1);
    }
    if (absl::Status s = ParseInt(&v, at); !s.ok()) return s;
    if (key == "base_monotonic_ns") out->set_base_monotonic_ns(v);
    if (key == "base_unix_ns") out->set_base_unix_ns(v);
    if (key == "server_offset_ns") {
      out->set_server_offset_ns(v);
      out->set_has_server_offset(true);
    }
    return absl::OkStatus();
  });
}

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
      return ParseArray(at, [&]() -> absl::Status {
        if (out->executing_size() == kMaxCrashedTasks) {
          return Error(absl::StrCat(at, ": more than ", kMaxCrashedTasks, " tasks"));
        }
        return ParseCrashedTask(out->add_executing(), at);
      });
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

absl::Status ManifestReader::ParseBoundedString(std::string* out, size_t max,
                                                absl::string_view where) {
  if (absl::Status s = ParseString(out, where); !s.ok()) return s;
  if (out->size() > max) {
    return Error(absl::StrCat(where, ": ", out->size(), " bytes, at most ", max));
  }
  return absl::OkStatus();
}

// [{"func_id": 0, "name": "add", "type": "elementwise", "signature":
// [{"direction": "in", "dtype": "FLOAT32"}, ...]}, ...]: known keys read (a
// wrong type is an error), unknown ones skipped, counts bounded as they
// are read; then the table's bounds (CheckKernelTable).
absl::Status ManifestReader::ParseKernels(KernelTable* out, absl::string_view where) {
  out->Clear();
  absl::Status parsed = ParseArray(where, [&]() -> absl::Status {
    if (out->size() == kMaxKernels) {
      return Error(absl::StrCat(where, ": more than ", kMaxKernels, " kernels"));
    }
    const std::string at = absl::StrCat(where, ": kernel ", out->size());
    return ParseKernel(out->Add(), at);
  });
  if (!parsed.ok()) return parsed;
  if (absl::Status s = CheckKernelTable(*out); !s.ok()) {
    return Error(absl::StrCat(where, ": ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status ManifestReader::ParseKernel(v1::Kernel* out, absl::string_view where) {
  std::string text;
  return ParseObject(where, [&](const std::string& key) -> absl::Status {
    const std::string at = absl::StrCat(where, ": \"", key.substr(0, 40), "\"");
    if (key == "func_id") {
      uint32_t v;
      if (absl::Status s = ParseUint32(&v, at); !s.ok()) return s;
      out->set_func_id(v);
    } else if (key == "name") {
      return ParseBoundedString(out->mutable_name(), kMaxKernelNameBytes, at);
    } else if (key == "type") {
      return ParseBoundedString(out->mutable_type(), kMaxKernelTypeBytes, at);
    } else if (key == "signature") {
      out->clear_signature();
      return ParseArray(at, [&]() -> absl::Status {
        if (out->signature_size() == kMaxKernelSignature) {
          return Error(absl::StrCat(at, ": more than ", kMaxKernelSignature, " entries"));
        }
        v1::KernelArg* arg = out->add_signature();
        return ParseObject(at, [&](const std::string& k) -> absl::Status {
          const std::string in = absl::StrCat(at, ": \"", k.substr(0, 40), "\"");
          if (k == "direction") {
            if (absl::Status s = ParseBoundedString(&text, 16, in); !s.ok()) return s;
            const std::optional<v1::ArgDirection> d = ArgDirectionFromName(text);
            if (!d) {
              return Error(absl::StrCat(in, ": expected in, out, inout or scalar, found \"",
                                        text, "\""));
            }
            arg->set_direction(*d);
          } else if (k == "dtype") {
            if (absl::Status s = ParseBoundedString(&text, 32, in); !s.ok()) return s;
            const std::optional<DataType> t = DataTypeFromName(text);
            if (!t) return Error(absl::StrCat(in, ": not a dtype: \"", text, "\""));
            arg->set_dtype(ToProtoDType(*t));
          } else {
            return SkipValue(in, 2);
          }
          return absl::OkStatus();
        });
      });
    } else {
      return SkipValue(at, 2);
    }
    return absl::OkStatus();
  });
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

namespace {

// An entry as a record the filter (format/arg_filter.h) tests: one method
// per subject of format/arg_filter_fields.h.
struct ManifestEntryView {
  const ManifestEntry& e;

  uint64_t TaskId() const { return e.task_id; }
  uint32_t Step() const { return e.step; }
  int Stage() const { return e.stage; }
  int Role() const { return e.role; }
  int Kind() const { return e.kind; }
  int Dtype() const { return ToProtoDType(e.dtype); }
  FuncIdRange<std::vector<int64_t>::const_iterator> FuncId() const {
    return ManifestFuncIdRange(e.func_ids);
  }
  // Whether its elements hold a NaN or an Inf: flagged, or counted.
  bool Stats() const { return e.nonfinite || (e.stats && e.stats->has_nonfinite()); }
#define ARGSDUMP_ENTRY_SUBJECT(id, style, member) \
  auto id() const { return e.member; }
  ARGSDUMP_SIMPLE_MANIFEST_FIELDS(ARGSDUMP_ENTRY_SUBJECT)
#undef ARGSDUMP_ENTRY_SUBJECT
};

}  // namespace

bool ManifestReader::Rejects(const EntryFilter& filter, Field field, const ManifestEntry& e) {
  return !filter.args.AdmitsAt(field, ManifestEntryView{e});
}

bool EntryFilter::Matches(const ManifestEntry& e) const {
  if (index && e.index != *index) return false;
  return args.MatchesRecord(ManifestEntryView{e});
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
  e->device_thread = 0;
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
  if constexpr (S == FieldStyle::kUint64 || S == FieldStyle::kNonZero) return ParseUint(out, where);
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

// The store's layout of one args[] entry (store/manifest.cc AppendEntry):
//   {"task_id": "0x<16 hex digits>", "step": 3, "func_id": [7], ...}
// the fields in format/manifest_fields.h's order, the kSometimes ones
// optional, ", " between fields and array elements, ": " after keys,
// strings without escapes, numbers as std::to_chars writes them. Read
// straight out of the buffer, with every value taken the way the general
// parser's functions take it (the same digits, names and tokens give the
// same values). Anything else - other spacing or order, a duplicate or
// unknown key, an escape, a number of 20 digits, a name outside the schema,
// shape and strides of different lengths, the end of the buffer - is a
// deviation: nothing is consumed and ParseEntry reads the entry with the
// general parser from its start. So entries, errors and their byte
// positions do not depend on this path (the fuzz target and
// manifest_reader_test compare the two).
class ManifestReader::StoreLayoutScanner {
 public:
  enum class Result {
    kParsed,     // the whole entry, the reader just past its '}'
    kRejected,   // a field the filter refuses: the reader just past its value
    kDeviation,  // not the store's layout: nothing consumed
  };

  StoreLayoutScanner(ManifestReader* r, ManifestEntry* e)
      : r_(*r), e_(*e), p_(r->buffer_.data() + r->at_), lim_(r->buffer_.data() + r->end_) {}

  Result Scan() {
    // One step per field, in the list's order; a rejected field ends the
    // entry where the general parser's filter would.
#define ARGSDUMP_SCAN_FIELD(id, key, presence)                                         \
    if (!Field<ManifestField::k##id, FieldPresence::presence>()) return Result::kDeviation; \
    if (rejected_) return Commit(Result::kRejected);
    ARGSDUMP_MANIFEST_FIELDS(ARGSDUMP_SCAN_FIELD)
#undef ARGSDUMP_SCAN_FIELD
    if (!Lit("}") || e_.shape.size() != e_.strides.size()) return Result::kDeviation;
    return Commit(Result::kParsed);
  }

 private:
  Result Commit(Result r) {
    r_.at_ = static_cast<size_t>(p_ - r_.buffer_.data());
    return r;
  }

  size_t left() const { return static_cast<size_t>(lim_ - p_); }
  template <size_t N>
  bool Lit(const char (&text)[N]) {
    if (left() < N - 1 || std::memcmp(p_, text, N - 1) != 0) return false;
    p_ += N - 1;
    return true;
  }
  static bool IsDigit(char c) { return c >= '0' && c <= '9'; }
  static bool IsNumberChar(char c) {
    return IsDigit(c) || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
  }

  // `{"key": ` for the first field, `, "key": ` for the others; nothing
  // consumed when it is not there.
  template <ManifestField F>
  bool Key() {
    constexpr absl::string_view key = InfoOf(F).key;
    const char* const start = p_;
    if (!(F == ManifestField::kTaskId ? Lit("{\"") : Lit(", \"")) || left() < key.size() + 3 ||
        std::memcmp(p_, key.data(), key.size()) != 0 ||
        std::memcmp(p_ + key.size(), "\": ", 3) != 0) {
      p_ = start;
      return false;
    }
    p_ += key.size() + 3;
    return true;
  }

  template <ManifestField F, FieldPresence P>
  bool Field() {
    if (!Key<F>()) return P == FieldPresence::kSometimes;
    if (!Value<F>()) return false;
    if constexpr (F <= ManifestField::kDtype) {
      rejected_ = r_.drops_early_ && !r_.filter_->args.template AdmitsAt<F>(ManifestEntryView{e_});
    }
    return true;
  }

  // 1 to 19 digits followed, in the buffer, by a character that cannot
  // continue a number: ParseUint's own reading. (A filter may refuse the
  // entry right after the number, before any literal looks past it.)
  bool Uint(uint64_t* out) {
    uint64_t v = 0;
    size_t n = 0;
    for (; n < left() && n < 20 && IsDigit(p_[n]); ++n) v = v * 10 + static_cast<uint64_t>(p_[n] - '0');
    if (n == 0 || n > 19 || n == left() || IsNumberChar(p_[n])) return false;
    p_ += n;
    *out = v;
    return true;
  }
  bool Uint32(uint32_t* out) {
    uint64_t v;
    if (!Uint(&v) || v > 0xFFFFFFFFull) return false;
    *out = static_cast<uint32_t>(v);
    return true;
  }
  // An optional '-' and 1 to 18 digits (what SimpleAtoi reads the same).
  bool Int(int64_t* out) {
    const bool negative = left() > 0 && *p_ == '-';
    const char* q = p_ + (negative ? 1 : 0);
    uint64_t v = 0;  // below 10^19: no overflow
    size_t n = 0;
    for (; q + n < lim_ && n < 19 && IsDigit(q[n]); ++n) v = v * 10 + static_cast<uint64_t>(q[n] - '0');
    if (n == 0 || n > 18 || q + n == lim_ || IsNumberChar(q[n])) return false;
    p_ = q + n;
    *out = negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
    return true;
  }
  bool Bool(bool* out) {
    if (Lit("true")) {
      *out = true;
    } else if (Lit("false")) {
      *out = false;
    } else {
      return false;
    }
    return true;
  }
  // "text" without escapes or control characters, in place.
  bool Text(absl::string_view* out) {
    if (left() < 2 || *p_ != '"') return false;
    for (const char* q = p_ + 1; q < lim_; ++q) {
      const unsigned char c = static_cast<unsigned char>(*q);
      if (c == '"') {
        *out = absl::string_view(p_ + 1, static_cast<size_t>(q - p_ - 1));
        p_ = q + 1;
        return true;
      }
      if (c == '\\' || c < 0x20) return false;
    }
    return false;
  }
  // NumberToken's characters: 1 to sizeof(number_) of them, and then, in
  // the buffer, one that is not.
  bool Token(absl::string_view* out) {
    size_t n = 0;
    while (n < left() && n <= sizeof(r_.number_) && IsNumberChar(p_[n])) ++n;
    if (n == 0 || n > sizeof(r_.number_) || n == left()) return false;
    *out = absl::string_view(p_, n);
    p_ += n;
    return true;
  }
  // [a, b, ...] of at most 64 (ParseUintArray's bound).
  bool UintArray(std::vector<uint64_t>* out) {
    out->clear();
    if (!Lit("[")) return false;
    if (Lit("]")) return true;
    for (;;) {
      uint64_t v;
      if (out->size() == 64 || !Uint(&v)) return false;
      out->push_back(v);
      if (Lit("]")) return true;
      if (!Lit(", ")) return false;
    }
  }
  template <typename Enum>
  bool Name(std::optional<Enum> (*from_name)(absl::string_view), Enum* out) {
    absl::string_view text;
    if (!Text(&text)) return false;
    const std::optional<Enum> v = from_name(text);
    if (!v) return false;
    *out = *v;
    return true;
  }
  // A stats number: NumberToken and SimpleAtod, as ParseStats reads it.
  bool Double(double* out) {
    absl::string_view token;
    return Token(&token) && absl::SimpleAtod(token, out);
  }
  // A stats field, a count or a number.
  bool StatsNumber(uint64_t* out) { return Uint(out); }
  bool StatsNumber(double* out) { return Double(out); }

  // A simple field (format/manifest_fields.h), as ParseSimple reads it.
  template <FieldStyle S>
  bool Simple(typename FieldType<S>::type* out) {
    if constexpr (S == FieldStyle::kUint32) return Uint32(out);
    if constexpr (S == FieldStyle::kUint64 || S == FieldStyle::kNonZero) return Uint(out);
    if constexpr (S == FieldStyle::kBool || S == FieldStyle::kTrueFlag) return Bool(out);
  }

  // One reader per field of format/manifest_fields.h, as ParseField reads
  // it; a field without one does not build.
  template <ManifestField F>
  bool Value() = delete;

  ManifestReader& r_;
  ManifestEntry& e_;
  const char* p_;
  const char* const lim_;
  bool rejected_ = false;
};

template <>
bool ManifestReader::StoreLayoutScanner::Value<ManifestField::kTaskId>() {
  // "0x" and 16 hex digits (ParseTaskIdHex reads them the same).
  if (left() < 20 || p_[0] != '"' || p_[1] != '0' || p_[2] != 'x' || p_[19] != '"') return false;
  uint64_t v = 0;
  for (int i = 3; i < 19; ++i) {
    const char c = p_[i];
    const int d = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                         : -1;
    if (d < 0) return false;
    v = v << 4 | static_cast<uint64_t>(d);
  }
  e_.task_id_text.assign(p_ + 1, 18);
  e_.task_id = v;
  p_ += 20;
  return true;
}
template <>
bool ManifestReader::StoreLayoutScanner::Value<ManifestField::kStep>() {
  return Uint32(&e_.step);
}
template <>
bool ManifestReader::StoreLayoutScanner::Value<ManifestField::kFuncId>() {
  // ParseFuncIds: [] or up to 17 integers; more than 16 is left to it.
  e_.func_ids.clear();
  if (!Lit("[")) return false;
  if (Lit("]")) return true;
  for (;;) {
    int64_t v;
    if (e_.func_ids.size() == 16 || !Int(&v)) return false;
    e_.func_ids.push_back(v);
    if (Lit("]")) return true;
    if (!Lit(", ")) return false;
  }
}
template <>
bool ManifestReader::StoreLayoutScanner::Value<ManifestField::kRole>() {
  return Name(&RoleFromName, &e_.role);
}
template <>
bool ManifestReader::StoreLayoutScanner::Value<ManifestField::kStage>() {
  return Name(&StageFromName, &e_.stage);
}
template <>
bool ManifestReader::StoreLayoutScanner::Value<ManifestField::kKind>() {
  return Name(&KindFromName, &e_.kind);
}
template <>
bool ManifestReader::StoreLayoutScanner::Value<ManifestField::kDtype>() {
  absl::string_view text;
  if (!Text(&text)) return false;
  // Entries mostly repeat a few dtypes: the last name's answer is kept.
  if (text != r_.scanned_dtype_name_) {
    const std::optional<DataType> d = DataTypeFromName(std::string_view(text.data(), text.size()));
    if (!d) return false;
    r_.scanned_dtype_name_.assign(text.data(), text.size());
    r_.scanned_dtype_ = *d;
  }
  e_.dtype = r_.scanned_dtype_;
  return true;
}
template <>
bool ManifestReader::StoreLayoutScanner::Value<ManifestField::kValue>() {
  // ParseScalarValue: a string kept with its quotes, true/false, or a
  // number token as written.
  e_.has_value = true;
  if (left() > 0 && *p_ == '"') {
    absl::string_view text;
    const char* const start = p_;
    if (!Text(&text)) return false;
    e_.value.assign(start, static_cast<size_t>(p_ - start));
    return true;
  }
  if (Lit("true")) {
    e_.value = "true";
    return true;
  }
  if (Lit("false")) {
    e_.value = "false";
    return true;
  }
  absl::string_view token;
  if (!Token(&token)) return false;
  e_.value.assign(token.data(), token.size());
  return true;
}
template <>
bool ManifestReader::StoreLayoutScanner::Value<ManifestField::kShape>() {
  return UintArray(&e_.shape);
}
template <>
bool ManifestReader::StoreLayoutScanner::Value<ManifestField::kStrides>() {
  return UintArray(&e_.strides);
}
#define ARGSDUMP_SCAN_SIMPLE(id, style, member)                            \
  template <>                                                              \
  bool ManifestReader::StoreLayoutScanner::Value<ManifestField::k##id>() { \
    return Simple<FieldStyle::style>(&e_.member);                          \
  }
ARGSDUMP_SIMPLE_MANIFEST_FIELDS(ARGSDUMP_SCAN_SIMPLE)
#undef ARGSDUMP_SCAN_SIMPLE
template <>
bool ManifestReader::StoreLayoutScanner::Value<ManifestField::kStats>() {
  // The writer's order (store/manifest.cc Put<kStats>); ParseStats takes
  // any order, so another one is its to read.
  ManifestEntry::Stats& s = e_.stats.emplace();
  int fields = 0;
#define ARGSDUMP_SCAN_STATS(member, type) \
  (fields++ == 0 || Lit(", ")) && Lit("\"" #member "\": ") && StatsNumber(&s.member) &&
  return Lit("{") && ARGSDUMP_MANIFEST_STATS_FIELDS(ARGSDUMP_SCAN_STATS) Lit("}");
#undef ARGSDUMP_SCAN_STATS
}

absl::Status ManifestReader::ParseEntry(ManifestEntry* e) {
  if (scan_store_layout_) {
    SkipSpace();  // what Expect('{') below skips too
    switch (StoreLayoutScanner(this, e).Scan()) {
      case StoreLayoutScanner::Result::kParsed:
        return absl::OkStatus();
      case StoreLayoutScanner::Result::kRejected:
        // Not selected: the rest skimmed, as below.
        skipped_ = true;
        return SkipRestOfEntry();
      case StoreLayoutScanner::Result::kDeviation: {
        const uint64_t index = e->index;
        ResetEntry(e);  // what the scanner filled in before it stopped
        e->index = index;
        break;
      }
    }
  }
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
      if (drops_early_ && field <= Field::kDtype && Rejects(*filter_, field, *e)) {
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

absl::Status ManifestReader::ReadHeader() {
  if (!error_.ok()) return error_;
  ManifestEntry scratch;
  stop_at_args_ = true;
  absl::StatusOr<bool> got = Step(&scratch);
  stop_at_args_ = false;
  if (!got.ok()) error_ = got.status();
  return got.status();
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
        if (stop_at_args_) return false;
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
  } else if (key == "kernels") {
    return ParseKernels(&summary_.kernels, where);
  } else if (key == "clock") {
    summary_.clock.emplace();
    return ParseClock(&*summary_.clock, where);
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
