// dump_viewer's command line as a library (tests call it directly):
//   dump_viewer [DIR] [--task/-t HEX] [--stage/-s before|after]
//               [--role/-r input|output|inout] [--arg/-a N] [--func F]
//               [--index/-i N] [--export/-e] [--stats] [--first-nonfinite]
// DIR is a capture directory (.../args_dump) or a folder holding one;
// without it, the newest outputs/*/args_dump under the current folder.
// Lists the matching args, one line each; --export also writes each as
// <dir>/txt/task_<id>_<before|after>_<in|out|inout><n>.txt (text_export.h);
// --stats adds a table of min, max, mean, abs-max and NaN/+Inf/-Inf/zero
// counts per selected tensor; --first-nonfinite names the first task whose
// output holds a NaN or an Inf, with its inputs.
// Returns the exit status: 0, 1
// when nothing matched, 2 for bad arguments or unreadable captures.
#ifndef ARGSDUMP_VIEWER_VIEWER_H_
#define ARGSDUMP_VIEWER_VIEWER_H_

#include <ostream>
#include <string>
#include <vector>

namespace argsdump {

int RunViewer(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace argsdump

#endif  // ARGSDUMP_VIEWER_VIEWER_H_
