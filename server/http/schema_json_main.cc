// Prints what GET /v1/schema answers (the filter schema, from the one filter
// table) so the web page's module tests build their form from the real one.
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "format/arg_filter_params.h"

int main() {
  const std::string body = absl::StrCat("{\"filter\":", argsdump::ArgFilterSchemaJson(), "}\n");
  std::fwrite(body.data(), 1, body.size(), stdout);
  return 0;
}
