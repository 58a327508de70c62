#include "tools/cli_flags.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <set>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace argsdump {
namespace {

using absl::CommandLineFlag;

// absl normalises a flag's file name by dropping leading slashes.
absl::string_view NormalizedFile(absl::string_view file) {
  const size_t start = file.find_first_not_of('/');
  return start == absl::string_view::npos ? "" : file.substr(start);
}

bool IsToolFlag(const CommandLineSpec& spec, const CommandLineFlag& flag) {
  return !flag.IsRetired() && flag.Filename() == NormalizedFile(spec.flags_file);
}

// The spec's flag called `name` (underscores), or null.
CommandLineFlag* FindToolFlag(const CommandLineSpec& spec, absl::string_view name) {
  CommandLineFlag* flag = absl::FindCommandLineFlag(name);
  return flag != nullptr && IsToolFlag(spec, *flag) ? flag : nullptr;
}

// The spec's flags, by name.
std::vector<CommandLineFlag*> ToolFlags(const CommandLineSpec& spec) {
  std::vector<CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (IsToolFlag(spec, *flag)) flags.push_back(flag);
  }
  std::sort(flags.begin(), flags.end(),
            [](const CommandLineFlag* a, const CommandLineFlag* b) { return a->Name() < b->Name(); });
  return flags;
}

std::string Dashed(absl::string_view name) { return absl::StrReplaceAll(name, {{"_", "-"}}); }

bool IsList(const CommandLineFlag& flag) { return flag.IsOfType<std::vector<std::string>>(); }

// Why `value` is not one the flag reads, in words for people.
std::string Expected(const CommandLineFlag& flag, const std::string& absl_error) {
  // absl says "Illegal value '...' specified for flag '...'[; detail]".
  const size_t detail = absl_error.find("'; ");
  if (detail != std::string::npos) return absl_error.substr(detail + 3);
  if (flag.IsOfType<bool>()) return "expected true or false";
  if (flag.IsOfType<int>() || flag.IsOfType<int64_t>() || flag.IsOfType<uint32_t>() ||
      flag.IsOfType<uint64_t>() || flag.IsOfType<int16_t>() || flag.IsOfType<uint16_t>()) {
    return "expected a whole number the flag can hold";
  }
  if (flag.IsOfType<double>() || flag.IsOfType<float>()) return "expected a number";
  return absl_error;
}

// One parse: the state that spans arguments.
class Parser {
 public:
  Parser(const CommandLineSpec& spec, const std::vector<std::string>& args)
      : spec_(spec), args_(args) {}

  absl::StatusOr<CommandLine> Run() {
    for (i_ = 0; i_ < args_.size(); ++i_) {
      const std::string& arg = args_[i_];
      if (arg == "--") {
        line_.positional.insert(line_.positional.end(), args_.begin() + i_ + 1, args_.end());
        break;
      }
      if (arg.size() < 2 || arg[0] != '-') {
        line_.positional.push_back(arg);
        continue;
      }
      if (arg == "--help" || arg == "-h") {
        line_.help = true;
        continue;
      }
      if (absl::Status s = Flag(arg); !s.ok()) return s;
    }
    if (absl::Status s = Quantities(); !s.ok()) return s;
    return std::move(line_);
  }

 private:
  // One "-x[=v]" / "--name[=v]" argument (and its value, when the next
  // argument is that).
  absl::Status Flag(const std::string& arg) {
    const size_t eq = arg.find('=');
    const std::string typed = arg.substr(0, eq);
    const bool has_value = eq != std::string::npos;
    const std::string inline_value = has_value ? arg.substr(eq + 1) : "";
    absl::string_view body = typed;
    body.remove_prefix(typed[1] == '-' ? 2 : 1);
    std::string name = absl::StrReplaceAll(body, {{"-", "_"}});
    if (typed[1] != '-' && body.size() == 1) {
      auto s = spec_.short_names.find(body[0]);
      if (s != spec_.short_names.end()) name = s->second;
    }
    CommandLineFlag* flag = FindToolFlag(spec_, name);
    if (flag == nullptr && absl::StartsWith(name, "no")) {
      absl::string_view positive = absl::string_view(name).substr(2);
      if (absl::StartsWith(positive, "_")) positive.remove_prefix(1);
      CommandLineFlag* negated = FindToolFlag(spec_, positive);
      if (negated != nullptr && negated->IsOfType<bool>()) {
        if (has_value) return Bad(absl::StrCat(arg, ": ", typed, " takes no value"));
        Note(*negated, typed);
        return Set(*negated, typed, "false");
      }
    }
    if (flag == nullptr) {
      return Bad(absl::StrCat(arg, ": no such flag (unknown flag '", typed, "'; ", spec_.program,
                              " --help lists them)"));
    }
    Note(*flag, typed);
    if (has_value) return Set(*flag, typed, inline_value);
    if (flag->IsOfType<bool>()) return Set(*flag, typed, "true");
    auto bare = spec_.bare_values.find(std::string(flag->Name()));
    if (bare != spec_.bare_values.end()) {
      std::string ignored;
      if (i_ + 1 < args_.size() && args_[i_ + 1].rfind("-", 0) != 0 &&
          flag->ParseFrom(args_[i_ + 1], &ignored)) {
        ++i_;
        return absl::OkStatus();
      }
      return Set(*flag, typed, bare->second);
    }
    if (i_ + 1 >= args_.size()) return Bad(absl::StrCat(typed, " needs a value"));
    return Set(*flag, typed, args_[++i_]);
  }

