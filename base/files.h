// Whole-file reads and writes, folder creation and the bearer-token file
// every tool reads, in one place. Errors are absl::Status values whose
// message names the path and the system's reason; nothing here aborts,
// blocks on a FIFO or reads without a bound. Every file a user names
// (tokens, configs, workloads, certificates, golden files) is read here.
// Depends on nothing of ours: every package may use it.
#ifndef ARGSDUMP_BASE_FILES_H_
#define ARGSDUMP_BASE_FILES_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace argsdump {

// What ReadFileToString reads at most unless told otherwise: 64 MiB, far
// above any config, workload, token or certificate file, far below what
// would hurt a machine.
inline constexpr uint64_t kDefaultMaxFileBytes = uint64_t{64} << 20;

// The bound for a file read whole by design, however long it is (a
// capture's journal or manifest): still a regular file only.
inline constexpr uint64_t kUnboundedFileBytes = UINT64_MAX;

// The whole of the regular file at `path`, at most `max_bytes` bytes. The
// file is opened without blocking (a FIFO with no writer is refused, not
// waited on) and its type is checked on the open descriptor; at most
// max_bytes + 1 bytes are ever read, so a file that grows while it is read
// cannot take more memory. Errors, each "<path>: <why>":
//   NotFound            it cannot be opened ("cannot open: <errno text>");
//   FailedPrecondition  it is not a regular file ("is a directory", "a
//                       FIFO", "a character device", "a block device", "a
//                       socket", "not a regular file"), or it is larger
//                       than max_bytes ("is N bytes, more than the M bytes
//                       read from one file");
//   DataLoss            a read fails.
// Files under /proc that report size 0 are read to their end, as others.
absl::StatusOr<std::string> ReadFileToString(const std::string& path,
                                             uint64_t max_bytes = kDefaultMaxFileBytes);

// `path` opened for reading, if it is a regular file: the descriptor
// (close-on-exec; the caller closes it). For readers that stream a file or
// read parts of it; ReadFileToString opens with it. Opened without
// blocking and checked on the descriptor, with ReadFileToString's errors
// (NotFound, FailedPrecondition naming what the path is instead).
absl::StatusOr<int> OpenRegularFile(const std::string& path);

// Replaces the file with `bytes` (created 0644 if need be). Unavailable
// naming the path when it cannot be opened or written.
absl::Status WriteStringToFile(const std::string& path, absl::string_view bytes);

// `path` and every missing folder above it (mode 0755), like `mkdir -p`.
// Unavailable naming the part that could not be made, or a path that
// exists and is not a folder.
absl::Status CreateDirectories(const std::string& path);

// Whether `path` names a directory (following symlinks).
bool IsDirectory(const std::string& path);

// The longest bearer token: it travels as "authorization: Bearer <token>",
// and 4096 bytes pass as an HTTP header (httplib, browsers, proxies take
// 8 KiB per line) and as gRPC metadata everywhere.
inline constexpr size_t kMaxTokenBytes = 4096;

// The most a token file may hold (the token's line and whatever follows).
inline constexpr uint64_t kMaxTokenFileBytes = 64 << 10;

// The bearer token in a token file's bytes: its first line, which ends at
// the first "\n" or "\r\n" (or the end of the file); what follows that
// line is not read. The token is 1..kMaxTokenBytes bytes of printable
// ASCII without spaces (0x21..0x7E): what an HTTP header and gRPC metadata
// carry unchanged. Anything else - an empty first line, a space, a tab, a
// carriage return not right before the "\n", NUL, a byte >= 0x80, a line
// over the limit - is InvalidArgument naming the byte's offset in the file
// (from 0), its value and why, e.g. "byte 6 is 0x0d (a carriage return);
// a token is printable ASCII without spaces (0x21..0x7e)".
absl::StatusOr<std::string> TokenFromFileBytes(absl::string_view bytes);

// The bearer token a --auth_token_file names (TokenFromFileBytes of the
// file, read as ReadFileToString does, at most kMaxTokenFileBytes).
// InvalidArgument "cannot read a token from <path>: <why>" otherwise.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

}  // namespace argsdump

#endif  // ARGSDUMP_BASE_FILES_H_
