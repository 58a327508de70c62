#include "tests/testing/headless_chromium.h"

#include <sys/wait.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {

std::string RunChromium(const std::string& url, const std::string& mode) {
  const std::string profile = FreshTempDir("chromium_profile");
  const std::string cmd = absl::StrCat(
      "HOME=", profile, " timeout 120 chromium --headless --no-sandbox --disable-gpu ",
      "--disable-dev-shm-usage --no-first-run --hide-scrollbars --user-data-dir=", profile,
      " --window-size=", kChromiumWidth, ",", kChromiumHeight,
      " --virtual-time-budget=10000 ", mode, " '", url, "' 2>", profile, "/stderr");
  FILE* out = popen(cmd.c_str(), "r");
  if (out == nullptr) return "";
  std::string text;
  char buf[65536];
  for (size_t n; (n = fread(buf, 1, sizeof buf, out)) > 0;) text.append(buf, n);
  const int status = pclose(out);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "chromium (tools/setup.sh installs it): " << cmd << "\n"
      << ReadFileToString(profile + "/stderr").value_or("");
  return text;
}

}  // namespace argsdump
