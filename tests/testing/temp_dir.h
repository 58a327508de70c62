// Paths for a test's files below $TEST_TMPDIR (/tmp when it is unset, as
// under `bazel run`): the one place tests and benchmarks name, empty or
// remove their scratch folders, and read back what a test wrote. Nothing
// here is used outside tests.
#ifndef ARGSDUMP_TESTS_TESTING_TEMP_DIR_H_
#define ARGSDUMP_TESTS_TESTING_TEMP_DIR_H_

#include <string>

namespace argsdump {

// $TEST_TMPDIR/<name>; nothing is created or removed. `name` may hold
// slashes ("case/args_dump").
std::string TempPath(const std::string& name);

// TempPath(name) with nothing there: whatever was is removed (a capture
// directory a test is about to create, a path that must not exist).
std::string AbsentTempPath(const std::string& name);

// TempPath(name) as an empty folder: removed if it was there, then made
// with its parents.
std::string FreshTempDir(const std::string& name);

// Removes `path` and everything below it (symbolic links are removed, not
// followed); a missing path is fine. Aborts, naming the path, on any other
// failure: a test's scratch folder that cannot be removed is a broken test
// environment.
void RemoveTree(const std::string& path);

// For benchmarks: TempPath(name) with "_<pid>" appended (runs side by side
// do not share files), and RemoveTree followed by sync(), so the writeback
// of what one run wrote does not land in the next run's timed region.
std::string ProcessTempPath(const std::string& name);
void RemoveTreeAndSync(const std::string& path);

// The whole file at `path`, of any size; "" when it cannot be read (a
// test then fails on what it expected to find in it).
std::string ReadFileOrEmpty(const std::string& path);

}  // namespace argsdump

#endif  // ARGSDUMP_TESTS_TESTING_TEMP_DIR_H_
