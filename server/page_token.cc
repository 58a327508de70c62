#include "server/page_token.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/capture_hub.h"

namespace argsdump {
namespace {

absl::Status NotOurs(const std::string& token) {
  return absl::InvalidArgumentError(
      absl::StrCat("page_token ", ShownToken(token), " is not one of ours"));
}

}  // namespace

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
