#include "viewer/remote_source.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "format/dtype.h"
#include "format/kernel_table.h"
#include "proto/argsdump/v1/capture_service.grpc.pb.h"
#include "format/names.h"
#include "format/record.h"
#include "proto/grpc_status.h"

namespace argsdump {

absl::StatusOr<ManifestEntry> EntryFromRecord(const v1::ArgRecord& r, uint64_t index,
                                              uint64_t record_id) {
  const std::optional<DataType> dtype = FromProtoDType(r.dtype());
  const bool known = r.role() != v1::ROLE_UNSPECIFIED && v1::Role_IsValid(r.role()) &&
                     r.stage() != v1::STAGE_UNSPECIFIED && v1::Stage_IsValid(r.stage()) &&
                     r.kind() != v1::KIND_UNSPECIFIED && v1::Kind_IsValid(r.kind()) && dtype;
  if (!known) {
    return absl::DataLossError(absl::StrCat(
        "record ", record_id, ": role ", r.role(), ", stage ", r.stage(), ", kind ", r.kind(),
        ", dtype ", r.dtype(), ": not all are values of the schema this build knows"));
  }
  ManifestEntry e;
  e.index = index;
  e.record_id = record_id;
  e.task_id = r.task_id();
  e.step = r.step();
  if (r.func_ids().empty()) {
    e.func_ids.push_back(-1);
  } else {
    e.func_ids.assign(r.func_ids().begin(), r.func_ids().end());
  }
  e.role = r.role();
  e.stage = r.stage();
  e.kind = r.kind();
  e.dtype = *dtype;
  e.shape.assign(r.shape().begin(), r.shape().end());
  e.strides.assign(r.strides().begin(), r.strides().end());
#define ARGSDUMP_COPY(id, style, member) e.member = r.member();
  ARGSDUMP_SIMPLE_MANIFEST_FIELDS(ARGSDUMP_COPY)
#undef ARGSDUMP_COPY
  if (r.kind() == v1::KIND_SCALAR) {
    e.has_value = true;
    e.value = FormatScalarJson(r.dtype(), r.scalar_bits());
  }
  if (r.has_stats()) {
    const v1::TensorStats& s = r.stats();
    ManifestEntry::Stats& out = e.stats.emplace();
#define ARGSDUMP_COPY_STATS(member, type) out.member = s.member();
    ARGSDUMP_MANIFEST_STATS_FIELDS(ARGSDUMP_COPY_STATS)
#undef ARGSDUMP_COPY_STATS
  }
  return e;
}

namespace {

constexpr uint32_t kPageSize = 1000;  // the service's maximum
constexpr auto kCallTimeout = std::chrono::seconds(60);

class RemoteSource : public ArgSource {
 public:
  RemoteSource(RemoteCapture remote, Selection selection)
      : remote_(std::move(remote)), selection_(std::move(selection)) {
    channel_ = grpc::CreateChannel(remote_.target, remote_.credentials
                                                       ? remote_.credentials
                                                       : grpc::InsecureChannelCredentials());
    stub_ = v1::CaptureService::NewStub(channel_);
  }

  std::string name() const override {
    return absl::StrCat("capture '", remote_.capture, "' on ", remote_.target);
  }

  absl::Status Start() {
    v1::GetCaptureRequest request;
    request.set_capture(remote_.capture);
    auto context = Context();
    grpc::Status s = stub_->GetCapture(context.get(), request, &summary_);
    if (s.error_code() == grpc::StatusCode::NOT_FOUND) {
      return absl::NotFoundError(absl::StrCat(name(), ": no such capture", SomeCaptures()));
    }
    if (!s.ok()) return FromGrpcStatus(s, absl::StrCat(name(), ": GetCapture"));
    // Names are resolved here too (the service resolves those it is sent):
    // an unknown one is the same error as for a local capture, and live
    // records are matched here.
    if (absl::Status r = ResolveKernelFilter(summary_.kernels(), &selection_.args); !r.ok()) {
      return r;
    }
    if (summary_.state() == v1::CAPTURE_STATE_FINISHED) return absl::OkStatus();
    if (absl::Status loaded = LoadLive(); !loaded.ok()) return loaded;
    // Again: the records just fetched may be newer than the summary, and
    // payload sizes are checked against its args.bin bytes.
    auto again = Context();
    s = stub_->GetCapture(again.get(), request, &summary_);
    return s.ok() ? absl::OkStatus() : FromGrpcStatus(s, absl::StrCat(name(), ": GetCapture"));
  }

