// Captures in an S3-compatible object store, catalogued in PostgreSQL: the
// capture service's second home for a capture's bytes. The file formats
// are the local ones; only where the bytes live changes.
//
//   <prefix><name>/segments/<seq>.e<epoch>           a live capture, piece by piece
//   <prefix><name>/<epoch>/args_dump/args_dump.json  a finished capture: the
//   <prefix><name>/<epoch>/args_dump/args.bin        files of a local one, so
//   <prefix><name>/<epoch>/args_dump/args.index      that a downloaded folder
//                                                    is a capture
// Every key names the epoch it was written under: a writer fenced out by a
// takeover never overwrites its successor's objects, and an abandoned
// attempt's objects are orphans garbage collection can tell apart.
//
// A live capture is written on a local scratch disk as always (CaptureStore)
// and made durable piece by piece: each segment holds the journal bytes
// and args.bin bytes appended since the last one, and is committed in the
// catalog with the capture's new watermark, fenced by the capture's epoch.
// What the catalog says is committed is what a client was acknowledged;
// Restore rebuilds the scratch files of exactly that from the segments (a
// server restarted on an empty disk, a commit that failed). Sealing uploads
// the finished files, flips the catalog row to finished last and deletes
// the segments: a crash anywhere leaves the live capture (resumable) or the
// finished one, and objects no row names, which CollectGarbage deletes.
//
// Segment object (little endian):
//   "ADSG" u32 version (1)
//   u64 first_record  u64 records
//   u64 journal_offset  u64 journal_bytes   (args.journal's bytes)
//   u64 bin_offset      u64 bin_bytes       (args.bin's bytes)
//   u32 CRC-32C of the 56 bytes above and the body   u32 0
//   body: journal_bytes of journal, then bin_bytes of args.bin
// Everything read back from the store or the catalog is checked: a damaged
// object is DataLoss naming its key and byte. Thread-safe.
#ifndef ARGSDUMP_STORE_REMOTE_CAPTURES_H_
#define ARGSDUMP_STORE_REMOTE_CAPTURES_H_

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "catalog/catalog.h"
#include "format/capture_index.h"
#include "proto/argsdump/v1/capture.pb.h"
#include "s3/s3_client.h"
#include "store/object_block_cache.h"

namespace argsdump {

// s3://BUCKET[/PREFIX]: InvalidArgument naming what is wrong. The prefix
// comes back empty or ending in '/'.
struct ObjectStoreUri {
  std::string bucket;
  std::string prefix;
};
absl::StatusOr<ObjectStoreUri> ParseObjectStoreUri(absl::string_view uri);

inline constexpr uint32_t kSegmentHeaderBytes = 64;

struct SegmentHeader {
  uint64_t first_record = 0;
  uint64_t records = 0;
  uint64_t journal_offset = 0;
  uint64_t journal_bytes = 0;
  uint64_t bin_offset = 0;
  uint64_t bin_bytes = 0;
};
// The object's header for `body` (journal bytes then bin bytes).
std::string EncodeSegmentHeader(const SegmentHeader& header, absl::string_view journal,
                                absl::string_view bin);
// A whole segment object, checked (magic, version, sizes, checksum):
// DataLoss naming `key` and the byte otherwise. `journal` and `bin` view
// `object`.
absl::StatusOr<SegmentHeader> ParseSegment(absl::string_view object, absl::string_view key,
                                           absl::string_view* journal, absl::string_view* bin);

class RemoteCaptures {
 public:
  struct Options {
    ObjectStoreUri location;
    // Finished captures' indexes are read by ranged GETs of 64 KiB blocks,
    // kept in memory up to this many bytes (half for the blocks, half for
    // the indexes open), least recently used let go first.
    uint64_t cache_bytes = 1ull << 30;
    // Files larger than this are uploaded in parts of this size.
    uint64_t part_bytes = 16ull << 20;
    // Sealing builds args.bin from the segments' payload bytes by
    // server-side copies (UploadPartCopy) where a segment holds at least
    // a part's minimum (5 MiB), uploading only the rest; off: all of it is
    // uploaded from the scratch disk. Off by default: on a Ceph RGW on the
    // same machine a copy took longer than the upload (256 MiB sealed in
    // 1.95 s against 1.0-1.2 s); worth it where the server's uplink is the
    // bottleneck.
    bool copy_parts = false;
  };
  // Checks that the bucket answers with these credentials (a clear error
  // when it does not: wrong keys, no such bucket, store unreachable).
  static absl::StatusOr<std::unique_ptr<RemoteCaptures>> Open(std::unique_ptr<s3::S3Client> client,
                                                              std::unique_ptr<Catalog> catalog,
                                                              Options options);
  ~RemoteCaptures();

  Catalog& catalog() { return *catalog_; }
  s3::S3Client& client() { return *client_; }
  const Options& options() const { return options_; }
  std::string CapturePrefix(const std::string& name) const;
  // A finished capture's file, sealed under `epoch`.
  std::string FinalKey(const std::string& name, int64_t epoch, const char* file) const;

  // Where a live capture's commits stand.
  struct LiveState {
    int64_t epoch = 0;
    uint64_t next_seq = 0;
    uint64_t records = 0;        // committed
    uint64_t journal_bytes = 0;  // of args.journal, committed
    uint64_t bin_bytes = 0;      // of args.bin, committed
    bool cataloged = false;      // the catalog has its row
    v1::CaptureInfo info;        // as the catalog has it (Restore)
    // Where args.bin's bytes are in the committed segments, in order.
    struct BinPiece {
      std::string key;  // the segment
      uint64_t at = 0;  // in the segment object
      uint64_t bytes = 0;
    };
    std::vector<BinPiece> bin_pieces;
  };

