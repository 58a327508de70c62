// Scratch paths: where they are, emptied and made, removed without
// following links out of the tree.
#include "tests/testing/temp_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "gtest/gtest.h"
#include "tests/testing/scoped_env.h"

namespace argsdump {
namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

TEST(TempDirTest, PathsAreBelowTheTestsTmpdir) {
  {
    ScopedEnv tmp("TEST_TMPDIR", "/some/where");
    EXPECT_EQ(TempPath("a/b"), "/some/where/a/b");
  }
  {
    ScopedEnv tmp("TEST_TMPDIR", nullptr);
    EXPECT_EQ(TempPath("x"), "/tmp/x");
  }
  EXPECT_EQ(ProcessTempPath("bench"), TempPath("bench_" + std::to_string(::getpid())));
}

TEST(TempDirTest, FreshIsEmptyAndAbsentIsGone) {
  const std::string dir = FreshTempDir("fresh/deep");
  std::ofstream(dir + "/file") << "x";
  ASSERT_TRUE(Exists(dir + "/file"));
  EXPECT_EQ(FreshTempDir("fresh/deep"), dir);
  EXPECT_TRUE(Exists(dir));
  EXPECT_FALSE(Exists(dir + "/file"));
  EXPECT_EQ(AbsentTempPath("fresh"), TempPath("fresh"));
  EXPECT_FALSE(Exists(TempPath("fresh")));
  RemoveTree(TempPath("never_there"));  // fine
}

TEST(TempDirTest, RemoveTreeDoesNotFollowLinks) {
  const std::string outside = FreshTempDir("outside");
  std::ofstream(outside + "/keep") << "x";
  const std::string tree = FreshTempDir("tree");
  ASSERT_EQ(::symlink(outside.c_str(), (tree + "/link").c_str()), 0);
  RemoveTree(tree);
  EXPECT_FALSE(Exists(tree));
  EXPECT_TRUE(Exists(outside + "/keep"));
}

}  // namespace
}  // namespace argsdump
