// GET /v1/captures/{c}/trace and GET /v1/jobs/{job}/trace: a capture's or a
// job's task timeline (format/trace_json.h), from the service's own calls
// (GetCapture for the clock and kernels, QueryArgs for the records, GetJob
// for a job's ranks). Bounded: a trace holds at most kMaxTraceRecords
// records in all; past that the answer is 413 RESOURCE_EXHAUSTED, asking
// for filters (step=, func=, ranks=, ...) that pick fewer.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "format/arg_filter_params.h"
#include "format/trace_json.h"
#include "server/http/capture_calls.h"
#include "server/http/params.h"

namespace argsdump {
namespace {

using Stub = v1::CaptureService::Stub;

// What one trace may read, over all its ranks: the records a trace holds
// in memory as it is built (a few hundred bytes each), well under what a
// page of the web view or a Perfetto tab takes in.
constexpr uint64_t kMaxTraceRecords = 200000;

// The records of `capture` that match `filter` into `out`, with its clock
// and kernels; `budget` counts down the records still allowed.
grpc::Status ReadRank(ServiceCalls* calls, const httplib::Request& req,
                      const std::string& capture, const v1::ArgFilter& filter, uint64_t* budget,
                      TraceRank* out) {
  v1::CaptureSummary summary;
  {
    grpc::ClientContext context;
    ServiceCalls::Prepare(req, &context);
    v1::GetCaptureRequest get;
    get.set_capture(capture);
    grpc::Status s = calls->stub().GetCapture(&context, get, &summary);
    if (!s.ok()) return s;
  }
  out->clock = summary.clock();
  out->kernels = summary.kernels();
  v1::QueryArgsRequest query;
  query.set_capture(capture);
  *query.mutable_filter() = filter;
  query.set_page_size(1000);
  for (;;) {
    grpc::ClientContext context;
    ServiceCalls::Prepare(req, &context);
    v1::QueryArgsResponse page;
    grpc::Status s = calls->stub().QueryArgs(&context, query, &page);
    if (!s.ok()) return s;
    for (const v1::CapturedArg& a : page.args()) {
      if (*budget == 0) {
        return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                            absl::StrCat("a trace holds at most ", kMaxTraceRecords,
                                         " records, and more match (capture ", capture,
                                         "): pick fewer with filters (step=, func=, ranks=, ...)"));
      }
      --*budget;
      out->records.push_back(a.record());
    }
    if (page.next_page_token().empty()) return grpc::Status::OK;
    query.set_page_token(page.next_page_token());
  }
}

void SendTraceStatus(httplib::Response& res, const grpc::Status& s) {
  if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
    return SendError(res, 413, s.error_code(), s.error_message());
  }
  SendStatus(res, s);
}

}  // namespace

void CaptureCalls::CaptureTrace(const httplib::Request& req, httplib::Response& res) {
  Params p(req, ArgFilterParamNames());
  v1::ArgFilter filter;
  ParseArgFilterParams(p, &filter);
  if (!p.Finish()) return BadRequest(res, p.error());
  const std::string capture = PathGroup(req, 1);
  std::vector<TraceRank> ranks(1);
  ranks[0].label = capture;
  uint64_t budget = kMaxTraceRecords;
  const grpc::Status s = ReadRank(calls_, req, capture, filter, &budget, &ranks[0]);
  if (!s.ok()) return SendTraceStatus(res, s);
  SendJson(res, TraceJson(ranks));
}

void CaptureCalls::JobTrace(const httplib::Request& req, httplib::Response& res) {
  std::vector<std::string> known = ArgFilterParamNames();
  known.push_back("ranks");
  Params p(req, std::move(known));
  v1::ArgFilter filter;
  ParseArgFilterParams(p, &filter);
  google::protobuf::RepeatedField<uint32_t> wanted;
  RanksParam(p, &wanted);
  if (!p.Finish()) return BadRequest(res, p.error());
  v1::JobSummary job;
  {
    grpc::ClientContext context;
    ServiceCalls::Prepare(req, &context);
    v1::GetJobRequest get;
    get.set_job(PathGroup(req, 1));
    const grpc::Status s = calls_->stub().GetJob(&context, get, &job);
    if (!s.ok()) return SendStatus(res, s);
  }
  std::vector<TraceRank> ranks;
  uint64_t budget = kMaxTraceRecords;
  for (const v1::RankSummary& r : job.ranks()) {
    if (!wanted.empty() &&
        std::find(wanted.begin(), wanted.end(), r.rank()) == wanted.end()) {
      continue;
    }
    TraceRank& rank = ranks.emplace_back();
    rank.label = absl::StrCat("rank ", r.rank(), " (", r.capture().capture(), ")");
    const grpc::Status s = ReadRank(calls_, req, r.capture().capture(), filter, &budget, &rank);
    if (!s.ok()) return SendTraceStatus(res, s);
  }
  SendJson(res, TraceJson(ranks));
}

}  // namespace argsdump
