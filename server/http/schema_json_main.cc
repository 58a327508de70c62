// Prints what GET /v1/schema answers (the filter schema, from the one filter
// table) so the web page's module tests build their form from the real one.
#include <cstdio>
#include <string>

#include "server/http/params.h"

int main() {
  const std::string body = argsdump::SchemaBody() + "\n";
  std::fwrite(body.data(), 1, body.size(), stdout);
  return 0;
}
