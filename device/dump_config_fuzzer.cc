// libFuzzer target: any bytes as a --dump-config file,
// resolved with an empty API and environment entry. A bad file or value is
// a WARNING and a fallback, never a crash; what comes out is a valid
// configuration (level 0..3, steps parsed). A token file item names any
// path (/dev/zero, a folder, /proc files): read as the tools read it,
// refused without a hang or an unbounded read.
//   bazel build --config=fuzz //device:dump_config_fuzzer   (tools/fuzz.sh)
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "device/dump_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<argsdump::DumpLog> logs;
  const argsdump::DumpConfigEntry file =
      argsdump::DumpConfigFromText(text, "config file fuzz.json", &logs);
  const argsdump::DumpConfig c = argsdump::ResolveDumpConfig({}, {}, file, &logs);
  if (c.level < 0 || c.level > 3) std::abort();
  (void)c.Describe();
  for (const argsdump::DumpLog& l : logs) (void)argsdump::FormatDumpLog(l);
  // The same text as an environment: every ARGSDUMP_* item gets it.
  std::map<std::string, std::string> env;
  for (const char* name : {"ARGSDUMP_LEVEL", "ARGSDUMP_MODE", "ARGSDUMP_FUNCS", "ARGSDUMP_STEPS",
                           "ARGSDUMP_STATS", "ARGSDUMP_OVERFLOW", "ARGSDUMP_CAPTURE_SERVER",
                           "ARGSDUMP_LABELS", "ARGSDUMP_AUTH_TOKEN_FILE", "ARGSDUMP_VERBOSE"}) {
    env[name] = text.substr(0, 256);
  }
  const argsdump::DumpConfigEntry from_env = argsdump::DumpConfigFromEnvironment(env, &logs);
  const argsdump::DumpConfig e = argsdump::ResolveDumpConfig({}, from_env, file, &logs);
  if (e.level < 0 || e.level > 3) std::abort();
  return 0;
}
