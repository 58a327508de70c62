#include "server/page_token.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/capture_hub.h"

namespace argsdump {
namespace {

absl::Status NotOurs(const std::string& token) {
  return absl::InvalidArgumentError(
      absl::StrCat("page_token ", ShownToken(token), " is not one of ours"));
}

// A canonical decimal (no sign, no leading zero) that fits `*out`.
template <typename T>
bool ParseCanonical(absl::string_view text, T* out) {
  uint64_t v = 0;
  if (text.empty() || text.size() > 20 || (text[0] == '0' && text.size() > 1) ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      !absl::SimpleAtoi(text, &v) || v > std::numeric_limits<T>::max()) {
    return false;
  }
  *out = static_cast<T>(v);
  return true;
}

}  // namespace

std::string JobArgToken(const JobArgKey& k) {
  return absl::StrCat("q", k.step, ".", k.task_id, ".", k.rank, ".", k.stage, ".", k.arg_index,
                      ".", k.role, ".", k.record_id);
}

absl::StatusOr<std::optional<JobArgKey>> ParseJobArgToken(const std::string& token) {
  if (token.empty()) return std::optional<JobArgKey>();
  if (token.size() > 120 || token[0] != 'q') return NotOurs(token);
  const std::vector<absl::string_view> parts =
      absl::StrSplit(absl::string_view(token).substr(1), '.');
  JobArgKey k;
  if (parts.size() != 7 || !ParseCanonical(parts[0], &k.step) ||
      !ParseCanonical(parts[1], &k.task_id) || !ParseCanonical(parts[2], &k.rank) ||
      !ParseCanonical(parts[3], &k.stage) || !ParseCanonical(parts[4], &k.arg_index) ||
      !ParseCanonical(parts[5], &k.role) || !ParseCanonical(parts[6], &k.record_id)) {
    return NotOurs(token);
  }
  return std::optional<JobArgKey>(k);
}

std::string ShownToken(const std::string& token) {
  std::string shown = token.size() <= 40 ? token : token.substr(0, 40) + "...";
  for (char& c : shown) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  }
  return absl::StrCat("'", shown, "'",
                      token.size() > 40 ? absl::StrCat(" (", token.size(), " bytes)") : "");
}

std::string PositionToken(uint64_t position, bool live) {
  return absl::StrCat(live ? "l" : "p", position);
}

absl::StatusOr<PagePosition> ParsePositionToken(const std::string& token) {
  if (token.empty()) return PagePosition();
  // "p" or "l" and a canonical decimal (no leading zero): at most 21 characters.
  uint64_t v = 0;
  if (token.size() < 2 || token.size() > 21 || (token[0] != 'p' && token[0] != 'l') ||
      (token[1] == '0' && token.size() > 2) ||
      !std::all_of(token.begin() + 1, token.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      !absl::SimpleAtoi(token.substr(1), &v)) {
    return NotOurs(token);
  }
  return PagePosition{v, token[0] == 'l'};
}

std::string NameToken(const std::string& capture) { return "n" + capture; }

absl::StatusOr<std::string> ParseNameToken(const std::string& token) {
  if (token.empty()) return std::string();
  if (token[0] != 'n' || !ValidateCaptureName(token.substr(1)).ok()) return NotOurs(token);
  return token.substr(1);
}

}  // namespace argsdump
