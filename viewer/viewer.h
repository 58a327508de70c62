// dump_viewer's command line as a library (tests call it directly):
//   dump_viewer [DIR | --server HOST:PORT --capture NAME [--auth_token_file F]]
//               [--task/-t HEX] [--stage/-s before|after]
//               [--role/-r input|output|inout] [--arg/-a N]
//               [--func NAME|ID|-1] [--func-type TYPE]
//               [--kind tensor|scalar] [--dtype DTYPE]
//               [--step N] [--overflow] [--nonfinite] [--index/-i N]
//               [--export/-e] [--npy] [--stats] [--out DIR]
//               [--first-nonfinite] [--[no]progress]
//               [--compare GOLDEN [--atol A] [--rtol R]]
//   dump_viewer --server HOST:PORT --captures [--label k=v ...]
//   dump_viewer --help
// Flags are tools/cli_flags.h's (--a-b and --a_b alike); viewer_options.h
// turns them into ViewerOptions.
// DIR is a capture directory (.../args_dump) or a folder holding one;
// without it (and without --server), the newest outputs/*/args_dump under
// the current folder. --server/--capture read a capture service instead,
// live or finished, fetching only the payloads a command needs.
//
// Lists the matching args, one line each, then (a capture with a kernel
// table) "kernels:" and a line per kernel of the listed args: its func
// id, name, type and signature. --func/--func-type names are resolved
// against that table; one it does not have is exit 2 naming the flag and
// the kernels it has. A capture whose device process
// died (its device_crash) opens with "device crash: SIGSEGV at
// 0x0 (task ..., func ..., worker 2, thread 1, step 0); 3 tasks in
// flight" and its description, and its lines end with "[crashed task]"
// (the task whose kernel raised the signal) or "[in-flight]" (another task
// that was running, or an in-flight snapshot). --export writes each as
// <out>/txt/task_<id>_<before|after>_<in|out|inout><n>.txt (text_export.h:
// what the reference viewer writes; "Saved: <path>" per file, then
// "Exported N arg(s) to <out>/txt"); --index N always exports entry N;
// --npy each tensor as <out>/npy/task_<16 hex digits>_...npy (npy.h); <out> is --out, else
// the capture directory, else (a zip) <the zip's folder>/<its capture folder>, else
// (remote) ./<NAME>. --stats adds min, max,
// mean, abs-max and NaN/+Inf/-Inf/zero counts per tensor.
// --first-nonfinite names the first task (task order) whose selected
// output holds a NaN or an Inf, with its inputs.
// --compare GOLDEN: GOLDEN is another capture directory, capture:NAME on
// the same --server (args matched by task_id, stage, arg_index, role), or a
// file for the one selected tensor (.npy, or raw little-endian bytes of its
// dtype). Element rule and metrics: compare.h (NumPy isclose defaults).
//
// Exports and --compare show progress on stderr (args, bytes, rates; at
// most a few lines a second) once they take more than a moment, by default
// only on a terminal; --progress / --noprogress force it on / off. Never on
// stdout.
//
// Returns the exit status: 0; 1 when nothing matched or --compare found a
// difference; 2 for bad arguments, unreadable captures or files, or a
// service that refuses.
#ifndef ARGSDUMP_VIEWER_VIEWER_H_
#define ARGSDUMP_VIEWER_VIEWER_H_

#include <ostream>
#include <string>
#include <vector>

namespace argsdump {

int RunViewer(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// Which of `out` and `err` are terminals (main asks isatty). Progress goes
// to `err`, by default only when it is one; with `out` one too, the
// progress line is erased before each line of output.
struct ViewerTerminals {
  bool out = false;
  bool err = false;
};
int RunViewer(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
              ViewerTerminals terminals);

}  // namespace argsdump

#endif  // ARGSDUMP_VIEWER_VIEWER_H_
