#include "tools/cli_flags.h"

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace argsdump {

std::string CheckCommandLineFlags(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-' || arg == "-") continue;  // not a flag
    absl::string_view body = arg;
    body.remove_prefix(arg[1] == '-' ? 2 : 1);
    const size_t eq = body.find('=');
    const absl::string_view name = body.substr(0, eq);
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    bool negated = false;
    if (flag == nullptr && absl::StartsWith(name, "no")) {
      flag = absl::FindCommandLineFlag(name.substr(2));
      negated = flag != nullptr && flag->IsOfType<bool>();
      if (!negated) flag = nullptr;
    }
    if (flag == nullptr) return absl::StrCat(arg, ": no such flag (--help lists them)");
    if (negated) {
      if (eq != absl::string_view::npos) return absl::StrCat(arg, ": --no", name.substr(2), " takes no value");
      continue;
    }
    std::string value;
    if (eq != absl::string_view::npos) {
      value = std::string(body.substr(eq + 1));
    } else if (flag->IsOfType<bool>()) {
      continue;  // --flag: true
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return absl::StrCat(arg, " needs a value");
    }
    // Parsed into a copy of the flag's state: the real parse comes later.
    std::string error;
    const std::string saved = flag->CurrentValue();
    if (!flag->ParseFrom(value, &error)) {
      return absl::StrCat("--", flag->Name(), ": '", value, "': ", error);
    }
    std::string ignored;
    flag->ParseFrom(saved, &ignored);
  }
  return "";
}

}  // namespace argsdump
