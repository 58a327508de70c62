#include "server/http_gateway.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/files.h"
#include "base/thread.h"
#include "base/utf8.h"
#include "format/names.h"
#include "httplib.h"
#include "proto/argsdump/v1/capture_service.grpc.pb.h"
#include "proto/grpc_status.h"
#include "server/bearer_token.h"
#include "server/connection_threads.h"
#include "server/http_listener.h"
#include "store/manifest.h"
#include "server/proto_json.h"
#include "server/web_assets.h"

namespace argsdump {

int HttpStatusFor(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return 200;
    case grpc::StatusCode::CANCELLED: return 499;
    case grpc::StatusCode::INVALID_ARGUMENT: return 400;
    case grpc::StatusCode::FAILED_PRECONDITION: return 400;
    case grpc::StatusCode::OUT_OF_RANGE: return 400;
    case grpc::StatusCode::DEADLINE_EXCEEDED: return 504;
    case grpc::StatusCode::NOT_FOUND: return 404;
    case grpc::StatusCode::ALREADY_EXISTS: return 409;
    case grpc::StatusCode::ABORTED: return 409;
    case grpc::StatusCode::PERMISSION_DENIED: return 403;
    case grpc::StatusCode::UNAUTHENTICATED: return 401;
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return 429;
    case grpc::StatusCode::UNIMPLEMENTED: return 501;
    case grpc::StatusCode::UNAVAILABLE: return 503;
    default: return 500;  // UNKNOWN, INTERNAL, DATA_LOSS
  }
}

namespace {

constexpr auto kCallTimeout = std::chrono::seconds(60);
constexpr int kKeepAliveSeconds = 5;
// Request bodies: /v1/rpc's JSON.
constexpr uint64_t kMaxRequestBody = 1 << 20;
constexpr uint32_t kMaxUint32 = 0xffffffffu;


// The error body every failed request gets.
void SendError(httplib::Response& res, int http_status, grpc::StatusCode code,
               absl::string_view message) {
  std::string body = absl::StrCat("{\"code\": ", static_cast<int>(code), ", \"status\": \"",
                                  absl::StatusCodeToString(static_cast<absl::StatusCode>(code)),
                                  "\", \"message\": ");
  AppendJsonString(message, &body);
  body.append("}\n");
  res.status = http_status;
  if (http_status == 401) res.set_header("WWW-Authenticate", "Bearer realm=\"argsdump\"");
  res.set_content(body, "application/json");
}

void SendStatus(httplib::Response& res, const grpc::Status& s) {
  SendError(res, HttpStatusFor(s.error_code()), s.error_code(), s.error_message());
}

void BadRequest(httplib::Response& res, absl::string_view message) {
  SendError(res, 400, grpc::StatusCode::INVALID_ARGUMENT, message);
}

void SendJson(httplib::Response& res, const std::string& json) {
  res.status = 200;
  res.set_content(json + "\n", "application/json");
}

// Digits only (SimpleAtoi alone takes "+1" and " 1 "), within 64 bits.
bool ParseDecimal(absl::string_view text, uint64_t* out) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(),
                     [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); }) &&
         absl::SimpleAtoi(text, out);
}

// The query string, checked: every parameter known, single ones given once,
// values parsed with errors that name the parameter.
class Params {
 public:
  Params(const httplib::Request& req, std::vector<std::string> known)
      : req_(req), known_(known.begin(), known.end()) {
    // httplib keeps one of identical pairs ("state=live&state=live"): the
    // raw query says how often each name came.
    const size_t q = req.target.find('?');
    if (q != std::string::npos) {
      for (absl::string_view part :
           absl::StrSplit(absl::string_view(req.target).substr(q + 1), '&', absl::SkipEmpty())) {
        // Decoded as httplib decodes the names of req.params.
        ++given_[httplib::detail::decode_url(std::string(part.substr(0, part.find('='))), true)];
      }
    }
    for (const auto& [name, value] : req.params) {
      if (!IsValidUtf8(name) || !IsValidUtf8(value)) {
        Fail(IsValidUtf8(name)
                 ? absl::StrCat("parameter '", name,
                                "': its value is not UTF-8 (percent-encode UTF-8 bytes)")
                 : std::string("a parameter's name is not UTF-8"));
        break;
      }
    }
  }

  // The first problem found, in order of the calls; empty when none.
  const std::string& error() const { return error_; }

  // Unknown parameters are an error too.
  bool Finish() {
    for (const auto& [name, value] : req_.params) {
      if (known_.count(name) == 0) {
        Fail(absl::StrCat("unknown parameter '", name, "' (this endpoint takes ",
                          known_.empty() ? "none" : absl::StrJoin(known_, ", "), ")"));
        break;
      }
    }
    return error_.empty();
  }

  std::optional<std::string> Single(const std::string& name) {
    const size_t n = std::max(req_.params.count(name), Given(name));
    if (n == 0) return std::nullopt;
    if (n > 1) {
      Fail(absl::StrCat("parameter '", name, "' is given ", n, " times"));
      return std::nullopt;
    }
    return req_.params.find(name)->second;
  }

  std::vector<std::string> All(const std::string& name) const {
    std::vector<std::string> out;
    auto range = req_.params.equal_range(name);
    for (auto it = range.first; it != range.second; ++it) out.push_back(it->second);
    return out;
  }

  std::optional<uint64_t> Uint(const std::string& name, uint64_t max) {
    std::optional<std::string> v = Single(name);
    if (!v) return std::nullopt;
    uint64_t out = 0;
    if (!ParseDecimal(*v, &out) || out > max) {
      Fail(absl::StrCat(name, "=", *v, ": not an integer in 0..", max));
      return std::nullopt;
    }
    return out;
  }