  absl::StatusOr<bool> Next(ManifestEntry* e) override {
    if (live_) {
      while (live_at_ < live_order_.size()) {
        const uint32_t i = live_order_[live_at_];
        absl::StatusOr<ManifestEntry> entry = EntryFromRecord(live_records_[i], live_at_, i);
        if (!entry.ok()) return entry.status();
        *e = *std::move(entry);
        ++live_at_;
        if (selection_.Matches(*e)) return true;
      }
      return false;
    }
    for (;;) {
      while (!page_.empty()) {
        const v1::CapturedArg a = std::move(page_.front());
        page_.pop_front();
        if (!a.has_manifest_index()) {
          return absl::FailedPreconditionError(
              absl::StrCat(name(), ": the service sent no manifest_index (an older server?)"));
        }
        absl::StatusOr<ManifestEntry> entry =
            EntryFromRecord(a.record(), a.manifest_index(), a.record_id());
        if (!entry.ok()) return entry.status();
        *e = *std::move(entry);
        some_.Add(*e);
        if (selection_.Matches(*e)) return true;
      }
      if (done_) return false;
      if (absl::Status s = FetchPage(QueryRequest(/*filtered=*/true)); !s.ok()) return s;
    }
  }

  absl::Status ReadPayload(const ManifestEntry& e, std::string* bytes) override {
    bytes->clear();
    if (e.bin_size == 0) return absl::OkStatus();
    // A record may claim any size: no more than the service's args.bin.
    if (e.bin_offset > summary_.bin_bytes() || e.bin_size > summary_.bin_bytes() - e.bin_offset) {
      return absl::DataLossError(absl::StrCat(name(), ": record ", e.record_id, " claims bytes ",
                                              e.bin_offset, " + ", e.bin_size, " of an args.bin of ",
                                              summary_.bin_bytes()));
    }
    bytes->assign(e.bin_size, '\0');
    v1::ReadPayloadRequest request;
    request.set_capture(remote_.capture);
    request.set_record_id(e.record_id);
    auto context = Context();
    auto reader = stub_->ReadPayload(context.get(), request);
    v1::PayloadChunk chunk;
    uint64_t got = 0;
    while (reader->Read(&chunk)) {
      if (chunk.offset() > e.bin_size || chunk.data().size() > e.bin_size - chunk.offset()) {
        context->TryCancel();
        reader->Finish();
        return absl::DataLossError(absl::StrCat(name(), ": ReadPayload of record ", e.record_id,
                                                " sent bytes past its ", e.bin_size));
      }
      std::copy(chunk.data().begin(), chunk.data().end(), bytes->begin() + chunk.offset());
      got += chunk.data().size();
    }
    grpc::Status s = reader->Finish();
    if (!s.ok()) {
      return FromGrpcStatus(s, absl::StrCat(name(), ": ReadPayload of entry ", e.index,
                                            " (record ", e.record_id, ")"));
    }
    if (got != e.bin_size) {
      return absl::DataLossError(absl::StrCat(name(), ": ReadPayload of record ", e.record_id,
                                              " sent ", got, " of ", e.bin_size, " bytes"));
    }
    return absl::OkStatus();
  }

  std::optional<v1::DeviceCrash> DeviceCrashInfo() const override {
    if (!summary_.has_device_crash()) return std::nullopt;
    return summary_.device_crash();
  }

  std::map<std::string, std::string> Labels() const override {
    return {summary_.labels().begin(), summary_.labels().end()};
  }

  KernelTable Kernels() const override { return summary_.kernels(); }

  absl::StatusOr<SomeValues> Suggestions() override {
    if (live_ || !Pushed()) return some_;
    // Nothing matched the filter the server applied: one unfiltered page.
    page_.clear();
    done_ = false;
    token_.clear();
    if (absl::Status s = FetchPage(QueryRequest(/*filtered=*/false)); !s.ok()) return s;
    for (const v1::CapturedArg& a : page_) {
      absl::StatusOr<ManifestEntry> entry = EntryFromRecord(a.record(), 0, 0);
      if (!entry.ok()) return entry.status();
      some_.Add(*entry);
    }
    page_.clear();
    done_ = true;
    return some_;
  }

 private:
  std::unique_ptr<grpc::ClientContext> Context() const {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(std::chrono::system_clock::now() + kCallTimeout);
    if (!remote_.auth_token.empty()) {
      context->AddMetadata("authorization", "Bearer " + remote_.auth_token);
    }
    return context;
  }

  // Whether the selection narrows what the server sends.
  bool Pushed() const { return selection_.args.any(); }

  v1::QueryArgsRequest QueryRequest(bool filtered) const {
    v1::QueryArgsRequest r;
    r.set_capture(remote_.capture);
    r.set_page_size(kPageSize);
    r.set_page_token(token_);
    if (!filtered) return r;
    *r.mutable_filter() = selection_.args.ToProto();
    return r;
  }

