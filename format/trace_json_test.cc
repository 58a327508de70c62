#include "format/trace_json.h"

#include <cstdlib>
#include <string>

#include "base/files.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

v1::ArgRecord Record(uint64_t task, uint32_t func, uint32_t thread, v1::Stage stage,
                     uint64_t dispatch_ns, uint64_t complete_ns) {
  v1::ArgRecord r;
  r.set_task_id(task);
  r.add_func_ids(func);
  r.set_device_thread(thread);
  r.set_stage(stage);
  r.set_role(stage == v1::STAGE_BEFORE_DISPATCH ? v1::ROLE_INPUT : v1::ROLE_OUTPUT);
  r.set_dtype(v1::DTYPE_FLOAT32);
  r.add_shape(8);
  r.set_dispatch_ns(dispatch_ns);
  r.set_complete_ns(complete_ns);
  return r;
}

TraceRank Rank(const std::string& label, int64_t base_unix_ns) {
  TraceRank rank;
  rank.label = label;
  rank.clock.set_base_unix_ns(base_unix_ns);
  v1::Kernel* add = rank.kernels.Add();
  add->set_func_id(1);
  add->set_name("add");
  v1::Kernel* odd = rank.kernels.Add();
  odd->set_func_id(2);
  odd->set_name("we\"ird\\\n\x01name");  // user data: escaped
  return rank;
}

// Checks the trace with python3's json module: exactly the expected slices,
// one per task, ts monotonic per (pid, tid) track, dur >= 0, the names.
int CheckWithPython(const std::string& trace, const std::string& expected_names,
                    int expected_slices) {
  const std::string dir = FreshTempDir("trace_json_test");
  const std::string path = dir + "/trace.json";
  if (!WriteStringToFile(path, trace).ok()) return -1;
  const std::string script =
      "import json, sys\n"
      "d = json.load(open(sys.argv[1]))\n"
      "assert d['displayTimeUnit'] == 'ns'\n"
      "xs = [e for e in d['traceEvents'] if e['ph'] == 'X']\n"
      "assert len(xs) == int(sys.argv[3]), len(xs)\n"
      "tasks = [(e['pid'], e['args']['task']) for e in xs]\n"
      "assert len(set(tasks)) == len(tasks), 'one slice per task'\n"
      "last = {}\n"
      "for e in xs:\n"
      "  k = (e['pid'], e['tid'])\n"
      "  assert e['dur'] >= 0\n"
      "  assert e['ts'] >= last.get(k, -1), 'ts monotonic per track'\n"
      "  last[k] = e['ts']\n"
      "names = sorted(set(e['name'] for e in xs))\n"
      "assert names == sorted(sys.argv[2].split(',')), names\n"
      "ms = [e for e in d['traceEvents'] if e['ph'] == 'M']\n"
      "assert all(e['name'] in ('process_name', 'thread_name') for e in ms)\n";
  if (!WriteStringToFile(dir + "/check.py", script).ok()) return -1;
  return std::system(("python3 " + dir + "/check.py " + path + " '" + expected_names + "' " +
                      std::to_string(expected_slices))
                         .c_str());
}

TEST(TraceJsonTest, ASlicePerTaskOnTheJobsClock) {
  // Rank 0's clock starts 1 ms after rank 1's: its tasks move by 1000 us.
  TraceRank r0 = Rank("rank 0 (train_r0)", 5'001'000'000);
  r0.records.push_back(Record(7, 1, 0, v1::STAGE_BEFORE_DISPATCH, 2'000, 0));
  r0.records.push_back(Record(7, 1, 0, v1::STAGE_AFTER_COMPLETION, 2'000, 3'500));
  r0.records.push_back(Record(8, 2, 1, v1::STAGE_BEFORE_DISPATCH, 2'500, 0));
  r0.records.push_back(Record(8, 2, 1, v1::STAGE_AFTER_COMPLETION, 2'500, 4'000));
  TraceRank r1 = Rank("rank 1 (train_r1)", 5'000'000'000);
  // A task that never completed: to the rank's last known time.
  r1.records.push_back(Record(9, 1, 0, v1::STAGE_BEFORE_DISPATCH, 1'000, 0));
  r1.records.push_back(Record(10, 1, 0, v1::STAGE_AFTER_COMPLETION, 500, 900));
  r1.records.push_back(Record(11, 1, 0, v1::STAGE_AFTER_COMPLETION, 1'200, 6'000));
  // No times at all (an old capture): left out.
  r1.records.push_back(Record(12, 1, 0, v1::STAGE_BEFORE_DISPATCH, 0, 0));
  TraceCounts counts;
  const std::string trace = TraceJson({r0, r1}, &counts);
  EXPECT_EQ(counts.slices, 5u);
  EXPECT_EQ(counts.incomplete, 1u);
  EXPECT_EQ(counts.untimed, 1u);
  EXPECT_NE(trace.find("\"name\": \"add\", \"pid\": 1, \"tid\": 0, \"ts\": 1002.000, "
                       "\"dur\": 1.500"),
            std::string::npos)
      << trace;
  EXPECT_NE(trace.find("\"pid\": 2, \"tid\": 0, \"ts\": 1.000, \"dur\": 5.000, \"args\": "
                       "{\"task\": \"0x0000000000000009\", \"step\": 0, \"incomplete\": true"),
            std::string::npos)
      << trace;
  EXPECT_NE(trace.find("we\\\"ird\\\\\\u000a\\u0001name"), std::string::npos) << trace;
  EXPECT_EQ(CheckWithPython(trace, "add,we\"ird\\\n\x01name", 5), 0) << trace;
}

TEST(TraceJsonTest, ServerOffsetMovesARank) {
  TraceRank r0 = Rank("a", 1'000'000);
  r0.records.push_back(Record(1, 1, 0, v1::STAGE_AFTER_COMPLETION, 10'000, 11'000));
  TraceRank r1 = Rank("b", 1'000'000);
  r1.clock.set_has_server_offset(true);
  r1.clock.set_server_offset_ns(-3'000);  // its host's clock runs 3 us ahead
  r1.records.push_back(Record(1, 1, 0, v1::STAGE_AFTER_COMPLETION, 10'000, 11'000));
  const std::string trace = TraceJson({r0, r1});
  // b's base is the earlier on the server's clock: the trace's 0.
  EXPECT_NE(trace.find("\"pid\": 2, \"tid\": 0, \"ts\": 10.000"), std::string::npos) << trace;
  EXPECT_NE(trace.find("\"pid\": 1, \"tid\": 0, \"ts\": 13.000"), std::string::npos) << trace;
}

TEST(TraceJsonTest, BrokenUtf8IsEscapedByteByByte) {
  std::string out;
  AppendTraceJsonString(std::string("a\xC3\xA9z\xFF\xC3", 6), &out);
  EXPECT_EQ(out, "\"a\xC3\xA9z\\u00ff\\u00c3\"");
}

}  // namespace
}  // namespace argsdump
