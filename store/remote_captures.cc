#include "store/remote_captures.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/files.h"
#include "store/capture_store.h"
#include "store/crc32c.h"

namespace argsdump {
namespace {

constexpr char kSegmentMagic[4] = {'A', 'D', 'S', 'G'};
constexpr uint32_t kSegmentVersion = 1;
constexpr char kSegmentsFolder[] = "/segments/";
constexpr char kFinalFolder[] = "/args_dump/";
// A segment is what one group commit gathered: bounded by the group's
// bytes and one append batch; anything larger read back is refused.
constexpr size_t kMaxSegmentBytes = 1ull << 30;

void PutU32(char* at, uint32_t v) {
  for (int i = 0; i < 4; ++i) at[i] = static_cast<char>(v >> (8 * i));
}
void PutU64(char* at, uint64_t v) {
  for (int i = 0; i < 8; ++i) at[i] = static_cast<char>(v >> (8 * i));
}
uint32_t GetU32(const char* at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(at[i]);
  return v;
}
uint64_t GetU64(const char* at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(at[i]);
  return v;
}

uint32_t SegmentCrc(const char* header, absl::string_view journal, absl::string_view bin) {
  uint32_t crc = Crc32c(0, header, 56);
  crc = Crc32c(crc, journal.data(), journal.size());
  return Crc32c(crc, bin.data(), bin.size());
}

// Bytes [offset, offset + size) of the file at `path`, into `out`.
absl::Status ReadRangeInto(const std::string& path, uint64_t offset, uint64_t size, char* out) {
  if (size == 0) return absl::OkStatus();
  auto fd = OpenRegularFile(path);
  if (!fd.ok()) return fd.status();
  uint64_t got = 0;
  while (got < size) {
    const ssize_t r = ::pread(*fd, out + got, size - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<uint64_t>(r);
  }
  ::close(*fd);
  if (got < size) {
    return absl::DataLossError(absl::StrCat(path, " ends before byte ", offset + size));
  }
  return absl::OkStatus();
}

absl::Status ReadRange(const std::string& path, uint64_t offset, uint64_t size,
                       std::string* out) {
  out->resize(size);
  return ReadRangeInto(path, offset, size, out->data());
}

absl::Status WriteAllTo(int fd, absl::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    const ssize_t w = ::write(fd, bytes.data(), bytes.size());
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      return absl::UnavailableError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
    }
    bytes.remove_prefix(static_cast<size_t>(w));
  }
  return absl::OkStatus();
}

uint64_t FileSize(const std::string& path, bool* exists) {
  struct stat st;
  *exists = ::stat(path.c_str(), &st) == 0;
  return *exists ? static_cast<uint64_t>(st.st_size) : 0;
}

// Whether `key` (below the prefix) is one this class writes: a segment or
// one of a finished capture's three files. Anything else under the prefix
// is not ours to collect.
bool IsCaptureObject(absl::string_view rest) {
  const size_t slash = rest.find('/');
  if (slash == absl::string_view::npos || slash == 0) return false;
  absl::string_view tail = rest.substr(slash);
  if (absl::StartsWith(tail, kSegmentsFolder)) {
    return tail.size() > sizeof(kSegmentsFolder) - 1 &&
           tail.find('/', sizeof(kSegmentsFolder) - 1) == absl::string_view::npos;
  }
  // /<epoch>/args_dump/<file>
  tail.remove_prefix(1);
  const size_t epoch_end = tail.find('/');
  if (epoch_end == absl::string_view::npos || epoch_end == 0 || epoch_end > 19) return false;
  for (char c : tail.substr(0, epoch_end)) {
    if (c < '0' || c > '9') return false;
  }
  tail.remove_prefix(epoch_end);
  return tail == absl::StrCat(kFinalFolder, kManifestName) ||
         tail == absl::StrCat(kFinalFolder, kBinName) ||
         tail == absl::StrCat(kFinalFolder, kIndexName);
}

}  // namespace

