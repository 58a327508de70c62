// The embedded web view: every module the page imports is embedded and
// served as JavaScript (a browser runs a module script of no other MIME
// type), and the page loads its entry as a module.
#include "server/http/web_assets.h"

#include <map>
#include <regex>
#include <string>

#include "gtest/gtest.h"

namespace argsdump {
namespace {

std::map<std::string, const WebAsset*> ByPath() {
  std::map<std::string, const WebAsset*> out;
  for (const WebAsset& a : WebAssets()) {
    EXPECT_TRUE(out.emplace(a.path, &a).second) << a.path << " twice";
  }
  return out;
}

bool IsScript(const std::string& path) {
  return path.size() > 3 && (path.substr(path.size() - 3) == ".js" ||
                             (path.size() > 4 && path.substr(path.size() - 4) == ".mjs"));
}

TEST(WebAssetsTest, ThePageLoadsItsEntryAsAModule) {
  const auto assets = ByPath();
  ASSERT_EQ(assets.count("/index.html"), 1u);
  const std::string page(assets.at("/index.html")->bytes);
  EXPECT_NE(page.find("<script type=\"module\" src=\"app.js\"></script>"), std::string::npos);
  EXPECT_EQ(assets.at("/index.html")->content_type, "text/html; charset=utf-8");
  EXPECT_EQ(assets.at("/style.css")->content_type, "text/css; charset=utf-8");
}

TEST(WebAssetsTest, EveryImportedModuleIsEmbeddedAsJavaScript) {
  const auto assets = ByPath();
  const std::regex import_from("(?:from|import)\\s+'\\./([A-Za-z0-9_]+\\.mjs)'");
  size_t scripts = 0, imports = 0;
  for (const auto& [path, asset] : assets) {
    if (!IsScript(path)) continue;
    ++scripts;
    EXPECT_EQ(asset->content_type, "text/javascript; charset=utf-8") << path;
    const std::string text(asset->bytes);
    for (std::sregex_iterator it(text.begin(), text.end(), import_from), end; it != end; ++it) {
      ++imports;
      EXPECT_EQ(assets.count("/" + (*it)[1].str()), 1u)
          << path << " imports " << (*it)[1] << ", which is not embedded";
    }
  }
  EXPECT_GT(scripts, 10u);  // app.js and its modules
  EXPECT_GT(imports, scripts);
}

}  // namespace
}  // namespace argsdump
