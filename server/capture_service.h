// The gRPC capture service (argsdump.v1.CaptureService) over a CaptureHub,
// and CaptureServer, which binds it with health checking and reflection.
// Callback API: reactions never wait on disk. Ingest appends and exports run
// on each capture's writer thread; queries and payload reads run on a small
// I/O pool; reactions only parse, validate and hand work over. The Ingest
// protocol itself is IngestSession's (server/ingest_session.h); its reactor
// only carries messages. Statuses go out through proto/grpc_status.h.
#ifndef ARGSDUMP_SERVER_CAPTURE_SERVICE_H_
#define ARGSDUMP_SERVER_CAPTURE_SERVICE_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "proto/argsdump/v1/capture_service.grpc.pb.h"
#include "server/capture_hub.h"
#include "server/http/gateway.h"
#include "server/job_queries.h"

namespace argsdump {

// A few threads that run blocking work (file reads) for reactions.
class IoPool {
 public:
  explicit IoPool(int threads);
  ~IoPool();
  void Run(std::function<void()> work);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> work_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

class CaptureServiceImpl final : public v1::CaptureService::CallbackService {
 public:
  // `auth_token` empty: no authentication.
  CaptureServiceImpl(CaptureHub* hub, std::string auth_token);
  ~CaptureServiceImpl() override;

  grpc::ServerBidiReactor<v1::IngestRequest, v1::IngestResponse>* Ingest(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* ListCaptures(grpc::CallbackServerContext* context,
                                         const v1::ListCapturesRequest* request,
                                         v1::ListCapturesResponse* response) override;
  grpc::ServerUnaryReactor* FinishCapture(grpc::CallbackServerContext* context,
                                          const v1::FinishCaptureRequest* request,
                                          v1::CaptureSummary* response) override;
  grpc::ServerUnaryReactor* DeleteCapture(grpc::CallbackServerContext* context,
                                          const v1::DeleteCaptureRequest* request,
                                          v1::DeleteCaptureResponse* response) override;
  grpc::ServerUnaryReactor* GetCapture(grpc::CallbackServerContext* context,
                                       const v1::GetCaptureRequest* request,
                                       v1::CaptureSummary* response) override;
  grpc::ServerUnaryReactor* QueryArgs(grpc::CallbackServerContext* context,
                                      const v1::QueryArgsRequest* request,
                                      v1::QueryArgsResponse* response) override;
  grpc::ServerUnaryReactor* GetArg(grpc::CallbackServerContext* context,
                                   const v1::GetArgRequest* request,
                                   v1::CapturedArg* response) override;
  grpc::ServerWriteReactor<v1::PayloadChunk>* ReadPayload(
      grpc::CallbackServerContext* context, const v1::ReadPayloadRequest* request) override;
  grpc::ServerWriteReactor<v1::WatchCaptureResponse>* WatchCapture(
      grpc::CallbackServerContext* context, const v1::WatchCaptureRequest* request) override;
  // The job questions (server/job_queries.h), on the I/O pool.
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context,
                                     const v1::ListJobsRequest* request,
                                     v1::ListJobsResponse* response) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context,
                                   const v1::GetJobRequest* request,
                                   v1::JobSummary* response) override;
  grpc::ServerUnaryReactor* QueryJob(grpc::CallbackServerContext* context,
                                     const v1::QueryJobRequest* request,
                                     v1::QueryJobResponse* response) override;
  grpc::ServerUnaryReactor* FirstNonfinite(grpc::CallbackServerContext* context,
                                           const v1::FirstNonfiniteRequest* request,
                                           v1::FirstNonfiniteResponse* response) override;
  grpc::ServerUnaryReactor* GetJobGrid(grpc::CallbackServerContext* context,
                                       const v1::GetJobGridRequest* request,
                                       v1::JobGrid* response) override;
  grpc::ServerWriteReactor<v1::CompareProgress>* CompareJobs(
      grpc::CallbackServerContext* context, const v1::CompareJobsRequest* request) override;
  grpc::ServerWriteReactor<v1::CompareProgress>* CompareRanks(
      grpc::CallbackServerContext* context, const v1::CompareRanksRequest* request) override;

  // UNAUTHENTICATED unless the call carries "authorization: Bearer <token>".
  absl::Status CheckAuth(const grpc::CallbackServerContext* context) const;
  CaptureHub* hub() const { return hub_; }
  IoPool* io() { return &io_; }

 private:
  // Runs `answer` on the I/O pool and finishes the call with what it gave.
  template <typename Response, typename Fn>
  grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context, Response* response,
                                   Fn answer);

  CaptureHub* const hub_;
  const std::string auth_token_;
  const JobQueries jobs_{hub_};
  IoPool io_{2};
};

struct CaptureServerOptions {
  // host:port; port 0 picks a free one (see CaptureServer::port()).
  std::string listen = "127.0.0.1:50051";
  CaptureHub::Options hub;
  // Both set: TLS with this certificate chain and private key (PEM files).
  std::string tls_cert_file;
  std::string tls_key_file;
  // Non-empty: every CaptureService call needs "authorization: Bearer <token>".
  std::string auth_token;
  // http.listen non-empty: the HTTP/JSON face and web view too (its calls go
  // to this server in-process; TLS with the files above, the same token).
  HttpGatewayOptions http;
};

class CaptureServer {
 public:
  static absl::StatusOr<std::unique_ptr<CaptureServer>> Start(CaptureServerOptions options);
  ~CaptureServer();
  int port() const { return port_; }
  // The HTTP face's port (0 when it is off).
  int http_port() const { return http_ != nullptr ? http_->port() : 0; }
  CaptureHub& hub() { return *hub_; }
  // Stops accepting calls and cancels what is still running after `grace`
  // (watches and ingest streams end with a status). Live captures stay live
  // on disk: the next server on this root serves them live, resumable.
  void Shutdown(std::chrono::milliseconds grace);

 private:
  CaptureServer() = default;
  std::unique_ptr<CaptureHub> hub_;
  std::unique_ptr<CaptureServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<HttpGateway> http_;
  int port_ = 0;
  bool shut_down_ = false;
};

}  // namespace argsdump

#endif  // ARGSDUMP_SERVER_CAPTURE_SERVICE_H_
