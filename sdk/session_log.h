// How a session speaks: every message is one line on stderr in the dump's
// log format ("[argsdump dumper] WARNING: ..."), and the test context it
// reads (TEST_TARGET, TEST_UNDECLARED_OUTPUTS_DIR, ...) comes from the
// environment, where an unset variable reads as empty.
#ifndef ARGSDUMP_SDK_SESSION_LOG_H_
#define ARGSDUMP_SDK_SESSION_LOG_H_

#include <cstdio>
#include <cstdlib>
#include <string>

#include "device/dump_config.h"

namespace argsdump {

inline void PrintDumpLog(DumpLog::Severity severity, const std::string& text) {
  std::fprintf(stderr, "%s\n", FormatDumpLog({severity, text}).c_str());
}

inline std::string EnvOrEmpty(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

}  // namespace argsdump

#endif  // ARGSDUMP_SDK_SESSION_LOG_H_
