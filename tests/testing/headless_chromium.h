// Web page tests: one headless Chromium run over a URL, with a profile of
// its own, bounded by `timeout`; virtual time runs until the page is idle
// (within a budget), so the page's calls to the server are answered first.
#ifndef ARGSDUMP_TESTS_TESTING_HEADLESS_CHROMIUM_H_
#define ARGSDUMP_TESTS_TESTING_HEADLESS_CHROMIUM_H_

#include <string>

namespace argsdump {

inline constexpr int kChromiumWidth = 1400, kChromiumHeight = 1000;

// `mode` is "--dump-dom" (the DOM on stdout, returned) or
// "--screenshot=<file>". A Chromium that does not exit 0 is a test failure
// naming the command and its stderr.
std::string RunChromium(const std::string& url, const std::string& mode);

}  // namespace argsdump

#endif  // ARGSDUMP_TESTS_TESTING_HEADLESS_CHROMIUM_H_
