#include "viewer/remote_source.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "format/dtype.h"
#include "client/capture_client.h"
#include "format/kernel_table.h"
#include "format/names.h"
#include "format/record.h"

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
  e.device_thread = r.device_thread();
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

class RemoteSource : public ArgSource {
 public:
  RemoteSource(RemoteCapture remote, Selection selection, std::unique_ptr<CaptureClient> client)
      : remote_(std::move(remote)), selection_(std::move(selection)), client_(std::move(client)) {}

  std::string name() const override {
    return absl::StrCat("capture '", remote_.capture, "' on ", remote_.target);
  }

  absl::Status Start() {
    absl::StatusOr<v1::CaptureSummary> got = client_->GetCapture(remote_.capture);
    if (absl::IsNotFound(got.status())) {
      return absl::NotFoundError(absl::StrCat(name(), ": no such capture", SomeCaptures()));
    }
    if (!got.ok()) return Annotate(got.status(), absl::StrCat(name(), ": GetCapture"));
    summary_ = *std::move(got);
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
    got = client_->GetCapture(remote_.capture);
    if (!got.ok()) return Annotate(got.status(), absl::StrCat(name(), ": GetCapture"));
    summary_ = *std::move(got);
    return absl::OkStatus();
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
      if (!pager_) pager_.emplace(client_.get(), QueryRequest(/*filtered=*/true));
      if (absl::Status s = FetchPage(&*pager_); !s.ok()) return s;
      done_ = pager_->done();
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
    uint64_t got = 0;
    absl::Status past_end;
    const absl::Status s = client_->ReadPayload(request, [&](const v1::PayloadChunk& chunk) {
      if (chunk.offset() > e.bin_size || chunk.data().size() > e.bin_size - chunk.offset()) {
        past_end = absl::DataLossError(absl::StrCat(name(), ": ReadPayload of record ",
                                                    e.record_id, " sent bytes past its ",
                                                    e.bin_size));
        return past_end;
      }
      std::copy(chunk.data().begin(), chunk.data().end(), bytes->begin() + chunk.offset());
      got += chunk.data().size();
      return absl::OkStatus();
    });
    if (!past_end.ok()) return past_end;
    if (!s.ok()) {
      return Annotate(s, absl::StrCat(name(), ": ReadPayload of entry ", e.index, " (record ",
                                      e.record_id, ")"));
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

  std::optional<v1::CaptureClock> Clock() const override {
    if (!summary_.has_clock()) return std::nullopt;
    return summary_.clock();
  }

  absl::StatusOr<SomeValues> Suggestions() override {
    if (live_ || !Pushed()) return some_;
    // Nothing matched the filter the server applied: one unfiltered page.
    page_.clear();
    QueryArgsPager unfiltered(client_.get(), QueryRequest(/*filtered=*/false));
    if (absl::Status s = FetchPage(&unfiltered); !s.ok()) return s;
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
  // Whether the selection narrows what the server sends.
  bool Pushed() const { return selection_.args.any(); }

  v1::QueryArgsRequest QueryRequest(bool filtered) const {
    v1::QueryArgsRequest r;
    r.set_capture(remote_.capture);
    r.set_page_size(kMaxPageSize);
    if (!filtered) return r;
    *r.mutable_filter() = selection_.args.ToProto();
    return r;
  }

  // The pager's next page onto page_.
  absl::Status FetchPage(QueryArgsPager* pager) {
    std::vector<v1::CapturedArg> args;
    absl::StatusOr<bool> got = pager->Next(&args);
    if (!got.ok()) return Annotate(got.status(), absl::StrCat(name(), ": QueryArgs"));
    for (v1::CapturedArg& a : args) page_.push_back(std::move(a));
    return absl::OkStatus();
  }

  // Every record so far (metadata), put in manifest order.
  absl::Status LoadLive() {
    live_ = true;
    std::map<uint64_t, v1::ArgRecord> records;  // by id, as served (stats included)
    QueryArgsPager all(client_.get(), QueryRequest(/*filtered=*/false));
    do {
      if (absl::Status s = FetchPage(&all); !s.ok()) return s;
      for (const v1::CapturedArg& a : page_) {
        records[a.record_id()] = a.record();
        absl::StatusOr<ManifestEntry> entry = EntryFromRecord(a.record(), 0, a.record_id());
        if (!entry.ok()) return entry.status();
        some_.Add(*entry);
      }
      page_.clear();
    } while (!all.done());
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
    absl::StatusOr<v1::ListCapturesResponse> response = client_->ListCaptures(request);
    if (!response.ok()) return "";
    std::vector<std::string> names;
    for (const auto& c : response->captures()) names.push_back(c.capture());
    if (names.empty()) return " (the service holds none)";
    return absl::StrCat(" (captures there: ", absl::StrJoin(names, ", "),
                        response->next_page_token().empty() ? "" : ", ...", ")");
  }

  const RemoteCapture remote_;
  Selection selection_;  // its kernel names resolved by Start
  const std::unique_ptr<CaptureClient> client_;
  v1::CaptureSummary summary_;
  SomeValues some_;
  // Finished: pages of the server's answer to the selection.
  std::optional<QueryArgsPager> pager_;
  std::deque<v1::CapturedArg> page_;
  bool done_ = false;
  // Live: every record so far and its manifest order.
  bool live_ = false;
  std::vector<v1::ArgRecord> live_records_;  // by record id
  std::vector<uint32_t> live_order_;
  size_t live_at_ = 0;
};

absl::StatusOr<std::unique_ptr<CaptureClient>> ClientOf(const RemoteCapture& remote) {
  CaptureClientOptions options;
  options.target = remote.target;
  options.credentials = remote.credentials;
  options.auth_token = remote.auth_token;
  return CaptureClient::Create(std::move(options));
}

}  // namespace

absl::StatusOr<std::vector<v1::CaptureSummary>> ListRemoteCaptures(
    const RemoteCapture& remote, const std::map<std::string, std::string>& labels) {
  absl::StatusOr<std::unique_ptr<CaptureClient>> client = ClientOf(remote);
  if (!client.ok()) return client.status();
  v1::ListCapturesRequest request;
  for (const auto& [k, v] : labels) (*request.mutable_labels())[k] = v;
  request.set_page_size(kMaxPageSize);
  ListCapturesPager pager(client->get(), std::move(request));
  std::vector<v1::CaptureSummary> out;
  std::vector<v1::CaptureSummary> page;
  while (!pager.done()) {
    absl::StatusOr<bool> got = pager.Next(&page);
    if (!got.ok()) return Annotate(got.status(), absl::StrCat(remote.target, ": ListCaptures"));
    for (v1::CaptureSummary& c : page) out.push_back(std::move(c));
  }
  return out;
}

absl::StatusOr<std::unique_ptr<ArgSource>> OpenRemoteCapture(const RemoteCapture& remote,
                                                             const Selection& selection) {
  absl::StatusOr<std::unique_ptr<CaptureClient>> client = ClientOf(remote);
  if (!client.ok()) return client.status();
  auto source = std::make_unique<RemoteSource>(remote, selection, *std::move(client));
  if (absl::Status s = source->Start(); !s.ok()) return s;
  return std::unique_ptr<ArgSource>(std::move(source));
}

}  // namespace argsdump