  std::optional<bool> Bool(const std::string& name) {
    std::optional<std::string> v = Single(name);
    if (!v) return std::nullopt;
    if (*v == "true" || *v == "1") return true;
    if (*v == "false" || *v == "0") return false;
    Fail(absl::StrCat(name, "=", *v, ": not true or false"));
    return std::nullopt;
  }

  // "0x..." hex (the manifest's spelling) or decimal.
  std::optional<uint64_t> TaskId(const std::string& name) {
    std::optional<std::string> v = Single(name);
    if (!v) return std::nullopt;
    uint64_t out = 0;
    if (absl::StartsWithIgnoreCase(*v, "0x")) {
      if (std::optional<uint64_t> hex = ParseTaskIdHex(absl::AsciiStrToLower(*v))) return hex;
    } else if (ParseDecimal(*v, &out)) {
      return out;
    }
    Fail(absl::StrCat(name, "=", *v, ": not a task id (0x + up to 16 hex digits, or decimal)"));
    return std::nullopt;
  }

  // An enum value by its name ("STAGE_BEFORE_DISPATCH") or the part after
  // the prefix in any case ("before_dispatch"); UNSPECIFIED is refused.
  template <typename Enum>
  std::optional<Enum> EnumValue(const std::string& name,
                                const google::protobuf::EnumDescriptor* descriptor,
                                absl::string_view prefix) {
    std::optional<std::string> v = Single(name);
    if (!v) return std::nullopt;
    std::string upper = absl::AsciiStrToUpper(*v);
    if (!absl::StartsWith(upper, prefix)) upper = absl::StrCat(prefix, upper);
    const google::protobuf::EnumValueDescriptor* value = descriptor->FindValueByName(upper);
    if (value == nullptr || value->number() == 0) {
      std::vector<std::string> names;
      for (int i = 1; i < descriptor->value_count(); ++i) {
        names.push_back(absl::AsciiStrToLower(descriptor->value(i)->name().substr(prefix.size())));
      }
      Fail(absl::StrCat(name, "=", *v, ": not one of ", absl::StrJoin(names, ", ")));
      return std::nullopt;
    }
    return static_cast<Enum>(value->number());
  }

  void Fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
  }

 private:
  size_t Given(const std::string& name) const {
    auto it = given_.find(name);
    return it == given_.end() ? 0 : it->second;
  }

  const httplib::Request& req_;
  std::set<std::string> known_;
  std::map<std::string, size_t> given_;  // from the raw query
  std::string error_;
};

// "a,b,c" of non-negative integers (the tensor's leading indices).
bool ParseIndexList(const std::string& text, std::vector<uint64_t>* out) {
  if (text.empty()) return true;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    uint64_t v = 0;
    if (!ParseDecimal(part, &v)) return false;
    out->push_back(v);
  }
  return true;
}

// Why `origin` is not what a browser sends as Origin (scheme://host[:port]),
// or "" when it is (or is "*").
std::string BadOrigin(absl::string_view origin) {
  if (origin == "*") return "";
  absl::string_view rest = origin;
  if (!absl::ConsumePrefix(&rest, "http://") && !absl::ConsumePrefix(&rest, "https://")) {
    return "not http:// or https://";
  }
  if (rest.empty()) return "no host";
  for (char c : rest) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) &&
        absl::string_view("-.:[]").find(c) == absl::string_view::npos) {
      return absl::StrCat("'", std::string(1, c), "' is not in a host[:port] (no path, no "
                          "trailing '/')");
    }
  }
  return "";
}

// What the request's path captured (httplib's regex groups).
std::string Group(const httplib::Request& req, int i) { return req.matches[i].str(); }

// ReadPayload of bytes [offset, offset + length) of record `id`.
v1::ReadPayloadRequest PayloadRange(const std::string& capture, uint64_t id, uint64_t offset,
                                    uint64_t length) {
  v1::ReadPayloadRequest request;
  request.set_capture(capture);
  request.set_record_id(id);
  request.set_offset(offset);
  request.set_length(length);
  return request;
}

// The bytes payload and tensor answers hold across requests: read chunks,
// a tensor's grid, an answer not yet sent. A request reserves what it will
// hold before it reads, and gives it back when its answer is gone.
class ByteBudget {
 public:
  explicit ByteBudget(uint64_t total) : total_(std::max<uint64_t>(total, 1)) {}

  class Reservation {
   public:
    Reservation(ByteBudget* budget, uint64_t bytes) : budget_(budget), bytes_(bytes) {}
    Reservation(Reservation&& other) noexcept
        : budget_(std::exchange(other.budget_, nullptr)), bytes_(other.bytes_) {}
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    Reservation& operator=(Reservation&&) = delete;
    ~Reservation() {
      if (budget_ != nullptr) budget_->Release(bytes_);
    }

   private:
    ByteBudget* budget_;
    uint64_t bytes_;
  };

  // `bytes` (at most the whole budget) once they are free, waiting up to
  // `wait` for other requests to give theirs back; nullopt after that.
  std::optional<Reservation> Reserve(uint64_t bytes, std::chrono::milliseconds wait) {
    bytes = std::min(bytes, total_);
    std::unique_lock<std::mutex> lock(mu_);
    if (!freed_.wait_for(lock, wait, [&] { return used_ + bytes <= total_; })) {
      return std::nullopt;
    }
    used_ += bytes;
    return std::optional<Reservation>(std::in_place, this, bytes);
  }

  uint64_t total() const { return total_; }
  uint64_t used() const {
    std::lock_guard<std::mutex> lock(mu_);
    return used_;
  }

 private:
  void Release(uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    used_ -= bytes;
    freed_.notify_all();
  }

