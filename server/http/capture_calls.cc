#include "server/http/capture_calls.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "format/arg_filter_params.h"
#include "server/http/params.h"
#include "server/http/proto_json.h"
#include "server/http/responses.h"

namespace argsdump {

using Stub = v1::CaptureService::Stub;

void CaptureCalls::ListCaptures(const httplib::Request& req, httplib::Response& res) {
  Params p(req, {"state", "label", "job", "page_size", "page_token"});
  v1::ListCapturesRequest request;
  if (auto v = p.Single("job")) request.set_job(*v);
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
  if (method == "ListJobs") return call(v1::ListJobsRequest(), &Stub::ListJobs);
  if (method == "GetJob") return call(v1::GetJobRequest(), &Stub::GetJob);
  if (method == "QueryJob") return call(v1::QueryJobRequest(), &Stub::QueryJob);
  if (method == "FirstNonfinite") return call(v1::FirstNonfiniteRequest(), &Stub::FirstNonfinite);
  if (method == "GetJobGrid") return call(v1::GetJobGridRequest(), &Stub::GetJobGrid);
  SendError(res, 404, grpc::StatusCode::UNIMPLEMENTED,
            absl::StrCat("no unary method ", method,
                         " (ListCaptures, GetCapture, QueryArgs, GetArg, FinishCapture, "
                         "DeleteCapture, ListJobs, GetJob, QueryJob, FirstNonfinite, GetJobGrid; ReadPayload "
                         "is GET .../args/ID/payload, CompareJobs and CompareRanks are GET "
                         "/v1/jobs/JOB/compare and /compare_ranks)"));
}

// ---- Jobs ------------------------------------------------------------------

void RanksParam(Params& p, google::protobuf::RepeatedField<uint32_t>* out) {
  std::optional<std::string> text = p.Single("ranks");
  if (!text) return;
  std::vector<uint64_t> ranks;
  if (!ParseIndexList(*text, &ranks)) return p.Fail(absl::StrCat("ranks=", *text, ": not a,b,c"));
  for (uint64_t r : ranks) {
    if (r > kMaxUint32) return p.Fail(absl::StrCat("ranks=", *text, ": ", r, " is too large"));
    out->Add(static_cast<uint32_t>(r));
  }
}

namespace {

// atol=, rtol=: a comparison's tolerance.
void ToleranceParams(Params& p, v1::CompareTolerance* out) {
  for (const char* name : {"atol", "rtol"}) {
    std::optional<std::string> text = p.Single(name);
    if (!text) continue;
    double v = 0;
    if (!absl::SimpleAtod(*text, &v) || !(v >= 0)) {
      p.Fail(absl::StrCat(name, "=", *text, ": not a number of 0 or more"));
      return;
    }
    std::string(name) == "atol" ? out->set_atol(v) : out->set_rtol(v);
  }
}

std::vector<std::string> WithFilterParams(std::vector<std::string> more) {
  std::vector<std::string> known = ArgFilterParamNames();
  known.insert(known.end(), more.begin(), more.end());
  return known;
}

// A comparison's stream read to its end: the last message as JSON.
template <typename Req>
void AnswerComparison(ServiceCalls* calls, const httplib::Request& req, httplib::Response& res,
                      std::unique_ptr<grpc::ClientReader<v1::CompareProgress>> (Stub::*method)(
                          grpc::ClientContext*, const Req&),
                      const Req& request) {
  grpc::ClientContext context;
  ServiceCalls::Prepare(req, &context);
  auto reader = (calls->stub().*method)(&context, request);
  v1::CompareProgress progress, last;
  while (reader->Read(&progress)) last = progress;
  const grpc::Status s = reader->Finish();
  if (!s.ok()) return SendStatus(res, s);
  SendJson(res, ProtoToJson(last));
}

}  // namespace

void CaptureCalls::ListJobs(const httplib::Request& req, httplib::Response& res) {
  Params p(req, {"page_size", "page_token"});
  v1::ListJobsRequest request;
  if (auto v = p.Uint("page_size", kMaxUint32)) request.set_page_size(*v);
  if (auto v = p.Single("page_token")) request.set_page_token(*v);
  if (!p.Finish()) return BadRequest(res, p.error());
  calls_->Unary(req, res, &Stub::ListJobs, request);
}

void CaptureCalls::GetJob(const httplib::Request& req, httplib::Response& res) {
  Params p(req, {});
  if (!p.Finish()) return BadRequest(res, p.error());
  v1::GetJobRequest request;
  request.set_job(PathGroup(req, 1));
  calls_->Unary(req, res, &Stub::GetJob, request);
}

void CaptureCalls::QueryJob(const httplib::Request& req, httplib::Response& res) {
  Params p(req, WithFilterParams({"ranks", "page_size", "page_token"}));
  v1::QueryJobRequest request;
  request.set_job(PathGroup(req, 1));
  ParseArgFilterParams(p, request.mutable_filter());
  RanksParam(p, request.mutable_ranks());
  if (auto v = p.Uint("page_size", kMaxUint32)) request.set_page_size(*v);
  if (auto v = p.Single("page_token")) request.set_page_token(*v);
  if (!p.Finish()) return BadRequest(res, p.error());
  calls_->Unary(req, res, &Stub::QueryJob, request);
}

void CaptureCalls::FirstNonfinite(const httplib::Request& req, httplib::Response& res) {
  Params p(req, ArgFilterParamNames());
  v1::FirstNonfiniteRequest request;
  request.set_job(PathGroup(req, 1));
  ParseArgFilterParams(p, request.mutable_filter());
  if (!p.Finish()) return BadRequest(res, p.error());
  calls_->Unary(req, res, &Stub::FirstNonfinite, request);
}

void CaptureCalls::JobGrid(const httplib::Request& req, httplib::Response& res) {
  Params p(req, {"max_steps"});
  v1::GetJobGridRequest request;
  request.set_job(PathGroup(req, 1));
  if (auto v = p.Uint("max_steps", kMaxUint32)) request.set_max_steps(*v);
  if (!p.Finish()) return BadRequest(res, p.error());
  calls_->Unary(req, res, &Stub::GetJobGrid, request);
}

void CaptureCalls::CompareJobs(const httplib::Request& req, httplib::Response& res) {
  Params p(req, WithFilterParams({"reference", "ranks", "atol", "rtol"}));
  v1::CompareJobsRequest request;
  request.set_job(PathGroup(req, 1));
  if (auto v = p.Single("reference")) request.set_reference(*v);
  ParseArgFilterParams(p, request.mutable_filter());
  RanksParam(p, request.mutable_ranks());
  ToleranceParams(p, request.mutable_tolerance());
  if (request.reference().empty()) p.Fail("reference=JOB is needed: the job to compare against");
  if (!p.Finish()) return BadRequest(res, p.error());
  AnswerComparison(calls_, req, res, &Stub::CompareJobs, request);
}

void CaptureCalls::CompareRanks(const httplib::Request& req, httplib::Response& res) {
  Params p(req, WithFilterParams({"reference_rank", "ranks", "atol", "rtol"}));
  v1::CompareRanksRequest request;
  request.set_job(PathGroup(req, 1));
  if (auto v = p.Uint("reference_rank", kMaxUint32)) request.set_reference_rank(*v);
  ParseArgFilterParams(p, request.mutable_filter());
  RanksParam(p, request.mutable_ranks());
  ToleranceParams(p, request.mutable_tolerance());
  if (!p.Finish()) return BadRequest(res, p.error());
  AnswerComparison(calls_, req, res, &Stub::CompareRanks, request);
}

}  // namespace argsdump
