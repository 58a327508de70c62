#include "store/object_block_cache.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace argsdump {

namespace {

ObjectBlockCache::Options Bounded(ObjectBlockCache::Options o) {
  o.block_bytes = std::clamp<uint64_t>(o.block_bytes, 4 << 10, 64 << 20);
  return o;
}

}  // namespace

ObjectBlockCache::ObjectBlockCache(s3::S3Client* client, std::string bucket, Options options)
    : client_(client), bucket_(std::move(bucket)), options_(Bounded(options)) {}

absl::Status ObjectBlockCache::Read(const StoredObject& object, uint64_t offset, uint64_t size,
                                    char* out) {
  if (offset > object.size || size > object.size - offset) {
    return absl::OutOfRangeError(absl::StrCat(size, " bytes at ", offset, " of ", object.key,
                                              " are past its end (", object.size, " bytes)"));
  }
  const uint64_t block_bytes = options_.block_bytes;
  while (size > 0) {
    const uint64_t index = offset / block_bytes, within = offset % block_bytes;
    absl::StatusOr<std::shared_ptr<const Block>> block = GetBlock(object, index);
    if (!block.ok()) return block.status();
    // Fetch checked the block's length against the object's: it holds the
    // byte at `within` (and a block never serves a reader of another size).
    if (within >= (*block)->bytes.size()) {
      return absl::DataLossError(absl::StrCat(object.key, " ends at byte ",
                                              index * block_bytes + (*block)->bytes.size()));
    }
    const uint64_t n = std::min<uint64_t>(size, (*block)->bytes.size() - within);
    std::memcpy(out, (*block)->bytes.data() + within, n);
    out += n;
    offset += n;
    size -= n;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const ObjectBlockCache::Block>> ObjectBlockCache::GetBlock(
    const StoredObject& object, uint64_t index) {
  const BlockKey key{object.key, object.etag, object.size, index};
  std::unique_lock<std::mutex> lock(mu_);
  auto it = blocks_.find(key);
  if (it != blocks_.end()) {
    std::shared_ptr<Block> block = it->second;
    loaded_.wait(lock, [&] { return !block->loading; });
    if (!block->failed.ok()) return block->failed;
    ++counters_.hits;
    auto still = blocks_.find(key);  // not evicted since it loaded: most recent now
    if (still != blocks_.end() && still->second == block) {
      lru_.splice(lru_.begin(), lru_, block->lru);
    }
    return std::shared_ptr<const Block>(block);
  }
  auto block = std::make_shared<Block>();
  blocks_.emplace(key, block);
  ++counters_.misses;
  lock.unlock();
  absl::StatusOr<std::string> bytes = Fetch(object, index);
  lock.lock();
  block->loading = false;
  loaded_.notify_all();
  if (!bytes.ok()) {
    // Nothing is kept for a failed fetch: the next reader asks again.
    block->failed = bytes.status();
    blocks_.erase(key);
    return block->failed;
  }
  block->bytes = std::move(bytes).value();
  lru_.push_front(key);
  block->lru = lru_.begin();
  counters_.bytes += block->bytes.size();
  EvictLocked();
  return std::shared_ptr<const Block>(block);
}

absl::StatusOr<std::string> ObjectBlockCache::Fetch(const StoredObject& object,
                                                    uint64_t index) const {
  const uint64_t block_bytes = options_.block_bytes;
  const uint64_t begin = index * block_bytes;
  const uint64_t want = std::min(block_bytes, object.size - begin);
  std::string bytes;
  bytes.reserve(want);
  absl::StatusOr<s3::ObjectInfo> info = client_->GetObject(
      bucket_, object.key, s3::ByteRange{begin, want}, [&](std::string_view chunk) {
        if (chunk.size() > want - bytes.size()) {
          return absl::DataLossError(absl::StrCat(object.key, " sent more than the ", want,
                                                  " bytes asked for at byte ", begin));
        }
        bytes.append(chunk.data(), chunk.size());
        return absl::OkStatus();
      });
  if (!info.ok()) return info.status();
  if (info->etag != object.etag || info->size != object.size) {
    return absl::FailedPreconditionError(
        absl::StrCat(object.key, " changed: it is ", info->size, " bytes with ETag ", info->etag,
                     ", read as ", object.size, " bytes with ETag ", object.etag));
  }
  if (bytes.size() != want) {
    return absl::DataLossError(absl::StrCat(object.key, " ends at byte ", begin + bytes.size(),
                                            " of ", object.size));
  }
  return bytes;
}

void ObjectBlockCache::EvictLocked() {
  while (counters_.bytes > options_.capacity_bytes && lru_.size() > 1) {
    const BlockKey& oldest = lru_.back();
    auto it = blocks_.find(oldest);
    counters_.bytes -= it->second->bytes.size();
    ++counters_.evictions;
    blocks_.erase(it);
    lru_.pop_back();
  }
}

ObjectBlockCache::Counters ObjectBlockCache::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

}  // namespace argsdump
