// libFuzzer target: any bytes as a numeric flag's value, for each kind of
// quantity. A value taken is within the flag's range and reads back the
// same once formatted; a bare number of up to 18 digits is taken exactly
// when it is in range, as that number; an error names the value and the
// range, and never more than the input and a line of text.
//   bazel build --config=fuzz //tools:quantity_fuzzer   (tools/fuzz.sh)
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "tools/quantity.h"

namespace {

using argsdump::Quantity;

void Check(const std::string& text, const Quantity& q) {
  absl::StatusOr<int64_t> v = argsdump::ParseQuantity(text, q);
  bool digits = !text.empty() && text.size() <= 18;
  for (char c : text) digits = digits && std::isdigit(static_cast<unsigned char>(c));
  if (!v.ok()) {
    if (v.status().message().size() > text.size() + 300) std::abort();
    if (digits && q.kind != Quantity::kDuration) {
      const int64_t n = std::strtoll(text.c_str(), nullptr, 10);
      if (n >= q.min && n <= q.max) std::abort();  // in range, refused
    }
    return;
  }
  if (*v < q.min || *v > q.max) std::abort();
  if (digits && q.kind != Quantity::kDuration && *v != std::strtoll(text.c_str(), nullptr, 10)) {
    std::abort();
  }
  absl::StatusOr<int64_t> again = argsdump::ParseQuantity(argsdump::FormatQuantity(*v, q.kind), q);
  if (!again.ok() || *again != *v) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  constexpr int64_t kCentury = 36500 * argsdump::kMillisecondsPerDay;
  Check(text, Quantity::Milliseconds(0, kCentury, "never"));
  Check(text, Quantity::Duration(0, kCentury, "keep them"));
  Check(text, Quantity::Milliseconds(1, 7 * argsdump::kMillisecondsPerDay));
  Check(text, Quantity::Bytes(64, int64_t{1} << 40));
  Check(text, Quantity::Bytes(0, int64_t{1} << 50, "no limit"));
  Check(text, Quantity::Count(1, 65536));
  Check(text, Quantity::Count(0, INT64_MAX));
  return 0;
}
