#include "server/http/service_calls.h"

#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "server/http/params.h"
#include "server/http/request_checks.h"

namespace argsdump {
namespace {

constexpr auto kCallTimeout = std::chrono::seconds(60);

}  // namespace

std::string PathGroup(const httplib::Request& req, int i) { return req.matches[i].str(); }

void ServiceCalls::Prepare(const httplib::Request& req, grpc::ClientContext* context) {
  context->set_deadline(std::chrono::system_clock::now() + kCallTimeout);
  absl::StatusOr<std::optional<std::string>> authorization = AuthorizationMetadata(req);
  if (authorization.ok() && authorization->has_value()) {
    context->AddMetadata("authorization", **authorization);
  }
}

bool ServiceCalls::FetchArg(const httplib::Request& req, httplib::Response& res,
                            v1::CapturedArg* arg) {
  v1::GetArgRequest request;
  request.set_capture(PathGroup(req, 1));
  uint64_t id = 0;
  if (!ParseDecimal(PathGroup(req, 2), &id)) {
    BadRequest(res, absl::StrCat("record id '", PathGroup(req, 2),
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

}  // namespace argsdump