absl::StatusOr<ObjectStoreUri> ParseObjectStoreUri(absl::string_view uri) {
  constexpr absl::string_view kScheme = "s3://";
  if (!absl::StartsWith(uri, kScheme)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--object_store ", uri, ": expected s3://BUCKET or s3://BUCKET/PREFIX"));
  }
  absl::string_view rest = uri.substr(kScheme.size());
  const size_t slash = rest.find('/');
  ObjectStoreUri out;
  out.bucket = std::string(rest.substr(0, slash));
  if (slash != absl::string_view::npos) out.prefix = std::string(rest.substr(slash + 1));
  // S3's bucket names: 3..63 of [a-z0-9.-], starting and ending with a
  // letter or digit.
  const std::string& b = out.bucket;
  bool ok = b.size() >= 3 && b.size() <= 63;
  for (size_t i = 0; ok && i < b.size(); ++i) {
    const char c = b[i];
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    ok = alnum || ((c == '-' || c == '.') && i > 0 && i + 1 < b.size());
  }
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--object_store ", uri, ": bucket \"", b,
        "\" is not a bucket name (3 to 63 of a-z, 0-9, '.', '-', starting and ending "
        "with a letter or digit)"));
  }
  while (!out.prefix.empty() && out.prefix.back() == '/') out.prefix.pop_back();
  if (out.prefix.size() > 512) {
    return absl::InvalidArgumentError(absl::StrCat("--object_store: the prefix is over 512 bytes"));
  }
  for (unsigned char c : out.prefix) {
    if (c < 0x20 || c == 0x7f) {
      return absl::InvalidArgumentError(
          absl::StrCat("--object_store ", uri, ": the prefix holds a control character"));
    }
  }
  if (absl::StrContains(absl::StrCat("/", out.prefix, "/"), "//") ||
      absl::StrContains(absl::StrCat("/", out.prefix, "/"), "/../") ||
      absl::StrContains(absl::StrCat("/", out.prefix, "/"), "/./")) {
    if (!out.prefix.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--object_store ", uri, ": the prefix has an empty, '.' or '..' part"));
    }
  }
  if (!out.prefix.empty()) out.prefix += "/";
  return out;
}

std::string EncodeSegmentHeader(const SegmentHeader& h, absl::string_view journal,
                                absl::string_view bin) {
  std::string out(kSegmentHeaderBytes, '\0');
  char* at = out.data();
  std::memcpy(at, kSegmentMagic, 4);
  PutU32(at + 4, kSegmentVersion);
  PutU64(at + 8, h.first_record);
  PutU64(at + 16, h.records);
  PutU64(at + 24, h.journal_offset);
  PutU64(at + 32, journal.size());
  PutU64(at + 40, h.bin_offset);
  PutU64(at + 48, bin.size());
  PutU32(at + 56, SegmentCrc(at, journal, bin));
  return out;
}

absl::StatusOr<SegmentHeader> ParseSegment(absl::string_view object, absl::string_view key,
                                           absl::string_view* journal, absl::string_view* bin) {
  auto damaged = [&](uint64_t byte, absl::string_view why) {
    return absl::DataLossError(
        absl::StrCat("segment ", key, ": ", why, " at byte ", byte, " (", object.size(),
                     " bytes)"));
  };
  if (object.size() < kSegmentHeaderBytes) {
    return damaged(object.size(), "shorter than a segment header");
  }
  const char* at = object.data();
  if (std::memcmp(at, kSegmentMagic, 4) != 0) return damaged(0, "not a segment (bad magic)");
  if (GetU32(at + 4) != kSegmentVersion) {
    return damaged(4, absl::StrCat("unknown version ", GetU32(at + 4)));
  }
  SegmentHeader h;
  h.first_record = GetU64(at + 8);
  h.records = GetU64(at + 16);
  h.journal_offset = GetU64(at + 24);
  h.journal_bytes = GetU64(at + 32);
  h.bin_offset = GetU64(at + 40);
  h.bin_bytes = GetU64(at + 48);
  const uint64_t body = object.size() - kSegmentHeaderBytes;
  if (h.journal_bytes > body) return damaged(32, "journal length past the object");
  if (h.bin_bytes != body - h.journal_bytes) return damaged(48, "payload length disagrees with the object's size");
  if (h.first_record > UINT64_MAX - h.records) return damaged(16, "record count overflows");
  if (h.journal_offset > UINT64_MAX - h.journal_bytes) return damaged(24, "journal offset overflows");
  if (h.bin_offset > UINT64_MAX - h.bin_bytes) return damaged(40, "payload offset overflows");
  if (GetU32(at + 60) != 0) return damaged(60, "reserved bytes are not zero");
  *journal = object.substr(kSegmentHeaderBytes, h.journal_bytes);
  *bin = object.substr(kSegmentHeaderBytes + h.journal_bytes);
  if (SegmentCrc(at, *journal, *bin) != GetU32(at + 56)) {
    return damaged(56, "checksum mismatch");
  }
  return h;
}

