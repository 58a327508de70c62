// Byte ranges of immutable objects in an S3 store, read through an
// in-memory cache of fixed-size blocks keyed by (key, ETag, block), bounded
// by bytes and evicted least recently used: how a finished capture's
// args.index and manifest are read from an object store without
// downloading them whole.
//
// Invariants: an object is named with the size and ETag its reader was
// given (from the catalog or a HEAD), and every block fetched is checked
// against both: a changed object is FailedPrecondition naming the key, a
// block the store answers short is DataLoss naming the key and the byte.
// A block is fetched once however many threads miss it at once; the bytes
// held never exceed the capacity by more than the blocks being read.
#ifndef ARGSDUMP_STORE_OBJECT_BLOCK_CACHE_H_
#define ARGSDUMP_STORE_OBJECT_BLOCK_CACHE_H_

#include <condition_variable>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include "absl/status/status.h"
#include "s3/s3_client.h"

namespace argsdump {

// An object as its readers know it.
struct StoredObject {
  std::string key;
  std::string etag;  // as the store gives it, quotes included
  uint64_t size = 0;
};

class ObjectBlockCache {
 public:
  struct Options {
    uint64_t block_bytes = 1 << 20;       // taken into [4 KiB, 64 MiB]
    uint64_t capacity_bytes = 256 << 20;  // at least one block is always kept
  };
  struct Counters {
    uint64_t hits = 0;       // blocks found
    uint64_t misses = 0;     // blocks fetched
    uint64_t evictions = 0;  // blocks let go for room
    uint64_t bytes = 0;      // held now
  };

  // `client` outlives the cache.
  ObjectBlockCache(s3::S3Client* client, std::string bucket, Options options);
  ObjectBlockCache(const ObjectBlockCache&) = delete;
  ObjectBlockCache& operator=(const ObjectBlockCache&) = delete;

  // Bytes [offset, offset + size) of `object` into `out`. OutOfRange past
  // the object's end; the store's own errors as the client gives them.
  absl::Status Read(const StoredObject& object, uint64_t offset, uint64_t size, char* out);

  Counters counters() const;

 private:
  // Key, ETag, size and block index: a reader that names the object with
  // another size (a damaged catalog row) never shares its blocks.
  using BlockKey = std::tuple<std::string, std::string, uint64_t, uint64_t>;
  struct Block {
    std::string bytes;
    bool loading = true;
    absl::Status failed;  // the fetch's error, for the threads that waited on it
    std::list<BlockKey>::iterator lru;  // valid once loaded
  };

  // The block `index` of `object`, fetched if need be; shared so that an
  // eviction while the caller copies from it frees nothing under it.
  absl::StatusOr<std::shared_ptr<const Block>> GetBlock(const StoredObject& object,
                                                        uint64_t index);
  absl::StatusOr<std::string> Fetch(const StoredObject& object, uint64_t index) const;
  void EvictLocked();

  s3::S3Client* const client_;
  const std::string bucket_;
  const Options options_;  // block_bytes within its bounds
  mutable std::mutex mu_;
  std::condition_variable loaded_;
  std::map<BlockKey, std::shared_ptr<Block>> blocks_;  // guarded by mu_
  std::list<BlockKey> lru_;                            // most recent first; guarded by mu_
  Counters counters_;                                  // guarded by mu_
};

}  // namespace argsdump

#endif  // ARGSDUMP_STORE_OBJECT_BLOCK_CACHE_H_