  const uint64_t total_;
  mutable std::mutex mu_;
  std::condition_variable freed_;
  uint64_t used_ = 0;
};

// What ReadPayload sends in one message (the service reads args.bin in
// pieces of this size): a reader holds one, the service one more.
constexpr uint64_t kPayloadChunkBytes = 1 << 20;

uint64_t ChunkBytesFor(uint64_t length) { return 2 * std::min(length, kPayloadChunkBytes); }

// A JSON answer that holds its reservation until it is sent (or its
// connection is cut).
void SendJsonHolding(httplib::Response& res, std::string json, ByteBudget::Reservation held) {
  json.append("\n");
  struct Answer {
    std::string json;
    ByteBudget::Reservation held;
  };
  auto answer = std::make_shared<Answer>(Answer{std::move(json), std::move(held)});
  res.status = 200;
  res.set_content_provider(
      answer->json.size(), "application/json",
      [answer](size_t offset, size_t length, httplib::DataSink& sink) {
        return sink.write(answer->json.data() + offset, length);
      });
}

// A ReadPayload stream kept open across httplib's content-provider calls.
struct PayloadStream {
  explicit PayloadStream(ByteBudget::Reservation held) : held(std::move(held)) {}
  ByteBudget::Reservation held;  // its chunks' bytes, until the answer is gone
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::PayloadChunk>> reader;
  v1::PayloadChunk chunk;
  bool have_chunk = false;  // `chunk` read and not yet sent
  bool finished = false;
  ~PayloadStream() {
    if (reader != nullptr && !finished) {
      context.TryCancel();
      reader->Finish();
    }
  }
};

}  // namespace

class HttpGateway::Routes {
 public:
  Routes(const HttpGatewayOptions& options, std::shared_ptr<grpc::Channel> channel)
      : options_(options), stub_(v1::CaptureService::NewStub(std::move(channel))) {}

