// Whole-file reads and writes, folder creation and the bearer-token file
// every tool reads, in one place. Errors are absl::Status values whose
// message names the path and the system's reason; nothing here aborts.
// Depends on nothing of ours: every package may use it.
#ifndef ARGSDUMP_BASE_FILES_H_
#define ARGSDUMP_BASE_FILES_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace argsdump {

// The whole file. NotFound when it cannot be opened,
// FailedPrecondition for a directory, DataLoss when a read fails; the
// message is "<path>: <why>".
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// Replaces the file with `bytes` (created 0644 if need be). Unavailable
// naming the path when it cannot be opened or written.
absl::Status WriteStringToFile(const std::string& path, absl::string_view bytes);

// `path` and every missing folder above it (mode 0755), like `mkdir -p`.
// Unavailable naming the part that could not be made, or a path that
// exists and is not a folder.
absl::Status CreateDirectories(const std::string& path);

// Whether `path` names a directory (following symlinks).
bool IsDirectory(const std::string& path);

// The bearer token a --auth_token_file names: the file's first line,
// which must not be empty. InvalidArgument "cannot read a token from
// <path>: <why>" otherwise.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

}  // namespace argsdump

#endif  // ARGSDUMP_BASE_FILES_H_
