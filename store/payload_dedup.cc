#include "store/payload_dedup.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "store/crc32c.h"

namespace argsdump {
namespace {

// Reads a payload in pieces front to back.
class PieceReader {
 public:
  explicit PieceReader(PayloadPieces pieces) : pieces_(pieces) {}
  // The next contiguous run of at most `max` bytes; empty at the end.
  absl::string_view Next(size_t max) {
    while (piece_ < pieces_.size() && at_ == pieces_[piece_].size()) {
      ++piece_;
      at_ = 0;
    }
    if (piece_ == pieces_.size()) return {};
    const absl::string_view p = pieces_[piece_];
    const size_t n = std::min(max, p.size() - at_);
    const absl::string_view run = p.substr(at_, n);
    at_ += n;
    return run;
  }
  // Copies `n` bytes at `offset` (from the start) into `out`; the offsets
  // asked for must not decrease.
  void CopyAt(uint64_t offset, size_t n, char* out) {
    while (n > 0) {
      while (offset >= base_ + pieces_[piece_].size()) {
        base_ += pieces_[piece_].size();
        ++piece_;
      }
      const size_t in = static_cast<size_t>(offset - base_);
      const size_t take = std::min(n, pieces_[piece_].size() - in);
      std::memcpy(out, pieces_[piece_].data() + in, take);
      out += take;
      offset += take;
      n -= take;
    }
  }