  void Install(httplib::Server* http) {
    http->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      // The Range header means something only to /payload: elsewhere
      // httplib would cut the JSON by it.
      auto& mutable_req = const_cast<httplib::Request&>(req);
      if (req.path.find("/payload") == std::string::npos) mutable_req.ranges.clear();
      if (Cors(req, res) || !Authorize(req, res) || !CheckBody(mutable_req, res)) {
        // A body not read would be taken for the next request.
        if (req.get_header_value("Content-Length", 0) != "0" ||
            req.has_header("Transfer-Encoding")) {
          HttpListener::CloseAfterAnswer();
        }
        return httplib::Server::HandlerResponse::Handled;
      }
      return httplib::Server::HandlerResponse::Unhandled;
    });
    for (const WebAsset& asset : WebAssets()) {
      auto serve = [&asset](const httplib::Request&, httplib::Response& res) {
        res.set_header("Cache-Control", "no-cache");
        res.set_header("X-Content-Type-Options", "nosniff");
        res.set_header("Content-Security-Policy",
                       "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' "
                       "data: blob:; frame-ancestors 'none'");
        res.set_content(std::string(asset.bytes), asset.content_type);
      };
      http->Get(asset.path, serve);
      if (asset.path == "/index.html") http->Get("/", serve);
    }
    const std::string name = "([A-Za-z0-9._-]+)";
    http->Get("/v1/captures", [this](const auto& req, auto& res) { ListCaptures(req, res); });
    http->Get("/v1/captures/" + name,
              [this](const auto& req, auto& res) { GetCapture(req, res); });
    http->Post("/v1/captures/" + name + ":finish",
               [this](const auto& req, auto& res) { FinishCapture(req, res); });
    http->Delete("/v1/captures/" + name,
                 [this](const auto& req, auto& res) { DeleteCapture(req, res); });
    http->Get("/v1/captures/" + name + "/args",
              [this](const auto& req, auto& res) { QueryArgs(req, res); });
    http->Get("/v1/captures/" + name + "/args/([^/]+)",
              [this](const auto& req, auto& res) { GetArg(req, res); });
    http->Get("/v1/captures/" + name + "/args/([^/]+)/payload",
              [this](const auto& req, auto& res) { Payload(req, res); });
    http->Get("/v1/captures/" + name + "/args/([^/]+)/tensor",
              [this](const auto& req, auto& res) { Tensor(req, res); });
    http->Post("/v1/rpc/([A-Za-z]+)", [this](const auto& req, auto& res) { Rpc(req, res); });
    http->set_error_handler(httplib::Server::HandlerWithResponse(
        [this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
      // The listener stopped reading the request (408, 503): its
      // connection closes after this answer.
      switch (HttpListener::RequestCut()) {
        case HttpListener::Cut::kNone:
          break;
        case HttpListener::Cut::kTimedOut:
          res.set_header("Connection", "close");
          SendError(res, 408, grpc::StatusCode::DEADLINE_EXCEEDED,
                    absl::StrCat("the request (its head and body) did not arrive within ",
                                 options_.request_timeout.count(), " ms"));
          return httplib::Server::HandlerResponse::Handled;
        case HttpListener::Cut::kEvicted:
          res.set_header("Connection", "close");
          res.set_header("Retry-After", "1");
          SendError(res, 503, grpc::StatusCode::UNAVAILABLE,
                    "every connection slot was taken, and this connection had kept the server "
                    "waiting longest for its request: retry");
          return httplib::Server::HandlerResponse::Handled;
      }
      const int status = res.status;
      // httplib refuses a bad Range before routing: the token comes first.
      if (status == 416 && !Authorize(req, res)) return httplib::Server::HandlerResponse::Handled;
      // httplib answers these before routing, from the request's head.
      const std::string what =
          status == 404   ? absl::StrCat("no such endpoint: ", req.method, " ", req.path,
                                         " (the API is under /v1/captures; see the README)")
          : status == 413 ? absl::StrCat("request body over ", kMaxRequestBody, " bytes")
          : status == 414 ? std::string("request target (path and query) too long")
          : status == 416 ? absl::StrCat("Range: '", req.get_header_value("Range"),
                                         "' is not a byte range this server reads (bytes=FIRST-"
                                         "LAST, bytes=FIRST- or bytes=-SUFFIX; /payload only)")
          : status == 400 ? std::string("malformed HTTP request (its request line, a header, "
                                        "or the body's framing)")
                          : absl::StrCat("HTTP ", status);
      SendError(res, status,
                status == 404   ? grpc::StatusCode::NOT_FOUND
                : status == 413 ? grpc::StatusCode::RESOURCE_EXHAUSTED
                                : grpc::StatusCode::INVALID_ARGUMENT,
                what);
      return httplib::Server::HandlerResponse::Handled;
    }));
    http->set_exception_handler(
        [](const httplib::Request&, httplib::Response& res, std::exception_ptr e) {
          std::string what = "internal error";
          try {
            if (e) std::rethrow_exception(e);
          } catch (const std::exception& x) {
            what = x.what();
          } catch (...) {
          }
          SendError(res, 500, grpc::StatusCode::INTERNAL, what);
        });
  }

 private:
  template <typename Req, typename Resp>
  using Method = grpc::Status (v1::CaptureService::Stub::*)(grpc::ClientContext*, const Req&,
                                                            Resp*);

  // CORS for /v1/: an allowed Origin gets Access-Control-Allow-Origin on
  // every answer (errors too, so a dashboard can read their message), and
  // its preflight (OPTIONS) is answered here: true when it was.
  bool Cors(const httplib::Request& req, httplib::Response& res) const {
    if (options_.cors_origins.empty() || req.path.rfind("/v1/", 0) != 0) return false;
    const std::string origin = req.get_header_value("Origin");
    const auto& allowed = options_.cors_origins;
    const bool any = std::find(allowed.begin(), allowed.end(), "*") != allowed.end();
    if (origin.empty() ||
        !(any || std::find(allowed.begin(), allowed.end(), origin) != allowed.end())) {
      return false;
    }
    res.set_header("Access-Control-Allow-Origin", any ? "*" : origin);
    if (!any) res.set_header("Vary", "Origin");
    res.set_header("Access-Control-Expose-Headers", "Content-Range, Content-Length, Accept-Ranges");
    if (req.method != "OPTIONS" || !req.has_header("Access-Control-Request-Method")) {
      return false;
    }
    res.status = 204;
    res.set_header("Access-Control-Allow-Methods", "GET, POST, DELETE");
    res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type, Range");
    res.set_header("Access-Control-Max-Age", "600");
    return true;
  }

  // Before httplib reads a request's body (pre-routing): a POST or DELETE
  // without Content-Length or Transfer-Encoding has none (RFC 9112 6.3;
  // httplib would read until the client closed: `curl -X POST` waited 10 s
  // for a 400), a bad or too large length is refused before its bytes
  // are waited for, and a JSON body is not parsed as a form (httplib caps
  // those at 8 KiB: `curl -d` sends that content type). False when refused
  // (a body sent anyway then reads as a malformed request: httplib answers
  // 400 and closes).
  bool CheckBody(httplib::Request& req, httplib::Response& res) const {
    if (req.method == "GET" || req.method == "HEAD" || req.method == "OPTIONS") return true;
    auto refuse = [&](int status, grpc::StatusCode code, std::string message) {
      SendError(res, status, code, message);
      return false;
    };
    const size_t lengths = req.get_header_value_count("Content-Length");
    if (lengths == 0) {
      if (!req.has_header("Transfer-Encoding")) req.set_header("Content-Length", "0");
    } else {
      uint64_t length = 0;
      for (size_t i = 0; i < lengths; ++i) {
        const std::string value = req.get_header_value("Content-Length", i);
        uint64_t v = 0;
        if (!ParseDecimal(value, &v) || (i > 0 && v != length)) {
          return refuse(400, grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("Content-Length: '", value, "'",
                                     i > 0 ? " differs from the first one"
                                           : " is not a byte count"));
        }
        length = v;
      }
      if (length > kMaxRequestBody) {
        return refuse(413, grpc::StatusCode::RESOURCE_EXHAUSTED,
                      absl::StrCat("request body of ", length, " bytes; at most ",
                                   kMaxRequestBody, " are read"));
      }
    }
    if (req.get_header_value("Content-Type").rfind("application/x-www-form-urlencoded", 0) == 0) {
      req.headers.erase("Content-Type");
    }
    return true;
  }

  // The call's metadata from the request: its bearer token (checked
  // already, by Authorize), a deadline.
  void Prepare(const httplib::Request& req, grpc::ClientContext* context) {
    context->set_deadline(std::chrono::system_clock::now() + kCallTimeout);
    absl::StatusOr<std::optional<std::string>> authorization = Authorization(req);
    if (authorization.ok() && authorization->has_value()) {
      context->AddMetadata("authorization", **authorization);
    }
  }

  // The Authorization header as the service's metadata (the scheme is
  // case-insensitive, RFC 9110 11.1; the service compares "Bearer <token>"
  // exactly); Unauthenticated for a byte gRPC metadata cannot carry.
  static absl::StatusOr<std::optional<std::string>> Authorization(const httplib::Request& req) {
    if (!req.has_header("Authorization")) return std::nullopt;
    const std::string value = req.get_header_value("Authorization");
    for (char c : value) {
      if (c < 0x20 || c > 0x7e) {
        return absl::UnauthenticatedError(
            "the Authorization header holds a byte that is not printable ASCII");
      }
    }
    const bool bearer = value.size() > 7 && absl::EqualsIgnoreCase(value.substr(0, 7), "bearer ");
    return bearer ? absl::StrCat("Bearer ", value.substr(7)) : value;
  }

  // Every /v1/ request shows its token before anything else in it is
  // looked at (its parameters, body, record id, range): a client without
  // it gets 401, never a 400 that tells it about the request. False (and
  // the 401 sent) when it does not.
  bool Authorize(const httplib::Request& req, httplib::Response& res) const {
    if (req.path.rfind("/v1/", 0) != 0) return true;  // the page holds no data
    absl::StatusOr<std::optional<std::string>> authorization = Authorization(req);
    absl::Status s = authorization.status();
    if (s.ok()) {
      s = CheckBearerToken(authorization->has_value()
                               ? std::optional<absl::string_view>(**authorization)
                               : std::nullopt,
                           options_.auth_token);
    }
    if (s.ok()) return true;
    SendError(res, 401, grpc::StatusCode::UNAUTHENTICATED, s.message());
    return false;
  }

  // One unary call, its answer in JSON.
  template <typename Req, typename Resp>
  void Unary(const httplib::Request& http_req, httplib::Response& res, Method<Req, Resp> method,
             const Req& request) {
    grpc::ClientContext context;
    Prepare(http_req, &context);
    Resp response;
    const grpc::Status s = (stub_.get()->*method)(&context, request, &response);
    if (!s.ok()) return SendStatus(res, s);
    SendJson(res, ProtoToJson(response));
  }

  // The record behind /args/ID..., or false with the error sent.
  bool FetchArg(const httplib::Request& req, httplib::Response& res, v1::CapturedArg* arg) {
    v1::GetArgRequest request;
    request.set_capture(Group(req, 1));
    uint64_t id = 0;
    if (!ParseDecimal(Group(req, 2), &id)) {
      BadRequest(res, absl::StrCat("record id '", Group(req, 2),
                                   "' is not a number (CapturedArg.record_id)"));
      return false;
    }
    request.set_record_id(id);
    grpc::ClientContext context;
    Prepare(req, &context);
    const grpc::Status s = stub_->GetArg(&context, request, arg);
    if (!s.ok()) {
      SendStatus(res, s);
      return false;
    }
    return true;
  }

  void ListCaptures(const httplib::Request& req, httplib::Response& res) {
    Params p(req, {"state", "label", "page_size", "page_token"});
    v1::ListCapturesRequest request;
    if (auto v = p.EnumValue<v1::CaptureState>("state", v1::CaptureState_descriptor(),
                                               "CAPTURE_STATE_")) {
      request.set_state(*v);
    }
    for (const std::string& label : p.All("label")) {
      // key:value (a '=' in a query value must be sent as %3D).
      const size_t eq = label.find_first_of(":=");
      if (eq == std::string::npos || eq == 0) {
        p.Fail(absl::StrCat("label=", label, ": not key:value"));
        break;
      }
      (*request.mutable_labels())[label.substr(0, eq)] = label.substr(eq + 1);
    }
    if (auto v = p.Uint("page_size", kMaxUint32)) request.set_page_size(*v);
    if (auto v = p.Single("page_token")) request.set_page_token(*v);
    if (!p.Finish()) return BadRequest(res, p.error());
    Unary(req, res, &v1::CaptureService::Stub::ListCaptures, request);
  }

  void GetCapture(const httplib::Request& req, httplib::Response& res) {
    Params p(req, {});
    if (!p.Finish()) return BadRequest(res, p.error());
    v1::GetCaptureRequest request;
    request.set_capture(Group(req, 1));
    Unary(req, res, &v1::CaptureService::Stub::GetCapture, request);
  }

  void FinishCapture(const httplib::Request& req, httplib::Response& res) {
    v1::FinishCaptureRequest request;
    request.set_capture(Group(req, 1));
    Unary(req, res, &v1::CaptureService::Stub::FinishCapture, request);
  }

  void DeleteCapture(const httplib::Request& req, httplib::Response& res) {
    v1::DeleteCaptureRequest request;
    request.set_capture(Group(req, 1));
    Unary(req, res, &v1::CaptureService::Stub::DeleteCapture, request);
  }

  void QueryArgs(const httplib::Request& req, httplib::Response& res) {
    Params p(req, {"task_id", "stage", "role", "kind", "arg_index", "func_id", "func",
                   "func_type", "dtype", "step", "overflow", "has_nonfinite", "func_unknown",
                   "page_size", "page_token"});
    v1::QueryArgsRequest request;
    request.set_capture(Group(req, 1));
    v1::ArgFilter* f = request.mutable_filter();
    if (auto v = p.TaskId("task_id")) f->set_task_id(*v);
    if (auto v = p.EnumValue<v1::Stage>("stage", v1::Stage_descriptor(), "STAGE_")) {
      f->set_stage(*v);
    }
    if (auto v = p.EnumValue<v1::Role>("role", v1::Role_descriptor(), "ROLE_")) f->set_role(*v);
    if (auto v = p.EnumValue<v1::Kind>("kind", v1::Kind_descriptor(), "KIND_")) f->set_kind(*v);
    if (auto v = p.EnumValue<v1::DType>("dtype", v1::DType_descriptor(), "DTYPE_")) {
      f->set_dtype(*v);
    }
    if (auto v = p.Uint("arg_index", kMaxUint32)) f->set_arg_index(*v);
    if (auto v = p.Uint("func_id", kMaxUint32)) f->set_func_id(*v);
    // func=: a kernel's name in the capture's kernel table, or its func id.
    if (auto v = p.Single("func")) {
      uint64_t id = 0;
      if (ParseDecimal(*v, &id) && id <= kMaxUint32) {
        f->set_func_id(static_cast<uint32_t>(id));
      } else {
        f->set_func_name(*v);
      }
    }
    if (auto v = p.Single("func_type")) f->set_func_type(*v);
    if (auto v = p.Uint("step", kMaxUint32)) f->set_step(*v);
    if (auto v = p.Bool("overflow")) f->set_overflow(*v);
    if (auto v = p.Bool("has_nonfinite")) f->set_has_nonfinite(*v);
    if (auto v = p.Bool("func_unknown")) f->set_func_unknown(*v);
    if (auto v = p.Uint("page_size", kMaxUint32)) request.set_page_size(*v);
    if (auto v = p.Single("page_token")) request.set_page_token(*v);
    if (!p.Finish()) return BadRequest(res, p.error());
    Unary(req, res, &v1::CaptureService::Stub::QueryArgs, request);
  }

  void GetArg(const httplib::Request& req, httplib::Response& res) {
    Params p(req, {});
    if (!p.Finish()) return BadRequest(res, p.error());
    v1::CapturedArg arg;
    if (FetchArg(req, res, &arg)) SendJson(res, ProtoToJson(arg));
  }

  // The payload's bytes: all of them, one Range (206), or ?offset=&length=.
  void Payload(const httplib::Request& req, httplib::Response& res) {
    auto& ranges = const_cast<httplib::Request&>(req).ranges;
    Params p(req, {"offset", "length"});
    const std::optional<uint64_t> offset_param = p.Uint("offset", UINT64_MAX);
    const std::optional<uint64_t> length_param = p.Uint("length", UINT64_MAX);
    if (!p.Finish()) {
      ranges.clear();
      return BadRequest(res, p.error());
    }
    v1::CapturedArg arg;
    if (!FetchArg(req, res, &arg)) {
      ranges.clear();
      return;
    }
    const uint64_t size = arg.record().bin_size();
    auto unsatisfiable = [&](const std::string& why) {
      ranges.clear();
      res.set_header("Content-Range", absl::StrCat("bytes */", size));
      SendError(res, 416, grpc::StatusCode::OUT_OF_RANGE, why);
    };
    uint64_t begin = 0, length = size;  // of the payload
    uint64_t provided = size;            // bytes the content provider covers
    if ((offset_param || length_param) && !ranges.empty()) {
      ranges.clear();
      return BadRequest(res, "give a Range header or offset=/length=, not both");
    }
    if (offset_param || length_param) {
      begin = offset_param.value_or(0);
      if (begin > size) {
        return BadRequest(res, absl::StrCat("offset=", begin, " is past the payload's ", size,
                                            " bytes"));
      }
      length = std::min(length_param.value_or(0) == 0 ? size - begin : *length_param,
                        size - begin);
      provided = length;
    } else if (ranges.size() > 1) {
      return unsatisfiable("one byte range per request");
    } else if (ranges.size() == 1) {
      const auto [first, last] = ranges[0];
      if (first < 0) {  // the last `last` bytes
        length = std::min<uint64_t>(static_cast<uint64_t>(last), size);
        begin = size - length;
      } else {
        begin = static_cast<uint64_t>(first);
        if (begin >= size || (last >= 0 && last < first)) {
          return unsatisfiable(absl::StrCat("the range starts past the payload's ", size,
                                            " bytes"));
        }
        const uint64_t end = last < 0 ? size : std::min<uint64_t>(last + 1, size);
        length = end - begin;
      }
      if (length == 0) return unsatisfiable("the range is empty");
      // httplib cuts the provider's bytes by this (and answers 206).
      ranges[0] = {static_cast<ssize_t>(begin), static_cast<ssize_t>(begin + length - 1)};
    }
    res.set_header("Accept-Ranges", "bytes");
    if (length == 0) {
      res.status = 200;
      res.set_content("", "application/octet-stream");
      return;
    }
    std::optional<ByteBudget::Reservation> held = Reserve(res, ChunkBytesFor(length));
    if (!held) {
      ranges.clear();
      return;
    }
    // The stream starts here so that an error reading args.bin is a status,
    // not a connection cut after the headers.
    auto stream = std::make_shared<PayloadStream>(*std::move(held));
    Prepare(req, &stream->context);
    // No deadline for the whole download (a slow client's 32 MiB was cut
    // after 60 s): a client that stops reading is cut by the listener's
    // write stall bound, and shutdown cuts the rest (Shutdown).
    stream->context.set_deadline(std::chrono::system_clock::time_point::max());
    stream->reader = stub_->ReadPayload(
        &stream->context, PayloadRange(Group(req, 1), arg.record_id(), begin, length));
    if (!stream->reader->Read(&stream->chunk)) {
      stream->finished = true;
      const grpc::Status s = stream->reader->Finish();
      ranges.clear();
      return SendStatus(res, s.ok() ? grpc::Status(grpc::StatusCode::DATA_LOSS,
                                                   "the payload ended before its first byte")
                                    : s);
    }
    stream->have_chunk = true;
    // Provider offsets: of the whole payload with a Range, else of the part.
    const uint64_t shift = ranges.empty() ? begin : 0;
    res.set_content_provider(
        provided, "application/octet-stream",
        [stream, shift](size_t offset, size_t, httplib::DataSink& sink) {
          if (!stream->have_chunk) {
            if (stream->finished || !stream->reader->Read(&stream->chunk)) {
              stream->finished = true;
              const grpc::Status s = stream->reader->Finish();
              std::fprintf(stderr, "capture_server: http payload: stream ended early: %s\n",
                           s.error_message().c_str());
              return false;  // the connection is cut: the length was promised
            }
          }
          stream->have_chunk = false;
          if (stream->chunk.offset() != offset + shift) return false;
          const std::string& data = stream->chunk.data();
          return sink.write(data.data(), data.size());
        },
        [stream](bool success) {
          if (!success) stream->context.TryCancel();
        });
  }

  void Tensor(const httplib::Request& req, httplib::Response& res) {
    Params p(req, {"index", "fit"});
    std::vector<uint64_t> index;
    if (auto v = p.Single("index"); v && !ParseIndexList(*v, &index)) {
      p.Fail(absl::StrCat("index=", *v, ": not a comma-separated list of indices"));
    }
    const uint64_t fit = p.Uint("fit", options_.tensor.max_elements).value_or(0);
    if (!p.Finish()) return BadRequest(res, p.error());
    if (req.has_param("fit") && fit == 0) return BadRequest(res, "fit=0: give at least 1 cell");
    v1::CapturedArg arg;
    if (!FetchArg(req, res, &arg)) return;
    absl::StatusOr<TensorSlicePlan> plan =
        PlanTensorSlice(arg.record(), index, fit, options_.tensor);
    if (!plan.ok()) {
      const bool too_big = absl::IsResourceExhausted(plan.status());
      return SendError(res, too_big ? 413 : 400,
                       too_big ? grpc::StatusCode::RESOURCE_EXHAUSTED
                               : grpc::StatusCode::INVALID_ARGUMENT,
                       plan.status().message());
    }
    // What the answer holds: the reducer's grid, the answer, the chunks
    // being read; never the slice.
    std::optional<ByteBudget::Reservation> held =
        Reserve(res, TensorSliceReducer::HeldBytes(*plan) + TensorSliceReducer::AnswerBytes(*plan) +
                         ChunkBytesFor(plan->read_length));
    if (!held) return;
    TensorSliceReducer reducer(*plan);
    if (plan->read_length > 0) {
      // One read of a single chunk serves both passes; a longer slice is
      // read twice (the histogram's bins need its min and max first).
      std::string only;  // the first chunk, while it is the only one
      uint64_t chunks = 0;
      grpc::Status s = ReadSlice(req, arg, *plan, [&](v1::PayloadChunk& chunk) {
        reducer.AddValues(chunk.data());
        if (chunks++ == 0) {
          only.swap(*chunk.mutable_data());
        } else {
          std::string().swap(only);  // its memory too
        }
      });
      if (s.ok() && reducer.NeedsHistogramPass()) {
        if (chunks == 1) {
          reducer.AddHistogram(only);
        } else {
          s = ReadSlice(req, arg, *plan,
                        [&](v1::PayloadChunk& chunk) { reducer.AddHistogram(chunk.data()); });
        }
      }
      if (s.ok() && !reducer.histogram_complete()) {
        s = grpc::Status(grpc::StatusCode::DATA_LOSS,
                         "the payload's second read ended before its first had");
      }
      if (!s.ok()) return SendStatus(res, s);
    }
    SendJsonHolding(res, reducer.Json(arg.record_id(), arg.record()), *std::move(held));
  }

  // Bytes [plan.read_offset, + read_length) of the record's payload, chunk
  // by chunk, in order.
  grpc::Status ReadSlice(const httplib::Request& req, const v1::CapturedArg& arg,
                         const TensorSlicePlan& plan,
                         const std::function<void(v1::PayloadChunk&)>& take) {
    grpc::ClientContext context;
    Prepare(req, &context);
    auto reader = stub_->ReadPayload(
        &context, PayloadRange(Group(req, 1), arg.record_id(), plan.read_offset, plan.read_length));
    v1::PayloadChunk chunk;
    uint64_t next = plan.read_offset;
    while (reader->Read(&chunk)) {
      if (chunk.offset() != next) {
        context.TryCancel();
        reader->Finish();
        return grpc::Status(grpc::StatusCode::DATA_LOSS,
                            absl::StrCat("the payload came out of order (byte ", chunk.offset(),
                                         " where ", next, " was due)"));
      }
      next += chunk.data().size();
      take(chunk);
    }
    return reader->Finish();
  }

  // `bytes` of the in-flight budget, or a 503 with Retry-After sent.
  std::optional<ByteBudget::Reservation> Reserve(httplib::Response& res, uint64_t bytes) {
    std::optional<ByteBudget::Reservation> held = budget_.Reserve(bytes, options_.budget_wait);
    if (!held) {
      res.set_header("Retry-After", "1");
      SendError(res, 503, grpc::StatusCode::UNAVAILABLE,
                absl::StrCat("busy: payload and tensor answers in flight hold ", budget_.used(),
                             " of their ", budget_.total(), " bytes and this one needs ",
                             std::min(bytes, budget_.total()), "; retry"));
    }
    return held;
  }

  // POST /v1/rpc/METHOD: the request message as JSON in the body.
  void Rpc(const httplib::Request& req, httplib::Response& res) {
    const std::string method = Group(req, 1);
    auto call = [&](auto request, auto stub_method) {
      if (absl::Status s = ProtoFromJson(req.body.empty() ? "{}" : req.body, &request); !s.ok()) {
        return BadRequest(res, s.message());
      }
      Unary(req, res, stub_method, request);
    };
    using Stub = v1::CaptureService::Stub;
    if (method == "ListCaptures") return call(v1::ListCapturesRequest(), &Stub::ListCaptures);
    if (method == "GetCapture") return call(v1::GetCaptureRequest(), &Stub::GetCapture);
    if (method == "QueryArgs") return call(v1::QueryArgsRequest(), &Stub::QueryArgs);
    if (method == "GetArg") return call(v1::GetArgRequest(), &Stub::GetArg);
    if (method == "FinishCapture") return call(v1::FinishCaptureRequest(), &Stub::FinishCapture);
    if (method == "DeleteCapture") return call(v1::DeleteCaptureRequest(), &Stub::DeleteCapture);
    SendError(res, 404, grpc::StatusCode::UNIMPLEMENTED,
              absl::StrCat("no unary method ", method,
                           " (ListCaptures, GetCapture, QueryArgs, GetArg, FinishCapture, "
                           "DeleteCapture; ReadPayload is GET .../args/ID/payload)"));
  }

  const HttpGatewayOptions options_;
  std::unique_ptr<v1::CaptureService::Stub> stub_;
  ByteBudget budget_{options_.inflight_budget_bytes};
};

