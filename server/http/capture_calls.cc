#include "server/http/capture_calls.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "format/arg_filter_params.h"
#include "server/http/params.h"
#include "server/http/proto_json.h"
#include "server/http/responses.h"

namespace argsdump {

using Stub = v1::CaptureService::Stub;

void CaptureCalls::ListCaptures(const httplib::Request& req, httplib::Response& res) {
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
  calls_->Unary(req, res, &Stub::ListCaptures, request);
}

void CaptureCalls::Schema(const httplib::Request& req, httplib::Response& res) {
  Params p(req, {});
  if (!p.Finish()) return BadRequest(res, p.error());
  static const std::string* const body = new std::string(SchemaBody());
  res.set_content(*body, "application/json");
}

void CaptureCalls::GetCapture(const httplib::Request& req, httplib::Response& res) {
  Params p(req, {});
  if (!p.Finish()) return BadRequest(res, p.error());
  v1::GetCaptureRequest request;
  request.set_capture(PathGroup(req, 1));
  calls_->Unary(req, res, &Stub::GetCapture, request);
}

void CaptureCalls::FinishCapture(const httplib::Request& req, httplib::Response& res) {
  v1::FinishCaptureRequest request;
  request.set_capture(PathGroup(req, 1));
  calls_->Unary(req, res, &Stub::FinishCapture, request);
}

void CaptureCalls::DeleteCapture(const httplib::Request& req, httplib::Response& res) {
  v1::DeleteCaptureRequest request;
  request.set_capture(PathGroup(req, 1));
  calls_->Unary(req, res, &Stub::DeleteCapture, request);
}

void CaptureCalls::QueryArgs(const httplib::Request& req, httplib::Response& res) {
  std::vector<std::string> known = ArgFilterParamNames();
  known.push_back("page_size");
  known.push_back("page_token");
  Params p(req, std::move(known));
  v1::QueryArgsRequest request;
  request.set_capture(PathGroup(req, 1));
  ParseArgFilterParams(p, request.mutable_filter());
  if (auto v = p.Uint("page_size", kMaxUint32)) request.set_page_size(*v);
  if (auto v = p.Single("page_token")) request.set_page_token(*v);
  if (!p.Finish()) return BadRequest(res, p.error());
  calls_->Unary(req, res, &Stub::QueryArgs, request);
}

void CaptureCalls::GetArg(const httplib::Request& req, httplib::Response& res) {
  Params p(req, {});
  if (!p.Finish()) return BadRequest(res, p.error());
  v1::CapturedArg arg;
  if (calls_->FetchArg(req, res, &arg)) SendJson(res, ProtoToJson(arg));
}

void CaptureCalls::Rpc(const httplib::Request& req, httplib::Response& res) {
  const std::string method = PathGroup(req, 1);
  auto call = [&](auto request, auto stub_method) {
    if (absl::Status s = ProtoFromJson(req.body.empty() ? "{}" : req.body, &request); !s.ok()) {
      return BadRequest(res, s.message());
    }
    calls_->Unary(req, res, stub_method, request);
  };
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

}  // namespace argsdump
