#include "viewer/viewer.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <cstdint>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "viewer/manifest_reader.h"
#include "viewer/text_export.h"

namespace argsdump {
namespace {

bool IsDir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool IsFile(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The newest outputs/*/args_dump (by the manifest's modification time).
std::optional<std::string> NewestCapture(const std::string& outputs) {
  DIR* d = ::opendir(outputs.c_str());
  if (d == nullptr) return std::nullopt;
  std::optional<std::string> best;
  struct timespec best_time = {};
  while (struct dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string dir = outputs + "/" + name + "/args_dump";
    struct stat st;
    if (::stat((dir + "/args_dump.json").c_str(), &st) != 0) continue;
    if (!best || st.st_mtim.tv_sec > best_time.tv_sec ||
        (st.st_mtim.tv_sec == best_time.tv_sec && st.st_mtim.tv_nsec > best_time.tv_nsec)) {
      best = dir;
      best_time = st.st_mtim;
    }
  }
  ::closedir(d);
  return best;
}

struct Filters {
  std::optional<uint64_t> task;
  std::string stage;  // before_dispatch / after_completion
  std::string role;
  std::optional<uint32_t> arg;
  std::optional<int64_t> func;
  std::optional<uint64_t> index;
  bool export_text = false;
  bool stats = false;
  bool first_nonfinite = false;

  bool Matches(const ManifestEntry& e) const {
    if (task && e.task_id != *task) return false;
    if (!stage.empty() && e.stage != stage) return false;
    if (!role.empty() && e.role != role) return false;
    if (arg && e.arg_index != *arg) return false;
    if (index && e.index != *index) return false;
    if (func && std::find(e.func_ids.begin(), e.func_ids.end(), *func) == e.func_ids.end()) {
      return false;
    }
    return true;
  }
  bool any() const { return task || !stage.empty() || !role.empty() || arg || func || index; }
};

std::string Hex(uint64_t v) { return absl::StrFormat("0x%016x", v); }

std::string Dims(const std::vector<uint64_t>& v) { return absl::StrCat("[", absl::StrJoin(v, ","), "]"); }

std::string Flags(const ManifestEntry& e) {
  std::vector<std::string> f;
  if (e.truncated) f.push_back("truncated");
  if (e.overwritten) f.push_back("overwritten");
  if (e.arg_index_ambiguous) f.push_back("ambiguous");
  if (e.in_flight_snapshot) f.push_back("in-flight");
  if (e.kind == "tensor" && e.bin_size == 0) f.push_back("no-data");
  return absl::StrJoin(f, ",");
}

// Parses the command line; on error writes it to err and returns false.
bool ParseArgs(const std::vector<std::string>& args, std::string* dir, Filters* f,
               std::ostream& err) {
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i], value;
    const bool is_flag = flag.size() > 1 && flag[0] == '-';
    if (flag == "--export" || flag == "-e") {
      f->export_text = true;
      continue;
    }
    if (flag == "--stats") {
      f->stats = true;
      continue;
    }
    if (flag == "--first-nonfinite") {
      f->first_nonfinite = true;
      continue;
    }
    if (!is_flag) {
      if (!dir->empty()) {
        err << "dump_viewer: one capture directory at a time (got '" << *dir << "' and '"
            << flag << "')\n";
        return false;
      }
      *dir = flag;
      continue;
    }
    const size_t eq = flag.find('=');
    if (eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      err << "dump_viewer: " << flag << " needs a value\n";
      return false;
    }
    auto bad = [&](const std::string& expected) {
      err << "dump_viewer: " << flag << " '" << value << "': expected " << expected << "\n";
      return false;
    };
    if (flag == "--task" || flag == "-t") {
      absl::string_view hex = value;
      if (hex.size() > 2 && hex[0] == '0' && (hex[1] == 'x' || hex[1] == 'X')) hex.remove_prefix(2);
      uint64_t v;
      if (hex.empty() || hex.size() > 16 || !absl::SimpleHexAtoi(hex, &v)) {
        return bad("a hex task id such as 0x0000000100000003 or 100000003");
      }
      f->task = v;
    } else if (flag == "--stage" || flag == "-s") {
      if (value == "before" || value == "before_dispatch") {
        f->stage = "before_dispatch";
      } else if (value == "after" || value == "after_completion") {
        f->stage = "after_completion";
      } else {
        return bad("before or after");
      }
    } else if (flag == "--role" || flag == "-r") {
      if (value != "input" && value != "output" && value != "inout") {
        return bad("input, output or inout");
      }
      f->role = value;
    } else if (flag == "--arg" || flag == "-a") {
      uint32_t v;
      if (!absl::SimpleAtoi(value, &v)) return bad("an arg index (0, 1, ...)");
      f->arg = v;
    } else if (flag == "--func") {
      int64_t v;
      if (!absl::SimpleAtoi(value, &v)) return bad("a func id");
      f->func = v;
    } else if (flag == "--index" || flag == "-i") {
      uint64_t v;
      if (!absl::SimpleAtoi(value, &v)) return bad("a manifest index (0, 1, ...)");
      f->index = v;
    } else {
      err << "dump_viewer: unknown flag '" << flag
          << "' (flags: --task/-t, --stage/-s, --role/-r, --arg/-a, --func, --index/-i, "
             "--export/-e, --stats, --first-nonfinite)\n";
      return false;
    }
  }
  return true;
}

// Reads an entry's payload bytes from args.bin; false (err written) when
// the file does not hold them.
bool ReadPayload(std::ifstream& bin, const std::string& path, const ManifestEntry& e,
                 std::string* bytes, std::ostream& err) {
  bytes->assign(e.bin_size, '\0');
  if (e.bin_size == 0) return true;
  bin.clear();
  bin.seekg(static_cast<std::streamoff>(e.bin_offset));
  bin.read(&(*bytes)[0], static_cast<std::streamsize>(e.bin_size));
  if (!bin || static_cast<uint64_t>(bin.gcount()) != e.bin_size) {
    err << "dump_viewer: " << path << ": entry " << e.index << " needs bytes " << e.bin_offset
        << ".." << e.bin_offset + e.bin_size << ", the file ends before\n";
    return false;
  }
  return true;
}

std::string StatsLine(const ManifestEntry& e, const TensorStats& st) {
  return absl::StrFormat("index %d  task %s  %s %s arg %d  %s %s: %d NaN, %d +Inf, %d -Inf of %d",
                         e.index, Hex(e.task_id), e.stage, e.role, e.arg_index, e.dtype,
                         Dims(e.shape), st.nan, st.pos_inf, st.neg_inf, st.count);
}

// The first task, in manifest (task) order, with an output holding a NaN or
// an Inf, and the inputs captured for it before dispatch.
int FirstNonFinite(const std::string& dir, ManifestReader& reader, std::ostream& out,
                   std::ostream& err) {
  const std::string bin_path = dir + "/args.bin";
  std::ifstream bin(bin_path, std::ios::binary);
  std::vector<ManifestEntry> inputs;  // the current task's before_dispatch args
  uint64_t current_task = 0;
  bool found = false, failed = false;
  absl::Status s = reader.ForEach([&](const ManifestEntry& e) {
    if (inputs.empty() || e.task_id != current_task) {
      inputs.clear();
      current_task = e.task_id;
    }
    if (e.stage == "before_dispatch") {
      inputs.push_back(e);
      return true;
    }
    if (e.kind != "tensor" || e.role == "input" || e.bin_size == 0) return true;
    std::string bytes;
    if (!ReadPayload(bin, bin_path, e, &bytes, err)) {
      failed = true;
      return false;
    }
    const TensorStats st = ComputeStats(e, bytes);
    if (st.nan + st.pos_inf + st.neg_inf == 0) return true;
    found = true;
    out << "first non-finite output: " << StatsLine(e, st) << "\n";
    out << "inputs of task " << Hex(e.task_id) << ":\n";
    for (const ManifestEntry& in : inputs) {
      if (in.kind == "scalar") {
        out << absl::StrFormat("  index %d  %s arg %d  scalar %s = %s\n", in.index, in.role,
                               in.arg_index, in.dtype, in.value);
        continue;
      }
      std::string in_bytes;
      if (!ReadPayload(bin, bin_path, in, &in_bytes, err)) {
        failed = true;
        return false;
      }
      out << "  " << StatsLine(in, ComputeStats(in, in_bytes)) << "\n";
    }
    return false;
  });
  if (failed) return 2;
  if (!s.ok()) {
    err << "dump_viewer: " << s.message() << "\n";
    return 2;
  }
  if (!found) out << "no output holds a NaN or an Inf\n";
  return 0;
}

}  // namespace

int RunViewer(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string dir;
  Filters filters;
  if (!ParseArgs(args, &dir, &filters, err)) return 2;
  if (dir.empty()) {
    auto newest = NewestCapture("outputs");
    if (!newest) {
      err << "dump_viewer: no outputs/*/args_dump under this folder; pass a capture directory, "
             "e.g. dump_viewer outputs/<run>/args_dump\n";
      return 2;
    }
    dir = *newest;
    out << "capture: " << dir << " (the newest under outputs/)\n";
  }
  if (IsDir(dir + "/args_dump") && !IsFile(dir + "/args_dump.json")) dir += "/args_dump";
  const std::string manifest = dir + "/args_dump.json";
  auto reader = ManifestReader::Open(manifest);
  if (!reader.ok()) {
    err << "dump_viewer: " << reader.status().message() << "\n";
    return 2;
  }
  if (filters.first_nonfinite) return FirstNonFinite(dir, **reader, out, err);
  out << absl::StrFormat("%7s  %-18s  %-6s  %-6s  %3s  %-6s  %-9s  %-16s  %10s  %s\n", "index",
                         "task_id", "stage", "role", "arg", "kind", "dtype", "shape", "bytes",
                         "flags");
  uint64_t matched = 0;
  std::vector<ManifestEntry> to_export;
  // A few of what exists, to suggest when nothing matched.
  std::set<uint64_t> some_tasks;
  std::set<uint32_t> some_args;
  std::set<int64_t> some_funcs;
  absl::Status s = (*reader)->ForEach([&](const ManifestEntry& e) {
    if (some_tasks.size() < 5) some_tasks.insert(e.task_id);
    if (some_args.size() < 8) some_args.insert(e.arg_index);
    for (int64_t f : e.func_ids) {
      if (some_funcs.size() < 8) some_funcs.insert(f);
    }
    if (!filters.Matches(e)) return true;
    ++matched;
    if (filters.export_text || (filters.stats && e.kind == "tensor")) to_export.push_back(e);
    std::string line = absl::StrFormat(
        "%7d  %-18s  %-6s  %-6s  %3d  %-6s  %-9s  %-16s  %10d  %s", e.index, Hex(e.task_id),
        e.stage == "before_dispatch" ? "before" : "after", e.role, e.arg_index, e.kind, e.dtype,
        e.kind == "scalar" ? "=" + e.value : Dims(e.shape), e.bin_size, Flags(e));
    line.erase(line.find_last_not_of(' ') + 1);
    out << line << "\n";
    return true;
  });
  if (!s.ok()) {
    err << "dump_viewer: " << s.message() << "\n";
    return 2;
  }
  if (matched == 0 && filters.any()) {
    std::vector<std::string> tasks;
    for (uint64_t t : some_tasks) tasks.push_back(Hex(t));
    err << "dump_viewer: no arg matches the filters. Some values in this capture: tasks "
        << absl::StrJoin(tasks, " ") << "; args " << absl::StrJoin(some_args, " ") << "; funcs "
        << absl::StrJoin(some_funcs, " ") << "; stages before, after; roles input, output, "
        << "inout\n";
    return 1;
  }
  out << matched << " args\n";
  // One pass over the selected args: each payload is read once, for the
  // text file and for the stats line alike.
  const ManifestSummary& summary = (*reader)->summary();
  const std::string bin = dir + "/" + (summary.has_bin_file ? summary.bin_file : "args.bin");
  std::ifstream payloads(bin, std::ios::binary);
  const std::string txt = dir + "/txt";
  if (filters.export_text && !to_export.empty()) ::mkdir(txt.c_str(), 0755);
  std::string stats_table;
  for (const ManifestEntry& e : to_export) {
    if (e.bin_size > 0 && !payloads) {
      err << "dump_viewer: " << bin << ": cannot open (entry " << e.index << " has "
          << e.bin_size << " payload bytes)\n";
      return 2;
    }
    std::string bytes;
    if (!ReadPayload(payloads, bin, e, &bytes, err)) return 2;
    if (filters.export_text) {
      const std::string path = txt + "/" + TextFileName(e);
      std::ofstream file(path, std::ios::trunc);
      file << FormatArgText(e, bytes);
      if (!file) {
        err << "dump_viewer: cannot write " << path << "\n";
        return 2;
      }
    }
    if (filters.stats && e.kind == "tensor") {
      const TensorStats st = ComputeStats(e, bytes);
      if (st.finite == 0) {
        stats_table += absl::StrFormat("%7d  %14s  %14s  %14s  %14s  %6d  %6d  %6d  %8d\n",
                                       e.index, "-", "-", "-", "-", st.nan, st.pos_inf,
                                       st.neg_inf, st.zeros);
      } else {
        stats_table += absl::StrFormat("%7d  %14.7g  %14.7g  %14.7g  %14.7g  %6d  %6d  %6d  %8d\n",
                                       e.index, st.min, st.max, st.sum / st.finite, st.abs_max,
                                       st.nan, st.pos_inf, st.neg_inf, st.zeros);
      }
    }
  }
  if (filters.export_text && !to_export.empty()) {
    out << "exported " << to_export.size() << " files to " << txt << "/\n";
  }
  if (filters.stats) {
    out << absl::StrFormat("%7s  %14s  %14s  %14s  %14s  %6s  %6s  %6s  %8s\n", "index", "min",
                           "max", "mean", "abs_max", "nan", "+inf", "-inf", "zeros")
        << stats_table;
  }
  return 0;
}

}  // namespace argsdump