 private:
  PayloadPieces pieces_;
  size_t piece_ = 0;
  size_t at_ = 0;      // Next: within pieces_[piece_]
  uint64_t base_ = 0;  // CopyAt: offset of pieces_[piece_]
};

uint64_t TotalSize(PayloadPieces pieces) {
  uint64_t n = 0;
  for (absl::string_view p : pieces) n += p.size();
  return n;
}

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

bool GetVarint(absl::string_view* in, uint64_t* v) {
  uint64_t value = 0;
  for (int shift = 0; shift < 64 && !in->empty(); shift += 7) {
    const auto byte = static_cast<uint8_t>(in->front());
    in->remove_prefix(1);
    if (shift == 63 && byte > 1) return false;  // past 64 bits
    value |= uint64_t{byte & 0x7Fu} << shift;
    if ((byte & 0x80) == 0) {
      *v = value;
      return true;
    }
  }
  return false;
}

}  // namespace

bool SamePayload(PayloadPieces a, PayloadPieces b) {
  if (TotalSize(a) != TotalSize(b)) return false;
  PieceReader ra(a), rb(b);
  absl::string_view x, y;
  for (;;) {
    if (x.empty()) x = ra.Next(~size_t{0});
    if (y.empty()) y = rb.Next(~size_t{0});
    if (x.empty() || y.empty()) return x.empty() && y.empty();
    const size_t n = std::min(x.size(), y.size());
    if (std::memcmp(x.data(), y.data(), n) != 0) return false;
    x.remove_prefix(n);
    y.remove_prefix(n);
  }
}

PayloadIndex::Key PayloadIndex::KeyOf(PayloadPieces payload, uint64_t size) {
  constexpr size_t kEdge = 64, kWords = 32, kWord = 8;
  constexpr size_t kSample = 2 * kEdge + kWords * kWord;  // 384
  uint32_t crc = 0;
  if (size <= 512) {
    PieceReader r(payload);
    for (absl::string_view run = r.Next(~size_t{0}); !run.empty(); run = r.Next(~size_t{0})) {
      crc = Crc32c(crc, run.data(), run.size());
    }
    return {size, crc};
  }
  char sample[kSample];
  PieceReader r(payload);
  r.CopyAt(0, kEdge, sample);
  // Words at kEdge + i * step, i < kWords, all before the last kEdge bytes.
  const uint64_t step = (size - 2 * kEdge - kWord) / (kWords - 1);
  for (size_t i = 0; i < kWords; ++i) r.CopyAt(kEdge + i * step, kWord, sample + kEdge + i * kWord);
  r.CopyAt(size - kEdge, kEdge, sample + kEdge + kWords * kWord);
  return {size, Crc32c(0, sample, sizeof(sample))};
}

std::optional<uint64_t> PayloadIndex::Find(const Key& key) const {
  auto it = stored_.find(key);
  if (it == stored_.end()) return std::nullopt;
  return it->second;
}

std::optional<uint64_t> PayloadIndex::Remember(const Key& key, uint64_t stored_offset) {
  auto it = stored_.find(key);
  if (it != stored_.end()) {
    const uint64_t before = it->second;
    it->second = stored_offset;
    return before;
  }
  if (stored_.size() < kMaxEntries) stored_.emplace(key, stored_offset);
  return std::nullopt;
}

void PayloadIndex::Restore(const Key& key, std::optional<uint64_t> before) {
  if (before.has_value()) {
    stored_[key] = *before;
  } else {
    stored_.erase(key);
  }
}

std::string PayloadMap::Encode() const {
  std::string out;
  out.reserve(16 + 12 * shared.size());
  PutVarint(stream_begin, &out);
  PutVarint(stream_end, &out);
  PutVarint(stored_begin, &out);
  PutVarint(shared.size(), &out);
  for (const Shared& s : shared) {
    PutVarint(s.stream, &out);
    PutVarint(s.size, &out);
    PutVarint(s.stored, &out);
  }
  return out;
}

absl::StatusOr<PayloadMap> PayloadMap::Parse(absl::string_view in) {
  auto bad = [](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("payload map: ", why));
  };
  PayloadMap m;
  uint64_t count = 0;
  if (!GetVarint(&in, &m.stream_begin) || !GetVarint(&in, &m.stream_end) ||
      !GetVarint(&in, &m.stored_begin) || !GetVarint(&in, &count)) {
    return bad("truncated header");
  }
  if (m.stream_end < m.stream_begin) return bad("stream range ends before it begins");
  if (m.stored_begin > ~uint64_t{0} - (m.stream_end - m.stream_begin)) {
    return bad("stored range overflows 64 bits");
  }
  if (count > in.size() / 3) return bad(absl::StrCat(count, " shared payloads in ", in.size(), " bytes"));
  // Not reserved by `count`: it is untrusted until the entries check out.
  m.shared.reserve(std::min<uint64_t>(count, 4096));
  m.shared_before_.reserve(std::min<uint64_t>(count, 4096));
  uint64_t stream_at = m.stream_begin;  // where the last shared payload ended
  uint64_t skipped = 0;
  for (uint64_t i = 0; i < count; ++i) {
    Shared s;
    if (!GetVarint(&in, &s.stream) || !GetVarint(&in, &s.size) || !GetVarint(&in, &s.stored)) {
      return bad(absl::StrCat("shared payload ", i, " is truncated"));
    }
    if (s.size == 0 || s.stream < stream_at || s.stream > m.stream_end ||
        s.size > m.stream_end - s.stream) {
      return bad(absl::StrCat("shared payload ", i, " at stream offset ", s.stream,
                              " is out of order or outside the batch"));
    }
    // Where args.bin ended when this payload came: it points before that.
    const uint64_t stored_at = m.stored_begin + (s.stream - m.stream_begin) - skipped;
    if (s.stored > stored_at || s.size > stored_at - s.stored) {
      return bad(absl::StrCat("shared payload ", i, " points at stored bytes ", s.stored, "+",
                              s.size, ", past the ", stored_at, " stored before it"));
    }
    m.shared_before_.push_back(skipped);
    skipped += s.size;
    stream_at = s.stream + s.size;
    m.shared.push_back(s);
  }
  if (!in.empty()) return bad(absl::StrCat(in.size(), " bytes left over"));
  return m;
}

std::optional<uint64_t> PayloadMap::Place(uint64_t stream, uint64_t size, bool* is_shared) const {
  *is_shared = false;
  if (!Covers(stream) || size > stream_end - stream) return std::nullopt;
  auto it = std::lower_bound(shared.begin(), shared.end(), stream,
                             [](const Shared& s, uint64_t x) { return s.stream < x; });
  if (it != shared.end() && it->stream == stream) {
    if (it->size != size) return std::nullopt;
    *is_shared = true;
    return it->stored;
  }
  uint64_t skipped = 0;
  if (it != shared.begin()) {
    const size_t prev = static_cast<size_t>(it - shared.begin()) - 1;
    if (shared[prev].stream + shared[prev].size > stream) return std::nullopt;  // inside it
    skipped = shared_before_[prev] + shared[prev].size;
  }
  if (it != shared.end() && stream + size > it->stream) return std::nullopt;  // runs into it
  return stored_begin + (stream - stream_begin) - skipped;
}

uint64_t PayloadMap::stored_end() const {
  uint64_t skipped = 0;
  for (const Shared& s : shared) skipped += s.size;
  return stored_begin + (stream_end - stream_begin) - skipped;
}

}  // namespace argsdump
