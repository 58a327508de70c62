// The files users name, as the three binaries read them at startup, run as
// real processes: token files whose token could never pass as an HTTP
// header or gRPC metadata (a CR, NUL, a byte >= 0x80, a space, a tab, too
// long, empty) and files that are not files (a FIFO with no writer,
// /dev/zero, a directory, a socket). capture_server, sim_run and
// dump_viewer --server each exit 2 naming the flag and the byte or the
// file's type: never an abort inside gRPC, a bad_alloc or a hang. A dump
// config or ARGSDUMP_* entry naming such a file is a WARNING, and the run
// goes on without it; a workload file is exit 2.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "tests/process_fixtures.h"
#include "tests/testing/child_process.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

constexpr auto kBound = std::chrono::seconds(60);  // a hang guard only

std::string Runfile(const std::string& path) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return absl::StrCat(srcdir ? srcdir : ".", "/argsdump/", path);
}

struct Ended {
  int status = -1;  // waitpid's
  std::string err;
};

// Runs argv to its end (or kills it past the hang guard: status -1).
Ended RunToEnd(const std::vector<std::string>& argv) {
  Ended e;
  auto p = ChildProcess::Start(argv, TempPath("cli_stdout"));
  if (!p.ok()) {
    ADD_FAILURE() << p.status();
    return e;
  }
  const std::optional<int> status = (*p)->Wait(kBound);
  e.status = status.value_or(-1);
  e.err = (*p)->stderr_text();
  return e;
}

// "exited 2", "killed by signal 6", "still running after 60 s".
std::string Describe(int status) {
  if (status == -1) return "still running after the hang guard";
  if (WIFEXITED(status)) return absl::StrCat("exited ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return absl::StrCat("killed by signal ", WTERMSIG(status));
  return absl::StrCat("status ", status);
}

// A token file, or a file that is none, and what the error says of it.
struct BadFile {
  std::string name;
  std::string path;
  std::string why;
};

class SecretFilesCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Socket paths must fit in sockaddr_un: a short folder of our own.
    char dir[] = "/tmp/argsdump_cli_XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    short_dir_ = new std::string(dir);
  }
  static void TearDownTestSuite() {
    for (const char* name : {"/fifo", "/socket"}) ::unlink((*short_dir_ + name).c_str());
    ::rmdir(short_dir_->c_str());
    delete short_dir_;
  }

  void SetUp() override {
    // The longest token, every allowed byte in it, with a Windows line
    // end: it passes as gRPC metadata.
    std::string token;
    for (size_t i = 0; token.size() < 4096; ++i) token += static_cast<char>(0x21 + i % 94);
    good_token_ = TempPath("good_token");
    std::ofstream(good_token_, std::ios::binary) << token << "\r\n";
    server_.Start(FreshTempDir("root"), "127.0.0.1:0", {"--auth_token_file=" + good_token_});
  }
  void TearDown() override {
    server_.Signal(SIGTERM);
    server_.Wait();
  }

  std::string Written(const std::string& name, const std::string& bytes) {
    const std::string path = TempPath(name);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    return path;
  }

  // Token files no client could send, with the byte the error names.
  std::vector<BadFile> BadTokens() {
    const std::string why = "; a token is printable ASCII without spaces (0x21..0x7e)";
    const std::string too_long =
        "its first line is longer than 4096 bytes (byte 4096 is still in it)";
    return {
        {"cr", Written("cr", "s3c\rret\n"), "byte 3 is 0x0d (a carriage return)" + why},
        {"nul", Written("nul", std::string("s3cret\0x\n", 9)), "byte 6 is 0x00 (NUL)" + why},
        {"high", Written("high", "s3cr\x80t\n"), "byte 4 is 0x80 (not ASCII)" + why},
        {"trailing_space", Written("trailing_space", "s3cret \n"),
         "byte 6 is 0x20 (a space)" + why},
        {"tab", Written("tab", "s3\tcret\n"), "byte 2 is 0x09 (a tab)" + why},
        {"8KiB+1", Written("long", std::string(8 * 1024 + 1, 'k') + "\n"), too_long},
        {"empty", Written("empty", ""), "it is empty"},
        {"newline", Written("newline", "\n"), "its first line is empty"},
    };
  }

  // Paths that are not regular files.
  std::vector<BadFile> NotFiles() {
    const std::string fifo = *short_dir_ + "/fifo";
    if (::access(fifo.c_str(), F_OK) != 0) {
      EXPECT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    }
    const std::string socket_path = *short_dir_ + "/socket";
    if (::access(socket_path.c_str(), F_OK) != 0) {
      const int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
      sockaddr_un addr{};
      addr.sun_family = AF_UNIX;
      std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
      EXPECT_EQ(::bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
      ::close(sock);  // the socket file stays
    }
    return {
        {"fifo", fifo, fifo + ": is a FIFO, not a regular file"},
        {"dev_zero", "/dev/zero", "/dev/zero: is a character device, not a regular file"},
        {"directory", TempPath(""), TempPath("") + ": is a directory, not a regular file"},
        {"socket", socket_path, socket_path + ": is a socket, not a regular file"},
    };
  }

  std::vector<BadFile> AllBadTokenFiles() {
    std::vector<BadFile> all = BadTokens();
    for (BadFile& f : NotFiles()) all.push_back(f);
    return all;
  }

  // Exit 2 with stderr naming the flag and why; never a signal or a hang.
  static void ExpectRefused(const Ended& e, const std::string& says) {
    EXPECT_TRUE(WIFEXITED(e.status) && WEXITSTATUS(e.status) == 2)
        << Describe(e.status) << "\n" << e.err;
    EXPECT_NE(e.err.find(says), std::string::npos) << "want: " << says << "\ngot: " << e.err;
  }

  static std::string* short_dir_;
  ServerProcess server_;
  std::string good_token_;
};

