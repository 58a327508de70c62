// Content dedup of payloads within a capture: a payload whose bytes are
// already in args.bin is not written again; its record points at the bytes
// there. Two parts:
//   PayloadIndex  finds a candidate by fingerprint (the size and a CRC-32C
//                 of sampled bytes). The fingerprint only rules payloads
//                 out: the store compares the bytes whole before it shares
//                 any (CaptureStore::AppendPrepared).
//   PayloadMap    the journal entry (kPayloadMap) that says where a batch's
//                 payloads went, written ahead of the batch's records, which
//                 keep their stream offsets (PreparedRecords are encoded
//                 before the store decides).
// Offsets: a record arrives with its *stream* offset (the payload bytes of
// the capture before it, shared or not: what the collector and the ingest
// stream count); it is stored with its *stored* offset in args.bin.
#ifndef ARGSDUMP_STORE_PAYLOAD_DEDUP_H_
#define ARGSDUMP_STORE_PAYLOAD_DEDUP_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace argsdump {

// One payload's bytes, in pieces (a stream cuts payloads anywhere).
using PayloadPieces = absl::Span<const absl::string_view>;

// Whether two payloads hold the same bytes (sizes included).
bool SamePayload(PayloadPieces a, PayloadPieces b);

class PayloadIndex {
 public:
  // Smaller payloads are always written: sharing them would save less
  // than the journal's note of it costs.
  static constexpr uint64_t kMinBytes = 64;
  // Payloads remembered at most (~40 MiB of table); past that, new ones
  // are still written, and still shared with those remembered.
  static constexpr size_t kMaxEntries = size_t{1} << 20;

  struct Key {
    uint64_t size;
    uint32_t sample_crc;
    bool operator==(const Key& o) const { return size == o.size && sample_crc == o.sample_crc; }
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.size, k.sample_crc);
    }
  };
  // The payload's size and the CRC-32C of its first and last 64 bytes and
  // of 32 eight-byte words spread evenly between (all of it up to 512
  // bytes): a few hundred bytes read per payload, whatever its size.
  static Key KeyOf(PayloadPieces payload, uint64_t size);

  // The stored offset of the payload last remembered with `key`, if any.
  std::optional<uint64_t> Find(const Key& key) const;
  // Returns what `key` named before (for Restore).
  std::optional<uint64_t> Remember(const Key& key, uint64_t stored_offset);
  // Undoes a Remember (a batch that was not written after all).
  void Restore(const Key& key, std::optional<uint64_t> before);
  size_t size() const { return stored_.size(); }

 private:
  absl::flat_hash_map<Key, uint64_t> stored_;
};

// Where one batch's payloads went (journal entry kPayloadMap). The batch's
// stream bytes [stream_begin, stream_end) are stored from stored_begin on,
// in order, except the shared ones, which point back at bytes stored
// before. Encoded as little-endian base-128 varints:
//   stream_begin stream_end stored_begin count count*(stream size stored)
struct PayloadMap {
  struct Shared {
    uint64_t stream = 0;  // the payload's stream offset
    uint64_t size = 0;
    uint64_t stored = 0;  // where its bytes already are
  };
  uint64_t stream_begin = 0;
  uint64_t stream_end = 0;
  uint64_t stored_begin = 0;
  std::vector<Shared> shared;  // by stream offset, ascending

  std::string Encode() const;
  // A map read back: what Place needs (the shared bytes before each shared
  // payload) is filled in.
  // InvalidArgument naming what is wrong: a truncated varint, bytes left
  // over, ranges out of order or overflowing, a shared payload that points
  // at bytes not stored before it.
  static absl::StatusOr<PayloadMap> Parse(absl::string_view bytes);

  bool Covers(uint64_t stream) const { return stream >= stream_begin && stream < stream_end; }
  // The stored offset of the payload at `stream` of `size` bytes (covered:
  // Covers(stream)); nullopt when the map cannot place it (it starts inside
  // a shared payload, or its size differs from the shared one's). `shared`
  // says whether it points back.
  std::optional<uint64_t> Place(uint64_t stream, uint64_t size, bool* shared) const;
  // Where the batch's stored bytes end.
  uint64_t stored_end() const;

 private:
  std::vector<uint64_t> shared_before_;  // Parse: shared bytes before shared[i]
};

}  // namespace argsdump

#endif  // ARGSDUMP_STORE_PAYLOAD_DEDUP_H_