// ---- RemoteCaptures ----------------------------------------------------------

RemoteCaptures::RemoteCaptures(std::unique_ptr<s3::S3Client> client,
                               std::unique_ptr<Catalog> catalog, Options options)
    : client_(std::move(client)), catalog_(std::move(catalog)), options_(std::move(options)) {
  ObjectBlockCache::Options blocks;
  blocks.block_bytes = IndexFile::kRangedBlockBytes;
  blocks.capacity_bytes = std::max<uint64_t>(options_.cache_bytes / 2, blocks.block_bytes);
  blocks_ = std::make_unique<ObjectBlockCache>(client_.get(), options_.location.bucket, blocks);
}

RemoteCaptures::~RemoteCaptures() = default;

absl::StatusOr<std::unique_ptr<RemoteCaptures>> RemoteCaptures::Open(
    std::unique_ptr<s3::S3Client> client, std::unique_ptr<Catalog> catalog, Options options) {
  if (client == nullptr || catalog == nullptr) {
    return absl::InvalidArgumentError("object store: a client and a catalog are needed");
  }
  if (options.part_bytes < (5ull << 20)) options.part_bytes = 5ull << 20;  // S3's least part
  // One listing: wrong credentials, a missing bucket or an unreachable
  // store are said now, at startup, not at the first capture.
  auto listed = client->ListObjectsV2(options.location.bucket, options.location.prefix, "", 1);
  if (!listed.ok()) {
    return absl::Status(listed.status().code(),
                        absl::StrCat("object store s3://", options.location.bucket, "/",
                                     options.location.prefix, ": ", listed.status().message()));
  }
  return std::unique_ptr<RemoteCaptures>(
      new RemoteCaptures(std::move(client), std::move(catalog), std::move(options)));
}

std::string RemoteCaptures::CapturePrefix(const std::string& name) const {
  return absl::StrCat(options_.location.prefix, name, "/");
}

std::string RemoteCaptures::FinalKey(const std::string& name, int64_t epoch,
                                     const char* file) const {
  return absl::StrCat(options_.location.prefix, name, "/", epoch, kFinalFolder, file);
}

std::string RemoteCaptures::SegmentKey(const std::string& name, uint64_t seq,
                                       int64_t epoch) const {
  return absl::StrFormat("%s%s%s%020u.e%d", options_.location.prefix, name, kSegmentsFolder, seq,
                         epoch);
}

absl::Status RemoteCaptures::Commit(const std::string& dir, const v1::CaptureInfo& info,
                                    const v1::CaptureCounters& counters, uint64_t records,
                                    uint64_t journal_end, uint64_t bin_end, LiveState* state) {
  if (records < state->records || journal_end < state->journal_bytes ||
      bin_end < state->bin_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("capture ", info.name(),
                                                   ": a commit cannot go back"));
  }
  if (records == state->records) return absl::OkStatus();  // nothing new
  // The object: its header (written last, over the body's checksum), the
  // journal's new bytes and args.bin's, read straight into place.
  const uint64_t journal_bytes = journal_end - state->journal_bytes;
  const uint64_t bin_bytes = bin_end - state->bin_bytes;
  if (journal_bytes + bin_bytes > kMaxSegmentBytes - kSegmentHeaderBytes) {
    // Restore reads a segment whole: one it could not read is never made.
    return absl::ResourceExhaustedError(absl::StrCat(
        "capture ", info.name(), ": a segment of ", journal_bytes + bin_bytes,
        " bytes is over the ", kMaxSegmentBytes, " one may hold (send smaller batches)"));
  }
  std::string object(kSegmentHeaderBytes + journal_bytes + bin_bytes, '\0');
  char* body = object.data() + kSegmentHeaderBytes;
  if (absl::Status s = ReadRangeInto(dir + "/" + kJournalName, state->journal_bytes,
                                     journal_bytes, body);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ReadRangeInto(dir + "/" + kBinName, state->bin_bytes, bin_bytes,
                                     body + journal_bytes);
      !s.ok()) {
    return s;
  }
  // On an error the row, when this commit made it, stays: the capture is
  // live with what was committed before, which a restore takes as it is.
  if (!state->cataloged) {
    auto created = catalog_->CreateCapture(info, CapturePrefix(info.name()));
    if (!created.ok()) return created.status();
    state->epoch = created->epoch;
    state->cataloged = true;
  }
  SegmentHeader h;
  h.first_record = state->records;
  h.records = records - state->records;
  h.journal_offset = state->journal_bytes;
  h.bin_offset = state->bin_bytes;
  const absl::string_view journal(body, journal_bytes), bin(body + journal_bytes, bin_bytes);
  const std::string header = EncodeSegmentHeader(h, journal, bin);
  std::memcpy(object.data(), header.data(), kSegmentHeaderBytes);
  const std::string key = SegmentKey(info.name(), state->next_seq, state->epoch);
  s3::PutOptions put;
  put.body_check = s3::PutOptions::BodyCheck::kContentMd5;
  if (auto etag = client_->PutObject(options_.location.bucket, key, object, put); !etag.ok()) {
    return etag.status();
  }
  CatalogSegment segment;
  segment.seq = state->next_seq;
  segment.object_key = key;
  segment.first_record = state->records;
  segment.record_count = records - state->records;
  segment.bytes = object.size();
  if (absl::Status s = catalog_->CommitSegment(info.name(), state->epoch, segment, records,
                                               journal_end, counters);
      !s.ok()) {
    return s;
  }
  if (bin_bytes > 0) {
    state->bin_pieces.push_back({key, kSegmentHeaderBytes + journal_bytes, bin_bytes});
  }
  state->next_seq += 1;
  state->records = records;
  state->journal_bytes = journal_end;
  state->bin_bytes = bin_end;
  return absl::OkStatus();
}