std::string* SecretFilesCliTest::short_dir_ = nullptr;

TEST_F(SecretFilesCliTest, CaptureServerRefusesATokenFileThatIsNoToken) {
  for (const BadFile& f : AllBadTokenFiles()) {
    SCOPED_TRACE(f.name);
    const Ended e = RunToEnd({ServerBinary(), "--listen=127.0.0.1:0", "--root=" + FreshTempDir("r"),
                         "--auth_token_file=" + f.path});
    ExpectRefused(e, "capture_server: --auth_token_file: cannot read a token from " + f.path);
    ExpectRefused(e, f.why);
  }
}

// A token file that is no token is a dump setting gone wrong: sim_run warns
// naming the file and why (the byte, the kind of file), never sends it,
// and the run goes on; the service (which wants a token) refuses the
// stream, so the capture is kept locally, as the warning says.
TEST_F(SecretFilesCliTest, SimRunWarnsOfATokenFileThatIsNoTokenAndKeepsTheCapture) {
  for (const BadFile& f : AllBadTokenFiles()) {
    SCOPED_TRACE(f.name);
    const std::string prefix = FreshTempDir("sim_" + f.name);
    const Ended e = RunToEnd({Runfile("apps/sim_run/sim_run"), "--dump-args=2", "--output-prefix=" + prefix,
                         "--capture-server=" + server_.target(), "--auth_token_file=" + f.path});
    EXPECT_TRUE(WIFEXITED(e.status) && WEXITSTATUS(e.status) == 0)
        << Describe(e.status) << "\n" << e.err;
    EXPECT_NE(e.err.find("WARNING: the command line: auth_token_file='" + f.path +
                         "' is not valid: "),
              std::string::npos)
        << e.err;
    EXPECT_NE(e.err.find(f.why), std::string::npos) << "want: " << f.why << "\ngot: " << e.err;
    struct stat st;
    EXPECT_EQ(::stat((prefix + "/args_dump/args_dump.json").c_str(), &st), 0)
        << "no local capture in " << prefix << "\n" << e.err;
  }
  // The good token streams (the server above wants it).
  const Ended good =
      RunToEnd({Runfile("apps/sim_run/sim_run"), "--dump-args=2", "--capture-server=" + server_.target(),
           "--capture-name=good", "--auth_token_file=" + good_token_});
  EXPECT_TRUE(WIFEXITED(good.status) && WEXITSTATUS(good.status) == 0)
      << Describe(good.status) << "\n" << good.err;
}