  absl::Status FetchPage(const v1::QueryArgsRequest& request) {
    v1::QueryArgsResponse response;
    auto context = Context();
    grpc::Status s = stub_->QueryArgs(context.get(), request, &response);
    if (!s.ok()) return FromGrpcStatus(s, absl::StrCat(name(), ": QueryArgs"));
    for (v1::CapturedArg& a : *response.mutable_args()) page_.push_back(std::move(a));
    token_ = response.next_page_token();
    done_ = token_.empty();
    return absl::OkStatus();
  }

  // Every record so far (metadata), put in manifest order.
  absl::Status LoadLive() {
    live_ = true;
    std::map<uint64_t, v1::ArgRecord> records;  // by id, as served (stats included)
    do {
      if (absl::Status s = FetchPage(QueryRequest(/*filtered=*/false)); !s.ok()) return s;
      for (const v1::CapturedArg& a : page_) {
        records[a.record_id()] = a.record();
        absl::StatusOr<ManifestEntry> entry = EntryFromRecord(a.record(), 0, a.record_id());
        if (!entry.ok()) return entry.status();
        some_.Add(*entry);
      }
      page_.clear();
    } while (!done_);
    RecordList rows;  // only to put them in manifest order
    for (auto& [id, record] : records) {
      if (id != rows.size()) {
        return absl::DataLossError(absl::StrCat(name(), ": record ids are not 0..",
                                                records.size(), " (", id, " at ", rows.size(),
                                                ")"));
      }
      absl::StatusOr<ManifestRow> row = RowFromRecord(record);
      if (!row.ok()) {
        return absl::DataLossError(
            absl::StrCat(name(), ": record ", id, ": ", row.status().message()));
      }
      rows.push_back(*row);
      live_records_.push_back(std::move(record));
    }
    live_order_ = ManifestOrder(rows);
    return absl::OkStatus();
  }

  std::string SomeCaptures() {
    v1::ListCapturesRequest request;
    request.set_page_size(10);
    v1::ListCapturesResponse response;
    auto context = Context();
    if (!stub_->ListCaptures(context.get(), request, &response).ok()) return "";
    std::vector<std::string> names;
    for (const auto& c : response.captures()) names.push_back(c.capture());
    if (names.empty()) return " (the service holds none)";
    return absl::StrCat(" (captures there: ", absl::StrJoin(names, ", "),
                        response.next_page_token().empty() ? "" : ", ...", ")");
  }

  const RemoteCapture remote_;
  Selection selection_;  // its kernel names resolved by Start
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::CaptureService::Stub> stub_;
  v1::CaptureSummary summary_;
  SomeValues some_;
  // Finished: pages of the server's answer.
  std::deque<v1::CapturedArg> page_;
  std::string token_;
  bool done_ = false;
  // Live: every record so far and its manifest order.
  bool live_ = false;
  std::vector<v1::ArgRecord> live_records_;  // by record id
  std::vector<uint32_t> live_order_;
  size_t live_at_ = 0;
};

}  // namespace

absl::StatusOr<std::vector<v1::CaptureSummary>> ListRemoteCaptures(
    const RemoteCapture& remote, const std::map<std::string, std::string>& labels) {
  auto channel = grpc::CreateChannel(
      remote.target, remote.credentials ? remote.credentials : grpc::InsecureChannelCredentials());
  auto stub = v1::CaptureService::NewStub(channel);
  std::vector<v1::CaptureSummary> out;
  v1::ListCapturesRequest request;
  for (const auto& [k, v] : labels) (*request.mutable_labels())[k] = v;
  request.set_page_size(kPageSize);
  for (;;) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
    if (!remote.auth_token.empty()) {
      context.AddMetadata("authorization", "Bearer " + remote.auth_token);
    }
    v1::ListCapturesResponse response;
    grpc::Status s = stub->ListCaptures(&context, request, &response);
    if (!s.ok()) return FromGrpcStatus(s, absl::StrCat(remote.target, ": ListCaptures"));
    for (v1::CaptureSummary& c : *response.mutable_captures()) out.push_back(std::move(c));
    if (response.next_page_token().empty()) return out;
    request.set_page_token(response.next_page_token());
  }
}

absl::StatusOr<std::unique_ptr<ArgSource>> OpenRemoteCapture(const RemoteCapture& remote,
                                                             const Selection& selection) {
  auto source = std::make_unique<RemoteSource>(remote, selection);
  if (absl::Status s = source->Start(); !s.ok()) return s;
  return std::unique_ptr<ArgSource>(std::move(source));
}

}  // namespace argsdump