  // One segment: the bytes of `dir`'s args.journal and args.bin past
  // `state`'s up to (journal_end, bin_end), holding records up to
  // `records`, uploaded and then committed; `state` moves on. The first
  // commit of a capture creates its catalog row from `info` (later ones
  // read only its name). On an error `state` keeps its watermark (a row this
  // commit created stays, with its epoch); whether the catalog took the
  // segment is then unknown (Restore tells).
  absl::Status Commit(const std::string& dir, const v1::CaptureInfo& info,
                      const v1::CaptureCounters& counters, uint64_t records,
                      uint64_t journal_end, uint64_t bin_end, LiveState* state);

  // Takes the live capture over (a new epoch: older writers are fenced
  // out) and writes `dir`'s args.journal and args.bin as its committed
  // segments say, replacing what is there. NotFound when the catalog has
  // no such capture, FailedPrecondition when it finished, DataLoss naming
  // the key and byte for a damaged or missing segment; on an error `dir`
  // holds neither file.
  absl::StatusOr<LiveState> Restore(const std::string& name, const std::string& dir);

  // Uploads `dir`'s finished files (args.bin, args.index, the manifest),
  // then turns the catalog row finished under `state`'s epoch with `info`
  // (the capture's final info), then deletes the segments. Returns the
  // row as it is now.
  absl::StatusOr<CatalogCapture> Seal(const std::string& dir, const v1::CaptureInfo& info,
                                      const v1::CaptureCounters& counters, uint64_t bin_bytes,
                                      const LiveState& state);

  // A finished capture's index, opened ranged (IndexFile::OpenRanged: its
  // header read now, the rest block by block as queries read it, every row
  // checked as read) over the block cache, and kept open while the cache
  // has room. DataLoss naming the key for a missing, short or damaged
  // object; FailedPrecondition when it changed under a reader.
  absl::StatusOr<std::shared_ptr<IndexFile>> OpenIndex(const CatalogCapture& capture);
  // Bytes [offset, offset + size) of a finished capture's args.bin, ranged
  // GETs streamed to `on_chunk`. DataLoss naming the key and byte when the
  // object is shorter.
  absl::Status ReadBin(const CatalogCapture& capture, uint64_t offset, uint64_t size,
                       const s3::ChunkCallback& on_chunk);

  // Removes the catalog row, then its objects (only those below the
  // capture's prefix, whatever the row names); what they took.
  absl::StatusOr<uint64_t> Delete(const std::string& name);

  struct GarbageReport {
    uint64_t listed = 0;          // objects under the prefix
    uint64_t deleted = 0;         // orphans deleted
    uint64_t deleted_bytes = 0;
    uint64_t young = 0;           // orphans kept: younger than min_age
    int aborted_uploads = 0;      // stale multipart uploads aborted
  };
  // Objects under the prefix no catalog row names, older than `min_age`
  // (younger ones may be an upload whose commit is on its way), deleted;
  // multipart uploads older than `min_age` aborted.
  absl::StatusOr<GarbageReport> CollectGarbage(absl::Duration min_age);

  // Indexes open: found open, opened, let go for room; the bytes the open
  // ones hold.
  struct CacheCounters {
    uint64_t hits = 0;
    uint64_t misses = 0;
    uint64_t evictions = 0;
    uint64_t bytes = 0;
  };
  CacheCounters cache_counters() const;
  // The index blocks read from the store and found in memory.
  ObjectBlockCache::Counters block_counters() const { return blocks_->counters(); }

 private:
  RemoteCaptures(std::unique_ptr<s3::S3Client> client, std::unique_ptr<Catalog> catalog,
                 Options options);
  absl::Status UploadFile(const std::string& path, const std::string& key, uint64_t* bytes);
  // args.bin (`size` bytes at `path`) as `key`: copied part by part from
  // the segments where they hold a whole part, the rest uploaded.
  absl::Status UploadBin(const std::string& path, uint64_t size, const LiveState& state,
                         const std::string& key);

 public:
  // What sealing moved: bytes copied inside the store and bytes uploaded.
  struct SealCounters {
    uint64_t copied_bytes = 0;
    uint64_t uploaded_bytes = 0;
  };
  SealCounters seal_counters() const;

 private:
  mutable std::mutex seal_mu_;
  SealCounters seal_counters_;  // guarded by seal_mu_
  std::string SegmentKey(const std::string& name, uint64_t seq, int64_t epoch) const;

  std::unique_ptr<s3::S3Client> client_;
  std::unique_ptr<Catalog> catalog_;
  const Options options_;

  // The indexes open, by object key; their blocks come through blocks_
  // (keyed by key, ETag and size: a changed object is never mixed in).
  struct Cached {
    std::shared_ptr<IndexFile> index;
    std::list<std::string>::iterator lru;
  };
  void EvictLocked();
  std::unique_ptr<ObjectBlockCache> blocks_;
  mutable std::mutex cache_mu_;
  std::map<std::string, Cached> cache_;  // guarded by cache_mu_
  std::list<std::string> lru_;           // most recent first; guarded by cache_mu_
  CacheCounters cache_counters_;         // guarded by cache_mu_
};

}  // namespace argsdump

#endif  // ARGSDUMP_STORE_REMOTE_CAPTURES_H_