absl::StatusOr<RemoteCaptures::LiveState> RemoteCaptures::Restore(const std::string& name,
                                                                  const std::string& dir) {
  // Fence the writer that had it first, so that nothing commits behind the
  // segments listed next.
  auto epoch = catalog_->AdvanceEpoch(name);
  if (!epoch.ok()) return epoch.status();
  auto row = catalog_->Get(name);
  if (!row.ok()) return row.status();
  if (row->state != v1::CAPTURE_STATE_LIVE) {
    return absl::FailedPreconditionError(absl::StrCat("capture ", name, " is finished"));
  }
  if (row->epoch != *epoch) {
    return absl::AbortedError(absl::StrCat("capture ", name, " was taken over again (epoch ",
                                           row->epoch, ", this server's ", *epoch, ")"));
  }
  auto segments = catalog_->Segments(name);
  if (!segments.ok()) return segments.status();
  if (absl::Status s = CreateDirectories(dir); !s.ok()) return s;
  for (const char* file : {kManifestName, kIndexName, kJournalName, kBinName}) {
    ::unlink((dir + "/" + file).c_str());
  }
  LiveState state;
  state.epoch = *epoch;
  state.cataloged = true;
  state.info = row->info;
  if (segments->empty()) {
    if (row->committed_records != 0) {
      return absl::DataLossError(absl::StrCat("capture ", name, ": the catalog commits ",
                                              row->committed_records,
                                              " records and lists no segment"));
    }
    return state;
  }
  const std::string journal_path = dir + "/" + kJournalName;
  const std::string bin_path = dir + "/" + kBinName;
  const int jfd = ::open(journal_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (jfd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot create ", journal_path, ": ", std::strerror(errno)));
  }
  int bfd = -1;
  absl::Status s;
  for (const CatalogSegment& seg : *segments) {
    if (seg.bytes > kMaxSegmentBytes) {
      s = absl::DataLossError(absl::StrCat("capture ", name, ": segment ", seg.object_key, " is ",
                                           seg.bytes, " bytes, over the ", kMaxSegmentBytes,
                                           " a segment may hold"));
      break;
    }
    auto object = client_->GetObjectToString(options_.location.bucket, seg.object_key, {},
                                             static_cast<size_t>(seg.bytes));
    if (!object.ok()) {
      s = absl::IsNotFound(object.status()) || absl::IsResourceExhausted(object.status())
              ? absl::DataLossError(absl::StrCat("capture ", name, ": committed segment ",
                                                 seg.object_key, ": ", object.status().message()))
              : object.status();
      break;
    }
    if (object->size() != seg.bytes) {
      s = absl::DataLossError(absl::StrCat("segment ", seg.object_key, ": ", object->size(),
                                           " bytes, the catalog committed ", seg.bytes,
                                           " (byte ", std::min<uint64_t>(object->size(), seg.bytes),
                                           ")"));
      break;
    }
    absl::string_view journal, bin;
    auto h = ParseSegment(*object, seg.object_key, &journal, &bin);
    if (!h.ok()) {
      s = h.status();
      break;
    }
    if (h->first_record != state.records || h->records != seg.record_count ||
        h->first_record != seg.first_record || h->journal_offset != state.journal_bytes ||
        h->bin_offset != state.bin_bytes) {
      s = absl::DataLossError(absl::StrCat(
          "segment ", seg.object_key, ": holds records ", h->first_record, "+", h->records,
          ", journal bytes from ", h->journal_offset, ", payload bytes from ", h->bin_offset,
          "; the capture's committed segments end at record ", state.records, ", journal byte ",
          state.journal_bytes, ", payload byte ", state.bin_bytes, " (byte 8)"));
      break;
    }
    if (s = WriteAllTo(jfd, journal, journal_path); !s.ok()) break;
    if (!bin.empty()) {
      if (bfd < 0) {
        bfd = ::open(bin_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (bfd < 0) {
          s = absl::UnavailableError(
              absl::StrCat("cannot create ", bin_path, ": ", std::strerror(errno)));
          break;
        }
        // Payloads before this segment were none: the file starts here.
        if (state.bin_bytes != 0) {
          s = absl::DataLossError(absl::StrCat("segment ", seg.object_key, ": payload bytes from ",
                                               state.bin_bytes, " with none before"));
          break;
        }
      }
      if (s = WriteAllTo(bfd, bin, bin_path); !s.ok()) break;
    }
    if (h->bin_bytes > 0) {
      state.bin_pieces.push_back({seg.object_key, kSegmentHeaderBytes + h->journal_bytes,
                                  h->bin_bytes});
    }
    state.records += h->records;
    state.journal_bytes += h->journal_bytes;
    state.bin_bytes += h->bin_bytes;
    state.next_seq = seg.seq + 1;
  }
  ::close(jfd);
  if (bfd >= 0) ::close(bfd);
  if (s.ok() && (state.records != row->committed_records ||
                 state.journal_bytes != row->committed_bytes)) {
    s = absl::DataLossError(absl::StrCat(
        "capture ", name, ": its segments hold ", state.records, " records and ",
        state.journal_bytes, " journal bytes; the catalog committed ", row->committed_records,
        " and ", row->committed_bytes));
  }
  if (!s.ok()) {
    // What was written is not the capture: nothing of it is left (a new
    // capture of the name, once this one is deleted, starts on a clean folder).
    ::unlink(journal_path.c_str());
    ::unlink(bin_path.c_str());
    return s;
  }
  return state;
}

absl::Status RemoteCaptures::UploadFile(const std::string& path, const std::string& key,
                                        uint64_t* bytes) {
  bool exists = false;
  const uint64_t size = FileSize(path, &exists);
  if (!exists) return absl::NotFoundError(absl::StrCat(path, " is missing"));
  *bytes = size;
  s3::PutOptions put;
  put.body_check = s3::PutOptions::BodyCheck::kContentMd5;
  const std::string& bucket = options_.location.bucket;
  if (size <= options_.part_bytes) {
    std::string body;
    if (absl::Status s = ReadRange(path, 0, size, &body); !s.ok()) return s;
    return client_->PutObject(bucket, key, body, put).status();
  }
  auto upload = client_->CreateMultipartUpload(bucket, key);
  if (!upload.ok()) return upload.status();
  std::vector<s3::CompletedPart> parts;
  std::string body;
  absl::Status s;
  for (uint64_t at = 0; at < size && s.ok(); at += options_.part_bytes) {
    const uint64_t n = std::min(options_.part_bytes, size - at);
    s = ReadRange(path, at, n, &body);
    if (!s.ok()) break;
    const int number = static_cast<int>(parts.size()) + 1;
    auto etag = client_->UploadPart(bucket, key, *upload, number, body,
                                    s3::PutOptions::BodyCheck::kContentMd5);
    if (!etag.ok()) {
      s = etag.status();
      break;
    }
    parts.push_back({number, *etag});
  }
  if (s.ok()) s = client_->CompleteMultipartUpload(bucket, key, *upload, parts);
  // A failed upload's parts go now (garbage collection aborts what is left).
  if (!s.ok()) client_->AbortMultipartUpload(bucket, key, *upload).IgnoreError();
  return s;
}

absl::Status RemoteCaptures::UploadBin(const std::string& path, uint64_t size,
                                       const LiveState& state, const std::string& key) {
  constexpr uint64_t kMinPart = 5ull << 20;  // S3's least part but the last
  uint64_t in_pieces = 0;
  for (const LiveState::BinPiece& p : state.bin_pieces) in_pieces += p.bytes;
  uint64_t uploaded = 0;
  if (!options_.copy_parts || size <= options_.part_bytes || in_pieces != size) {
    absl::Status s = UploadFile(path, key, &uploaded);
    std::lock_guard<std::mutex> lock(seal_mu_);
    seal_counters_.uploaded_bytes += s.ok() ? uploaded : 0;
    return s;
  }
  const std::string& bucket = options_.location.bucket;
  auto upload = client_->CreateMultipartUpload(bucket, key);
  if (!upload.ok()) return upload.status();
  std::vector<s3::CompletedPart> parts;
  uint64_t copied = 0;
  std::string body;
  // Bytes [from, to) of args.bin not copied yet: uploaded from the scratch
  // file in parts of about part_bytes (never a short one but the last).
  auto flush = [&](uint64_t from, uint64_t to, bool last) -> absl::Status {
    while (from < to) {
      uint64_t n = to - from;
      if (n > options_.part_bytes + kMinPart || (!last && n > options_.part_bytes && n - options_.part_bytes >= kMinPart)) {
        n = options_.part_bytes;
      }
      if (absl::Status s = ReadRange(path, from, n, &body); !s.ok()) return s;
      const int number = static_cast<int>(parts.size()) + 1;
      auto etag = client_->UploadPart(bucket, key, *upload, number, body,
                                      s3::PutOptions::BodyCheck::kContentMd5);
      if (!etag.ok()) return etag.status();
      parts.push_back({number, *etag});
      uploaded += n;
      from += n;
    }
    return absl::OkStatus();
  };
  absl::Status s;
  uint64_t pending = 0, at = 0;  // [pending, at): to upload
  for (const LiveState::BinPiece& p : state.bin_pieces) {
    const uint64_t waiting = at - pending;
    if (p.bytes >= kMinPart && (waiting == 0 || waiting >= kMinPart)) {
      if (s = flush(pending, at, false); !s.ok()) break;
      const int number = static_cast<int>(parts.size()) + 1;
      auto etag = client_->UploadPartCopy(bucket, key, *upload, number, bucket, p.key,
                                          s3::ByteRange{p.at, p.bytes});
      if (!etag.ok()) {
        s = etag.status();
        break;
      }
      parts.push_back({number, *etag});
      copied += p.bytes;
      pending = at + p.bytes;
    }
    at += p.bytes;
  }
  if (s.ok()) s = flush(pending, at, true);
  if (s.ok()) s = client_->CompleteMultipartUpload(bucket, key, *upload, parts);
  if (!s.ok()) {
    client_->AbortMultipartUpload(bucket, key, *upload).IgnoreError();
    // A store that cannot copy parts (or a segment that went): the bytes
    // are on the scratch disk all the same.
    s = UploadFile(path, key, &uploaded);
    copied = 0;
  }
  std::lock_guard<std::mutex> lock(seal_mu_);
  if (s.ok()) {
    seal_counters_.copied_bytes += copied;
    seal_counters_.uploaded_bytes += uploaded;
  }
  return s;
}

RemoteCaptures::SealCounters RemoteCaptures::seal_counters() const {
  std::lock_guard<std::mutex> lock(seal_mu_);
  return seal_counters_;
}

absl::StatusOr<CatalogCapture> RemoteCaptures::Seal(const std::string& dir,
                                                    const v1::CaptureInfo& info,
                                                    const v1::CaptureCounters& counters,
                                                    uint64_t bin_bytes, const LiveState& state) {
  const std::string& name = info.name();
  // A writer another server fenced out uploads nothing: the finished
  // objects' keys are the capture's, and would overwrite what the new
  // owner sealed (the Finish below is fenced too, after the uploads).
  auto current = catalog_->Get(name);
  if (!current.ok()) return current.status();
  if (current->state != v1::CAPTURE_STATE_LIVE || current->epoch != state.epoch) {
    return absl::FailedPreconditionError(absl::StrCat(
        "capture ", name, " is no longer this server's to seal (",
        current->state == v1::CAPTURE_STATE_LIVE ? "taken over" : "finished", ": epoch ",
        current->epoch, ", this server's ", state.epoch, ")"));
  }
  CaptureObjects objects;
  uint64_t stored = 0, n = 0;
  bool has_bin = false;
  const std::string bin_path = dir + "/" + kBinName;
  const uint64_t bin_size = FileSize(bin_path, &has_bin);
  if (has_bin) {
    objects.bin_key = FinalKey(name, state.epoch, kBinName);
    n = bin_size;
    if (absl::Status s = UploadBin(bin_path, n, state, objects.bin_key); !s.ok()) return s;
    stored += n;
  }
  objects.index_key = FinalKey(name, state.epoch, kIndexName);
  if (absl::Status s = UploadFile(dir + "/" + kIndexName, objects.index_key, &n); !s.ok()) return s;
  stored += n;
  // The manifest last of the files: a folder downloaded with it is whole.
  objects.manifest_key = FinalKey(name, state.epoch, kManifestName);
  if (absl::Status s = UploadFile(dir + "/" + kManifestName, objects.manifest_key, &n); !s.ok()) {
    return s;
  }
  stored += n;
  auto segment_keys =
      catalog_->Finish(name, state.epoch, objects, counters, bin_bytes, stored, &info);
  if (!segment_keys.ok()) return segment_keys.status();
  // Segments that cannot be deleted now are orphans: garbage collection's.
  // A key the catalog names outside the capture's prefix is not its own.
  const std::string own = CapturePrefix(name);
  for (const std::string& key : *segment_keys) {
    if (!absl::StartsWith(key, own)) continue;
    client_->DeleteObject(options_.location.bucket, key).IgnoreError();
  }
  CatalogCapture row;
  row.info = info;
  row.state = v1::CAPTURE_STATE_FINISHED;
  row.counters = counters;
  row.committed_records = state.records;
  row.committed_bytes = state.journal_bytes;
  row.bin_bytes = bin_bytes;
  row.stored_bytes = stored;
  row.epoch = state.epoch;
  row.object_prefix = CapturePrefix(name);
  row.objects = objects;
  row.created = absl::Now();
  row.finished = absl::Now();
  return row;
}

absl::StatusOr<std::shared_ptr<IndexFile>> RemoteCaptures::OpenIndex(
    const CatalogCapture& capture) {
  const std::string& key = capture.objects.index_key;
  const std::string& name = capture.info.name();
  if (key.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("capture ", name, " has no index object (live)"));
  }
  // A name deleted and sealed again may reuse the key: the row's creation
  // tells the two apart.
  const std::string cache_key =
      absl::StrCat(key, "@", absl::ToUnixNanos(capture.created));
  {
    std::lock_guard<std::mutex> lock(cache_mu_);
    auto it = cache_.find(cache_key);
    if (it != cache_.end()) {
      ++cache_counters_.hits;
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      return it->second.index;
    }
    ++cache_counters_.misses;
  }
  // Its size and ETag, which every block read is checked against.
  absl::StatusOr<s3::ObjectInfo> head = client_->HeadObject(options_.location.bucket, key);
  if (!head.ok()) {
    if (absl::IsNotFound(head.status())) {
      return absl::DataLossError(
          absl::StrCat("capture ", name, ": its index object ", key, " is missing"));
    }
    return head.status();
  }
  const StoredObject object{key, head->etag, head->size};
  ObjectBlockCache* blocks = blocks_.get();
  absl::StatusOr<std::unique_ptr<IndexFile>> index = IndexFile::OpenRanged(
      key, object.size,
      [blocks, object](uint64_t offset, uint64_t size, char* out) {
        return blocks->Read(object, offset, size, out);
      });
  if (!index.ok()) {
    const absl::Status& s = index.status();
    if (absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s)) return s;
    return absl::DataLossError(absl::StrCat("capture ", name, ": ", s.message()));
  }
  std::shared_ptr<IndexFile> shared = std::move(index).value();
  std::lock_guard<std::mutex> lock(cache_mu_);
  auto it = cache_.find(cache_key);
  if (it != cache_.end()) {  // another thread opened it meanwhile
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return it->second.index;
  }
  lru_.push_front(cache_key);
  cache_[cache_key] = Cached{shared, lru_.begin()};
  EvictLocked();
  return shared;
}

