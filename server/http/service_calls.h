// What every /v1/ handler does with the capture service: a call on the
// server's in-process channel with the request's bearer token and a
// deadline, a unary call answered in JSON, the record behind
// /args/ID... fetched. The handlers (capture_calls.h, payload_calls.h)
// are built on it; it keeps no state between requests.
#ifndef ARGSDUMP_SERVER_HTTP_SERVICE_CALLS_H_
#define ARGSDUMP_SERVER_HTTP_SERVICE_CALLS_H_

#include <chrono>
#include <memory>
#include <string>

#include "grpcpp/grpcpp.h"
#include "httplib.h"
#include "proto/argsdump/v1/capture_service.grpc.pb.h"
#include "server/http/proto_json.h"
#include "server/http/responses.h"

namespace argsdump {

// What the request's path captured (httplib's regex groups): 1 the
// capture's name (or /v1/rpc's method), 2 the record id.
std::string PathGroup(const httplib::Request& req, int i);

class ServiceCalls {
 public:
  explicit ServiceCalls(std::shared_ptr<grpc::Channel> channel)
      : stub_(v1::CaptureService::NewStub(std::move(channel))) {}

  v1::CaptureService::Stub& stub() { return *stub_; }

  // The call's metadata from the request: its bearer token (checked
  // already, by Authorize), a 60 s deadline.
  static void Prepare(const httplib::Request& req, grpc::ClientContext* context);

  template <typename Req, typename Resp>
  using Method = grpc::Status (v1::CaptureService::Stub::*)(grpc::ClientContext*, const Req&,
                                                            Resp*);

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
  bool FetchArg(const httplib::Request& req, httplib::Response& res, v1::CapturedArg* arg);

 private:
  std::unique_ptr<v1::CaptureService::Stub> stub_;
};

}  // namespace argsdump

#endif  // ARGSDUMP_SERVER_HTTP_SERVICE_CALLS_H_
