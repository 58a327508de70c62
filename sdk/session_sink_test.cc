#include "sdk/session_sink.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

struct Fixture {
  DumpConfig config;
  SessionOptions options;
  SessionWiring wiring;
  std::vector<std::string> warnings;

  SinkRequest Request(const std::string& dir) {
    SinkRequest r;
    r.config = &config;
    r.options = &options;
    r.wiring = &wiring;
    r.session_name = "Suite.Case";
    r.prefix = dir;
    r.dump_dir = dir + "/args_dump";
    r.info.set_name("Suite.Case");
    r.info.set_level(static_cast<v1::DumpLevel>(1));
    return r;
  }
  absl::StatusOr<ChosenSink> Choose(const std::string& dir) {
    return ChooseSink(Request(dir), [this](const std::string& w) { warnings.push_back(w); });
  }
};

TEST(ChooseSinkTest, NoServiceIsTheLocalStore) {
  Fixture f;
  auto chosen = f.Choose(FreshTempDir("sink_local"));
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_NE(chosen->local, nullptr);
  EXPECT_EQ(chosen->remote, nullptr);
  EXPECT_EQ(chosen->sink.get(), chosen->local);
  EXPECT_TRUE(chosen->remote_name.empty());
  EXPECT_THAT(f.warnings, SizeIs(0));
}

// A loopback address nothing listens on: a port the system gave this test,
// closed again (the connect timeout bounds the wait for it).
std::string Nobody() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ADD_FAILURE() << "no loopback port";
  }
  ::close(fd);
  return "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
}

TEST(ChooseSinkTest, AServiceThatCannotBeReachedKeepsTheCaptureLocally) {
  Fixture f;
  f.config.capture_server = Nobody();
  f.options.connect_timeout = std::chrono::milliseconds(200);
  const std::string dir = FreshTempDir("sink_unreachable");
  auto chosen = f.Choose(dir);
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_NE(chosen->local, nullptr);
  EXPECT_EQ(chosen->remote, nullptr);
  ASSERT_THAT(f.warnings, SizeIs(1));
  EXPECT_THAT(f.warnings[0], HasSubstr("capture service " + f.config.capture_server));
  EXPECT_THAT(f.warnings[0], HasSubstr("the capture is kept locally in " + dir + "/args_dump"));
}

TEST(ChooseSinkTest, AnUnusableNameIsReplacedOrStrictlyRefused) {
  Fixture f;
  f.config.capture_server = Nobody();
  f.options.connect_timeout = std::chrono::milliseconds(200);
  f.wiring.capture_name = "bad name/with slash";
  auto chosen = f.Choose(FreshTempDir("sink_name"));
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  ASSERT_THAT(f.warnings, SizeIs(2));
  EXPECT_THAT(f.warnings[0], HasSubstr("capture name 'bad name/with slash' cannot be used"));

  Fixture strict;
  strict.config.capture_server = Nobody();
  strict.wiring.capture_name = "bad name/with slash";
  strict.wiring.strict = true;
  chosen = strict.Choose(FreshTempDir("sink_name_strict"));
  EXPECT_EQ(chosen.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(chosen.status().message(), HasSubstr("capture name 'bad name/with slash'"));
}

}  // namespace
}  // namespace argsdump