void RemoteCaptures::EvictLocked() {
  // What the open indexes hold grows as they are read: counted now. The
  // most recent stays, however large.
  uint64_t bytes = 0;
  for (const auto& [key, cached] : cache_) bytes += cached.index->fetched_bytes();
  const uint64_t room = std::max<uint64_t>(options_.cache_bytes / 2, 1);
  while (bytes > room && lru_.size() > 1) {
    auto it = cache_.find(lru_.back());
    bytes -= std::min(bytes, it->second.index->fetched_bytes());
    ++cache_counters_.evictions;
    cache_.erase(it);
    lru_.pop_back();
  }
  cache_counters_.bytes = bytes;
}

RemoteCaptures::CacheCounters RemoteCaptures::cache_counters() const {
  std::lock_guard<std::mutex> lock(cache_mu_);
  return cache_counters_;
}

absl::Status RemoteCaptures::ReadBin(const CatalogCapture& capture, uint64_t offset,
                                     uint64_t size, const s3::ChunkCallback& on_chunk) {
  if (size == 0) return absl::OkStatus();
  const std::string& key = capture.objects.bin_key;
  if (key.empty() || offset > capture.bin_bytes || size > capture.bin_bytes - offset) {
    return absl::DataLossError(absl::StrCat("capture ", capture.info.name(), ": args.bin (",
                                            key.empty() ? "none" : key, ", ", capture.bin_bytes,
                                            " bytes) ends before byte ", offset + size));
  }
  uint64_t got = 0;
  auto info = client_->GetObject(options_.location.bucket, key, {offset, size},
                                 [&](std::string_view chunk) {
                                   got += chunk.size();
                                   return on_chunk(chunk);
                                 });
  if (!info.ok()) {
    if (absl::IsNotFound(info.status()) || absl::IsOutOfRange(info.status())) {
      return absl::DataLossError(absl::StrCat("capture ", capture.info.name(), ": ", key, ": ",
                                              info.status().message()));
    }
    return info.status();
  }
  if (info->size != capture.bin_bytes || got != size) {
    return absl::DataLossError(absl::StrCat(key, ": ", info->size, " bytes, the catalog says ",
                                            capture.bin_bytes, "; read ", got, " of ", size,
                                            " bytes from byte ", offset));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> RemoteCaptures::Delete(const std::string& name) {
  auto deleted = catalog_->Delete(name);
  if (!deleted.ok()) return deleted.status();
  const std::string own = CapturePrefix(name);
  for (const std::string& key : deleted->object_keys) {
    // What cannot be deleted now is an orphan: garbage collection's. A key
    // the catalog names outside the capture's prefix is not its own.
    if (absl::StartsWith(key, own)) {
      client_->DeleteObject(options_.location.bucket, key).IgnoreError();
    }
    // Its index, open under any creation time, goes from the cache.
    std::lock_guard<std::mutex> lock(cache_mu_);
    for (auto it = cache_.lower_bound(key + "@"); it != cache_.end() &&
                                                  absl::StartsWith(it->first, key + "@");) {
      lru_.erase(it->second.lru);
      it = cache_.erase(it);
    }
  }
  return deleted->stored_bytes;
}

absl::StatusOr<RemoteCaptures::GarbageReport> RemoteCaptures::CollectGarbage(
    absl::Duration min_age) {
  GarbageReport report;
  const std::string& bucket = options_.location.bucket;
  const std::string& prefix = options_.location.prefix;
  const absl::Time before = absl::Now() - min_age;
  std::string token;
  for (;;) {
    auto page = client_->ListObjectsV2(bucket, prefix, token);
    if (!page.ok()) return page.status();
    std::vector<std::string> ours;
    std::map<std::string, const s3::ObjectEntry*> by_key;
    for (const s3::ObjectEntry& o : page->objects) {
      ++report.listed;
      if (!absl::StartsWith(o.key, prefix) ||
          !IsCaptureObject(absl::string_view(o.key).substr(prefix.size()))) {
        continue;
      }
      ours.push_back(o.key);
      by_key[o.key] = &o;
    }
    auto orphans = catalog_->ListOrphanCandidates(ours);
    if (!orphans.ok()) return orphans.status();
    for (const std::string& key : *orphans) {
      auto listed = by_key.find(key);
      if (listed == by_key.end()) continue;  // not one this page asked about
      const s3::ObjectEntry* o = listed->second;
      auto modified = s3::ParseIso8601(o->last_modified);
      if (!modified.ok() || *modified > before) {
        ++report.young;
        continue;
      }
      if (client_->DeleteObject(bucket, key).ok()) {
        ++report.deleted;
        report.deleted_bytes += o->size;
      }
    }
    if (!page->is_truncated || page->next_continuation_token.empty()) break;
    token = page->next_continuation_token;
  }
  auto aborted = client_->AbortUploadsInitiatedBefore(bucket, prefix, before);
  if (!aborted.ok()) return aborted.status();
  report.aborted_uploads = *aborted;
  return report;
}

}  // namespace argsdump
