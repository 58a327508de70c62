// libFuzzer target: any bytes as a page token. A token is ours exactly
// when it is what the server writes (it round-trips); an error shows at
// most 40 printable characters of it.
//   bazel build --config=fuzz //server:page_token_fuzzer   (tools/fuzz.sh)
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "server/page_token.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string token(reinterpret_cast<const char*>(data), size);
  auto position = argsdump::ParsePositionToken(token);
  if (position.ok()) {
    if (!token.empty() && argsdump::PositionToken(position->position, *position->live) != token) {
      std::abort();
    }
  } else if (position.status().message().size() > 120) {
    std::abort();
  }
  auto name = argsdump::ParseNameToken(token);
  if (name.ok()) {
    if (!token.empty() && argsdump::NameToken(*name) != token) std::abort();
  } else if (name.status().message().size() > 120) {
    std::abort();
  }
  auto job_arg = argsdump::ParseJobArgToken(token);
  if (job_arg.ok()) {
    if (*job_arg && argsdump::JobArgToken(**job_arg) != token) std::abort();
  } else if (job_arg.status().message().size() > 120) {
    std::abort();
  }
  const std::string shown = argsdump::ShownToken(token);
  for (char c : shown) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) std::abort();
  }
  return 0;
}