  // Every quantity flag's text (as given, or its default) through the one
  // parser.
  absl::Status Quantities() {
    for (const auto& [name, quantity] : spec_.quantities) {
      CommandLineFlag* flag = FindToolFlag(spec_, name);
      if (flag == nullptr || !flag->IsOfType<std::string>()) {
        return absl::InternalError(absl::StrCat(spec_.program, ": quantity flag ", name,
                                                " is not a string flag of ", spec_.flags_file));
      }
      const std::string text = *flag->TryGet<std::string>();
      absl::StatusOr<int64_t> value = ParseQuantity(text, quantity);
      if (!value.ok()) {
        return Bad(absl::StrCat(line_.Spelling(name), ": ", value.status().message()));
      }
      line_.quantities[name] = *value;
    }
    return absl::OkStatus();
  }

  void Note(const CommandLineFlag& flag, const std::string& typed) {
    line_.given[std::string(flag.Name())] = typed;
  }

  absl::Status Set(CommandLineFlag& flag, const std::string& typed, const std::string& value) {
    std::vector<std::string> before;
    const bool append = IsList(flag) && !lists_set_.insert(std::string(flag.Name())).second;
    if (append) before = *flag.TryGet<std::vector<std::string>>();
    std::string error;
    if (!flag.ParseFrom(value, &error)) {
      return Bad(absl::StrCat(typed, ": '", value, "': ", Expected(flag, error)));
    }
    if (append) {
      std::vector<std::string> all = std::move(before);
      const std::vector<std::string> added = *flag.TryGet<std::vector<std::string>>();
      all.insert(all.end(), added.begin(), added.end());
      flag.ParseFrom(absl::StrJoin(all, ","), &error);
    }
    return absl::OkStatus();
  }

  static absl::Status Bad(std::string message) {
    return absl::InvalidArgumentError(std::move(message));
  }

  const CommandLineSpec& spec_;
  const std::vector<std::string>& args_;
  size_t i_ = 0;
  CommandLine line_;
  std::set<std::string> lists_set_;  // list flags given once already
};

// `text` in lines of at most `width` characters, each after `indent`.
std::string Wrapped(absl::string_view text, absl::string_view indent, size_t width) {
  std::string out, line;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      absl::StrAppend(&out, indent, line, "\n");
      line.clear();
    }
    absl::StrAppend(&line, line.empty() ? "" : " ", word);
  }
  if (!line.empty()) absl::StrAppend(&out, indent, line, "\n");
  return out;
}

}  // namespace

std::string CommandLine::Spelling(absl::string_view name) const {
  auto it = given.find(std::string(name));
  return it != given.end() ? it->second : absl::StrCat("--", Dashed(name));
}

int64_t CommandLine::Quantity(absl::string_view name) const {
  auto it = quantities.find(std::string(name));
  if (it == quantities.end()) {
    std::fprintf(stderr, "CommandLine::Quantity: %s is not a quantity flag of the spec\n",
                 std::string(name).c_str());
    std::abort();
  }
  return it->second;
}

absl::StatusOr<CommandLine> ParseCommandLineFlags(const CommandLineSpec& spec,
                                                  const std::vector<std::string>& args) {
  return Parser(spec, args).Run();
}

void ResetCommandLineFlags(const CommandLineSpec& spec) {
  for (CommandLineFlag* flag : ToolFlags(spec)) {
    std::string error;
    const bool reset = flag->ParseFrom(flag->DefaultValue(), &error);
    (void)reset;  // a default always parses (absl checks it at start-up)
  }
}

std::string CommandLineHelp(const CommandLineSpec& spec) {
  std::map<std::string, char> short_of;
  for (const auto& [c, name] : spec.short_names) short_of[name] = c;
  std::string out = absl::StrCat(spec.synopsis, "\n\nFlags (--a-b and --a_b are the same flag; a "
                                                "yes/no flag is --f or --nof):\n");
  for (const CommandLineFlag* flag : ToolFlags(spec)) {
    const std::string name(flag->Name());
    std::string head = "  ";
    if (auto s = short_of.find(name); s != short_of.end()) absl::StrAppend(&head, "-", std::string(1, s->second), ", ");
    auto quantity = spec.quantities.find(name);
    const bool is_quantity = quantity != spec.quantities.end();
    if (flag->IsOfType<bool>()) {
      absl::StrAppend(&head, "--[no]", Dashed(name));
    } else {
      absl::StrAppend(&head, "--", Dashed(name), "=",
                      is_quantity ? QuantityPlaceholder(quantity->second.kind) : "VALUE");
    }
    // A yes/no flag is off unless it says otherwise; an empty default is none.
    const std::string def = flag->DefaultValue();
    if (!def.empty() && def != "false") absl::StrAppend(&head, "  (default: ", def, ")");
    std::string help = flag->Help();
    if (is_quantity) absl::StrAppend(&help, " [range ", DescribeRange(quantity->second), "]");
    absl::StrAppend(&out, head, "\n", Wrapped(help, "      ", 72));
  }
  absl::StrAppend(&out, "  -h, --help\n      this text\n");
  return out;
}

CommandLine ParseMainCommandLine(const CommandLineSpec& spec, int argc, char** argv) {
  absl::StatusOr<CommandLine> line =
      ParseCommandLineFlags(spec, std::vector<std::string>(argv + 1, argv + argc));
  if (!line.ok()) {
    std::fprintf(stderr, "%s: %s\n", spec.program.c_str(),
                 std::string(line.status().message()).c_str());
    std::exit(2);
  }
  if (line->help) {
    std::fputs(CommandLineHelp(spec).c_str(), stdout);
    std::exit(0);
  }
  return *std::move(line);
}

}  // namespace argsdump
