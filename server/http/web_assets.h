// The web view's files (server/http/web/), built into capture_server by
// server/http/embed_web.sh: no runtime download, no files to install.
#ifndef ARGSDUMP_SERVER_HTTP_WEB_ASSETS_H_
#define ARGSDUMP_SERVER_HTTP_WEB_ASSETS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace argsdump {

struct WebAsset {
  std::string path;          // "/index.html", "/app.js", "/format.mjs", ...
  std::string content_type;  // with its charset
  absl::string_view bytes;
};

const std::vector<WebAsset>& WebAssets();

}  // namespace argsdump

#endif  // ARGSDUMP_SERVER_HTTP_WEB_ASSETS_H_
