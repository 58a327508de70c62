// libFuzzer target: any bytes as a token file's contents, for the token
// grammar (TokenFromFileBytes). What it takes is 1..kMaxTokenBytes bytes of
// 0x21..0x7E, the file's first line exactly; what it refuses names a byte
// that is really there and really not allowed, or says the line is empty or
// too long. The same bytes written to a file read back the same way.
//   bazel build --config=fuzz //base:token_fuzzer   (tools/fuzz.sh)
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "base/files.h"
#include "tests/fuzz_scratch.h"

namespace {

bool Allowed(unsigned char c) { return c >= 0x21 && c <= 0x7E; }

void Check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<std::string> token = argsdump::TokenFromFileBytes(bytes);
  if (token.ok()) {
    Check(!token->empty() && token->size() <= argsdump::kMaxTokenBytes);
    for (unsigned char c : *token) Check(Allowed(c));
    Check(absl::StartsWith(bytes, *token));
    const std::string rest = bytes.substr(token->size());
    Check(rest.empty() || rest[0] == '\n' || absl::StartsWith(rest, "\r\n"));
  } else {
    Check(absl::IsInvalidArgument(token.status()));
    const std::string message(token.status().message());
    size_t at;
    if (absl::StartsWith(message, "byte ")) {
      const size_t space = message.find(' ', 5);
      Check(space != std::string::npos &&
            absl::SimpleAtoi(message.substr(5, space - 5), &at) && at < bytes.size());
      const unsigned char c = static_cast<unsigned char>(bytes[at]);
      Check(!Allowed(c));
      Check(absl::StartsWith(message.substr(space), absl::StrFormat(" is 0x%02x (", c)));
      for (size_t i = 0; i < at; ++i) Check(Allowed(static_cast<unsigned char>(bytes[i])));
    } else if (message == "it is empty") {
      Check(bytes.empty());
    } else if (message == "its first line is empty") {
      Check(bytes[0] == '\n' || absl::StartsWith(bytes, "\r\n"));
    } else {
      Check(absl::StartsWith(message, "its first line is longer than") &&
            bytes.size() > argsdump::kMaxTokenBytes);
      for (size_t i = 0; i <= argsdump::kMaxTokenBytes; ++i) {
        Check(Allowed(static_cast<unsigned char>(bytes[i])));
      }
    }
  }
  // Through a file, as the tools read it: the same token or the same reason.
  // (A file over kMaxTokenFileBytes is refused by size whatever it holds.)
  const std::string path = argsdump::FuzzScratch() + "/token";
  argsdump::PutFile(path, bytes.data(), bytes.size());
  const absl::StatusOr<std::string> read = argsdump::ReadTokenFile(path);
  if (size > argsdump::kMaxTokenFileBytes) {
    Check(!read.ok());
  } else if (token.ok()) {
    Check(read.ok() && *read == *token);
  } else {
    Check(!read.ok() && absl::EndsWith(read.status().message(), token.status().message()));
  }
  return 0;
}