TEST_F(SecretFilesCliTest, DumpViewerRefusesATokenFileThatIsNoToken) {
  // A capture to ask for, streamed with the good token.
  const Ended streamed =
      RunToEnd({Runfile("apps/sim_run/sim_run"), "--dump-args=2", "--capture-server=" + server_.target(),
           "--capture-name=there", "--auth_token_file=" + good_token_});
  ASSERT_TRUE(WIFEXITED(streamed.status) && WEXITSTATUS(streamed.status) == 0) << streamed.err;
  for (const BadFile& f : AllBadTokenFiles()) {
    SCOPED_TRACE(f.name);
    for (const std::vector<std::string>& command :
         {std::vector<std::string>{"--capture", "there"}, std::vector<std::string>{"--captures"}}) {
      std::vector<std::string> argv = {Runfile("viewer/dump_viewer"), "--server",
                                       server_.target(), "--auth_token_file", f.path};
      argv.insert(argv.end(), command.begin(), command.end());
      const Ended e = RunToEnd(argv);
      ExpectRefused(e, "--auth_token_file: cannot read a token from " + f.path);
      ExpectRefused(e, f.why);
    }
  }
  const Ended good = RunToEnd({Runfile("viewer/dump_viewer"), "--server", server_.target(),
                          "--auth_token_file", good_token_, "--capture", "there"});
  EXPECT_TRUE(WIFEXITED(good.status) && WEXITSTATUS(good.status) == 0)
      << Describe(good.status) << "\n" << good.err;
}

// A workload "file" that is none: exit 2 saying what it is.
TEST_F(SecretFilesCliTest, SimRunRefusesAWorkloadThatIsNoFile) {
  for (const BadFile& f : NotFiles()) {
    SCOPED_TRACE(f.name);
    const Ended e = RunToEnd({Runfile("apps/sim_run/sim_run"), "--workload=" + f.path});
    ExpectRefused(e, "sim_run: workload file " + f.why);
  }
}

// The dump configuration's entries never stop a run (a mistake there is a
// WARNING and a fallback): a --dump-config, an ARGSDUMP_AUTH_TOKEN_FILE or
// a config file's auth_token_file naming such a file is a WARNING saying
// what it is, and the run captures with what is left - promptly, whatever
// the file is.
TEST_F(SecretFilesCliTest, DumpConfigEntriesNamingNoFileAreWarnings) {
  for (const BadFile& f : NotFiles()) {
    SCOPED_TRACE(f.name);
    const std::string prefix = FreshTempDir("cfg_" + f.name);
    Ended e = RunToEnd({Runfile("apps/sim_run/sim_run"), "--dump-args=2", "--steps=2",
                   "--output-prefix=" + prefix, "--dump-config=" + f.path});
    EXPECT_TRUE(WIFEXITED(e.status) && WEXITSTATUS(e.status) == 0)
        << Describe(e.status) << "\n" << e.err;
    const std::string file_says =
        "WARNING: config file " + f.path + ": cannot read it (" +
        f.why.substr(f.path.size() + 2) + "); no setting is taken from it";
    EXPECT_NE(e.err.find(file_says), std::string::npos) << e.err;
    EXPECT_TRUE(std::ifstream(prefix + "/args_dump/args_dump.json").good()) << e.err;

    const std::string env_prefix = FreshTempDir("env_" + f.name);
    e = RunToEnd({"/usr/bin/env", "ARGSDUMP_AUTH_TOKEN_FILE=" + f.path, Runfile("apps/sim_run/sim_run"),
             "--dump-args=2", "--output-prefix=" + env_prefix});
    EXPECT_TRUE(WIFEXITED(e.status) && WEXITSTATUS(e.status) == 0)
        << Describe(e.status) << "\n" << e.err;
    EXPECT_NE(e.err.find("WARNING: environment: ARGSDUMP_AUTH_TOKEN_FILE='" + f.path +
                         "' is not valid: cannot read a token from " + f.why),
              std::string::npos)
        << e.err;

    const std::string config = Written("config_" + f.name + ".json",
                                       "{\"level\": 2, \"auth_token_file\": \"" + f.path + "\"}");
    const std::string config_prefix = FreshTempDir("cfgtok_" + f.name);
    e = RunToEnd({Runfile("apps/sim_run/sim_run"), "--output-prefix=" + config_prefix,
             "--dump-config=" + config});
    EXPECT_TRUE(WIFEXITED(e.status) && WEXITSTATUS(e.status) == 0)
        << Describe(e.status) << "\n" << e.err;
    EXPECT_NE(e.err.find("WARNING: config file " + config + ": \"auth_token_file\": \"" + f.path +
                         "\" is not valid: cannot read a token from " + f.why),
              std::string::npos)
        << e.err;
    EXPECT_TRUE(std::ifstream(config_prefix + "/args_dump/args_dump.json").good()) << e.err;
  }
}

}  // namespace
}  // namespace argsdump