absl::StatusOr<std::unique_ptr<HttpGateway>> HttpGateway::Start(
    const HttpGatewayOptions& options, std::shared_ptr<grpc::Channel> channel) {
  const size_t colon = options.listen.rfind(':');
  int port = -1;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(options.listen.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http_listen ", options.listen, ": not host:port"));
  }
  std::string host = options.listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key go together");
  }
  for (const std::string& origin : options.cors_origins) {
    if (auto bad = BadOrigin(origin); !bad.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--http_cors_origin ", origin, ": ", bad));
    }
  }
  std::unique_ptr<HttpGateway> gateway(new HttpGateway());
  if (!options.tls_cert_file.empty()) {
    // OpenSSL says only "not valid": name the file that is not readable.
    for (const std::string* f : {&options.tls_cert_file, &options.tls_key_file}) {
      if (auto bytes = ReadFileToString(*f); !bytes.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("HTTPS: cannot read ", *f, ": ",
                                                       bytes.status().message()));
      }
    }
  }
  HttpListenerLimits limits;
  limits.max_connections = static_cast<size_t>(std::max(2, options.max_connections));
  limits.request_timeout = options.request_timeout;
  limits.write_stall_timeout = options.write_stall_timeout;
  limits.evict_after = options.evict_after;
  limits.send_buffer_bytes = options.send_buffer_bytes;
  limits.keep_alive_timeout = std::chrono::seconds(kKeepAliveSeconds);
  gateway->http_ =
      std::make_unique<HttpListener>(limits, options.tls_cert_file, options.tls_key_file);
  if (!gateway->http_->is_valid()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "HTTPS: ", options.tls_cert_file, " and ", options.tls_key_file,
        " are not a PEM certificate chain and its private key"));
  }
  // What the answers' Keep-Alive header says (the listener closes an idle
  // connection after as long).
  gateway->http_->set_keep_alive_timeout(kKeepAliveSeconds);
  gateway->http_->set_payload_max_length(kMaxRequestBody);
  // An answer goes out as two writes (headers, body): with Nagle on, the
  // body waits for the ACK of the headers, which a keep-alive client delays
  // by 40 ms (the second query on a connection took 42 ms instead of 1).
  gateway->http_->set_tcp_nodelay(true);
  // httplib sets SO_REUSEPORT by default: a second server on the same port
  // would start and take half the connections. SO_REUSEADDR only (a
  // restart binds while old connections linger in TIME_WAIT).
  auto listening = std::make_shared<int>(-1);
  gateway->http_->set_socket_options([listening](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    *listening = sock;
  });
  gateway->routes_ = std::make_unique<Routes>(options, std::move(channel));
  gateway->routes_->Install(gateway->http_.get());
  if (port == 0) {
    port = gateway->http_->bind_to_any_port(host);
  } else if (!gateway->http_->bind_to_port(host, port)) {
    port = -1;
  }
  if (port <= 0) {
    return absl::UnavailableError(
        absl::StrCat("--http_listen ", options.listen, ": cannot listen (in use, or no such address)"));
  }
  gateway->port_ = port;
  // httplib listens with a backlog of 5: a burst of connections (a page's
  // six, a dashboard's fan-out) overflowed it while the accept loop started
  // threads, and the dropped SYNs were retried a second later. Listening
  // again on the bound socket raises the backlog.
  if (*listening >= 0) ::listen(*listening, SOMAXCONN);
  HttpListener* http = gateway->http_.get();
  auto exited = std::make_shared<std::atomic<bool>>(false);
  if (absl::Status s = StartThread("the HTTP accept thread", &gateway->listener_,
                                   [http, exited] {
                                     http->listen_after_bind();
                                     exited->store(true);
                                   });
      !s.ok()) {
    return s;
  }
  // httplib's stop() does nothing until its accept loop runs; the socket is
  // bound and listening already, so this is a moment.
  while (!http->is_running() && !exited->load()) std::this_thread::yield();
  return gateway;
}

void HttpGateway::Shutdown(std::chrono::milliseconds grace) {
  if (http_ == nullptr || !listener_.joinable()) return;
  http_->stop();  // no new connections; kept-alive ones close after their request
  // A request still arriving (a client that trickles its head), a download
  // a slow client reads, an idle kept-alive connection: cut after the grace,
  // so a SIGTERM ends the server whatever its clients do.
  // Again until all are gone: one accepted as the listener closed is cut
  // on the next round.
  ConnectionThreads& connections = http_->threads();
  if (!connections.WaitIdle(std::chrono::steady_clock::now() + grace)) {
    do {
      ConnectionThreads::CutConnections(port_);
    } while (!connections.WaitIdle(std::chrono::steady_clock::now() +
                                   std::chrono::milliseconds(100)));
  }
  listener_.join();
}

HttpGateway::~HttpGateway() { Shutdown(std::chrono::milliseconds(0)); }

}  // namespace argsdump
