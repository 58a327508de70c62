// The /v1/ endpoints that are one unary call each: the captures (list,
// get, finish, delete), an arg query, one arg, and POST /v1/rpc/METHOD
// with the request message as JSON; and the schema a page builds its
// filter form from. And the jobs: list, one job, the args query across its
// ranks, its first non-finite record, and the comparisons (their stream
// read to its end, the last message the answer).
#ifndef ARGSDUMP_SERVER_HTTP_CAPTURE_CALLS_H_
#define ARGSDUMP_SERVER_HTTP_CAPTURE_CALLS_H_

#include "httplib.h"
#include "server/http/params.h"
#include "server/http/service_calls.h"

namespace argsdump {

// ranks=1,3,5: into `out`; a bad list fails `p`.
void RanksParam(Params& p, google::protobuf::RepeatedField<uint32_t>* out);

class CaptureCalls {
 public:
  explicit CaptureCalls(ServiceCalls* calls) : calls_(calls) {}

  void ListCaptures(const httplib::Request& req, httplib::Response& res);
  void GetCapture(const httplib::Request& req, httplib::Response& res);
  void FinishCapture(const httplib::Request& req, httplib::Response& res);
  void DeleteCapture(const httplib::Request& req, httplib::Response& res);
  void QueryArgs(const httplib::Request& req, httplib::Response& res);
  void GetArg(const httplib::Request& req, httplib::Response& res);
  void Rpc(const httplib::Request& req, httplib::Response& res);
  void ListJobs(const httplib::Request& req, httplib::Response& res);
  void GetJob(const httplib::Request& req, httplib::Response& res);
  void QueryJob(const httplib::Request& req, httplib::Response& res);
  void FirstNonfinite(const httplib::Request& req, httplib::Response& res);
  void JobGrid(const httplib::Request& req, httplib::Response& res);
  void CompareJobs(const httplib::Request& req, httplib::Response& res);
  void CompareRanks(const httplib::Request& req, httplib::Response& res);
  // GET /v1/captures/{c}/trace, /v1/jobs/{job}/trace (trace_calls.cc): the
  // task timeline as a JSON trace (format/trace_json.h), a process per rank;
  // the filter parameters (and ranks= for a job) pick the records. 413
  // RESOURCE_EXHAUSTED past 200000 records.
  void CaptureTrace(const httplib::Request& req, httplib::Response& res);
  void JobTrace(const httplib::Request& req, httplib::Response& res);
  // GET /v1/schema: {"filter": [...]}, the parameters of the args query
  // (format/arg_filter_params.h's ArgFilterSchemaJson: name, kind, values,
  // help), so a page's filter form follows the one filter table.
  void Schema(const httplib::Request& req, httplib::Response& res);

 private:
  ServiceCalls* const calls_;
};

}  // namespace argsdump

#endif  // ARGSDUMP_SERVER_HTTP_CAPTURE_CALLS_H_
