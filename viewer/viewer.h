// dump_viewer's command line as a library (tests call it directly):
//   dump_viewer [DIR | --server HOST:PORT --capture NAME [--auth_token_file F]]
//               [--task/-t HEX] [--stage/-s before|after]
//               [--role/-r input|output|inout] [--arg/-a N] [--func F]
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
// Lists the matching args, one line each. --export writes each as
// <out>/txt/task_<id>_<before|after>_<in|out|inout><n>.txt (text_export.h),
// --npy each tensor as <out>/npy/<same>.npy (npy.h); <out> is --out, else
// the capture directory, else (remote) ./<NAME>. --stats adds min, max,
// mean, abs-max and NaN/+Inf/-Inf/zero counts per tensor.
// --first-nonfinite names the first task (task order) whose selected
// output holds a NaN or an Inf, with its inputs.
// --compare GOLDEN: GOLDEN is another capture directory, capture:NAME on
// the same --server (args matched by task_id, stage, arg_index, role), or a
// file for the one selected tensor (.npy, or raw little-endian bytes of its
// dtype). Element rule and metrics: compare.h (NumPy isclose defaults).
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

}  // namespace argsdump

#endif  // ARGSDUMP_VIEWER_VIEWER_H_
