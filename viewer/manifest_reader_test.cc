#include "viewer/manifest_reader.h"

#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/arg_records.h"
#include "tests/testing/temp_dir.h"
#include "viewer/manifest_transcript.h"
#include "viewer/test_capture.h"

namespace argsdump {
namespace {

void Put(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// A capture written by the store: tensors, a NaN scalar, flags.
std::string MakeCapture(const std::string& name) {
  const std::string dir = TempPath(name + "/args_dump");
  TestCapture c;
  for (int t = 3; t >= 0; --t) {
    const uint64_t task = 0x200000000ull + t;
    c.Add(TensorRecord(task).FuncIds({7}).Dtype(v1::DTYPE_FLOAT16).Shape({2, 3}).Contiguous()
              .Truncated(t == 1),
          std::string(t == 1 ? 8 : 12, 'x'));
    c.Add(ScalarRecord(task).Arg(1).Dtype(v1::DTYPE_FLOAT32).Contiguous()
              .ScalarBits(t == 2 ? 0x7FC00000u : 0x3F000000u)  // NaN, 0.5
              .AmbiguousArgIndex(t == 0));
  }
  v1::CaptureCounters losses;
  losses.set_dropped_records(5);
  losses.set_dropped_flush_timeout(3);
  losses.set_dropped_host_gone(2);
  EXPECT_TRUE(c.WriteTo(dir, name, losses).ok());
  return dir + "/args_dump.json";
}

std::vector<ManifestEntry> ReadAll(const std::string& path, absl::Status* status,
                                   ManifestSummary* summary = nullptr,
                                   std::optional<uint64_t> task = std::nullopt) {
  std::vector<ManifestEntry> out;
  auto reader = ManifestReader::Open(path);
  if (!reader.ok()) {
    *status = reader.status();
    return out;
  }
  if (task) {
    EntryFilter f;
    f.args.task_id = task;
    (*reader)->set_filter(f);
  }
  *status = (*reader)->ForEach([&](const ManifestEntry& e) {
    out.push_back(e);
    return true;
  });
  if (summary != nullptr) *summary = (*reader)->summary();
  return out;
}

// Every simple field (format/manifest_fields.h) reads back as the record
// that was stored held it - written by the generated writer, read by the
// generated reader, for whatever fields the list holds (a new one is
// covered without a line here).
TEST(ManifestReaderTest, EverySimpleFieldReadsBackAsStored) {
  const std::string dir = TempPath("simple/args_dump");
  TestCapture c;
  std::mt19937_64 rng(7);
  std::vector<v1::ArgRecord> stored;
  for (int i = 0; i < 64; ++i) {
    const bool truncated = rng() % 3 == 0;
    v1::ArgRecord& r = c.Add(TensorRecord(0x100000000ull + i)
                                 .Arg(static_cast<uint32_t>(rng() % 100000))
                                 .Dtype(v1::DTYPE_INT32)
                                 .Shape({4, 2})
                                 .Contiguous(rng() % 2 == 0)
                                 .StartOffset(rng() % 1000)
                                 .Truncated(truncated)
                                 .Overwritten(rng() % 4 == 0)
                                 .AmbiguousArgIndex(rng() % 2 == 0)
                                 .InFlightSnapshot(rng() % 2 == 0)
                                 .Overflow(rng() % 2 == 0),
                             std::string(truncated ? 12 : 32, 'p'));
    if (rng() % 4 != 0) {  // task times, some not known (0: not written)
      r.set_dispatch_ns(1 + rng() % (uint64_t{1} << 50));
      if (rng() % 2 == 0) r.set_complete_ns(r.dispatch_ns() + rng() % 100000);
    }
    stored.push_back(r);
  }
  ASSERT_TRUE(c.WriteTo(dir, "simple", v1::CaptureCounters()).ok());
  absl::Status st;
  const std::vector<ManifestEntry> entries = ReadAll(dir + "/args_dump.json", &st);
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(entries.size(), stored.size());
  for (const ManifestEntry& e : entries) {
    const v1::ArgRecord& r = stored[e.task_id - 0x100000000ull];  // one record per task
    SCOPED_TRACE(e.task_id);
#define ARGSDUMP_EXPECT_SAME(id, style, member) EXPECT_EQ(e.member, r.member()) << #member;
    ARGSDUMP_SIMPLE_MANIFEST_FIELDS(ARGSDUMP_EXPECT_SAME)
#undef ARGSDUMP_EXPECT_SAME
  }
}

// The capture's clock is written before args[] and reads back whole; a
// capture without one has none, and its entries no times.
TEST(ManifestReaderTest, TheClockReadsBack) {
  for (bool with_offset : {false, true}) {
    const std::string dir = TempPath(absl::StrCat("clock", with_offset, "/args_dump"));
    TestCapture c;
    c.Add(TensorRecord(0x100000000ull).Arg(0).Dtype(v1::DTYPE_INT32).Shape({2}),
          std::string(8, 'p'))
        .set_dispatch_ns(5);
    v1::CaptureClock clock;
    clock.set_base_monotonic_ns(123456789);
    clock.set_base_unix_ns(1795953930123456789);
    clock.set_host("node \"7\"");
    if (with_offset) {
      clock.set_has_server_offset(true);
      clock.set_server_offset_ns(-4200);
    }
    c.SetClock(clock);
    ASSERT_TRUE(c.WriteTo(dir).ok());
    auto reader = ManifestReader::Open(dir + "/args_dump.json");
    ASSERT_TRUE(reader.ok()) << reader.status();
    ASSERT_TRUE((*reader)->ReadHeader().ok());
    ASSERT_TRUE((*reader)->summary().clock.has_value());
    EXPECT_EQ((*reader)->summary().clock->SerializeAsString(), clock.SerializeAsString())
        << (*reader)->summary().clock->DebugString();
    EXPECT_EQ((*reader)->summary().counters.count("clock.base_unix_ns"), 0u);
    ManifestEntry e;
    ASSERT_TRUE(*(*reader)->Next(&e));
    EXPECT_EQ(e.dispatch_ns, 5u);
    EXPECT_EQ(e.complete_ns, 0u);
  }
  const std::string path = MakeCapture("no_clock");
  auto reader = ManifestReader::Open(path);
  ASSERT_TRUE(reader.ok());
  ASSERT_TRUE((*reader)->ReadHeader().ok());
  EXPECT_FALSE((*reader)->summary().clock.has_value());
}

TEST(ManifestReaderTest, ReadsWhatTheStoreWrites) {
  const std::string path = MakeCapture("store");
  absl::Status st;
  ManifestSummary summary;
  const auto entries = ReadAll(path, &st, &summary);
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(entries.size(), 8u);
  EXPECT_EQ(entries[0].task_id, 0x200000000ull);  // sorted by task
  EXPECT_EQ(entries[0].kind, v1::KIND_TENSOR);
  EXPECT_EQ(entries[0].dtype, DataType::kFloat16);
  EXPECT_EQ(entries[0].shape, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(entries[0].strides, (std::vector<uint64_t>{3, 1}));
  EXPECT_EQ(entries[0].func_ids, (std::vector<int64_t>{7}));
  EXPECT_EQ(entries[1].kind, v1::KIND_SCALAR);
  EXPECT_EQ(entries[1].value, "0.5");
  EXPECT_TRUE(entries[1].arg_index_ambiguous);
  EXPECT_EQ(entries[1].func_ids, (std::vector<int64_t>{-1}));
  EXPECT_TRUE(entries[2].truncated);  // task 1's tensor
  EXPECT_EQ(entries[2].bin_size, 8u);
  EXPECT_EQ(entries[5].value, "\"NaN\"");
  for (size_t i = 0; i < entries.size(); ++i) EXPECT_EQ(entries[i].index, i);
  EXPECT_EQ(summary.counters.at("total_args"), 8);
  EXPECT_EQ(summary.counters.at("dump_args_level"), 2);
  EXPECT_EQ(summary.counters.at("truncated_args"), 1);
  EXPECT_EQ(summary.counters.at("dropped_records"), 5);
  EXPECT_EQ(summary.counters.at("dropped_by_cause.flush_timeout"), 3);
  EXPECT_EQ(summary.counters.at("dropped_by_cause.host_gone"), 2);
  EXPECT_TRUE(summary.has_bin_file);
  EXPECT_EQ(summary.bin_file, "args.bin");
}

TEST(ManifestReaderTest, AcceptsAnyLayoutAndUnknownFields) {
  const std::string path = TempPath("layout.json");
  Put(path, R"({
    "extra": {"nested": [1, {"deep": null}], "s": "x\"y\u00e9"},
    "args": [
      {
        "bin_size": 0, "kind": "scalar", "value": -1.5e-3, "role": "output",
        "stage": "after_completion", "task_id": "0xa", "dtype": "FLOAT64",
        "shape": [], "strides": [], "stats": {"min": 0}, "arg_index": 4
      }
    ],
    "bin_file": null, "total_args": 1
  })");
  absl::Status st;
  ManifestSummary summary;
  const auto entries = ReadAll(path, &st, &summary);
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].task_id, 10u);
  EXPECT_EQ(entries[0].value, "-1.5e-3");
  EXPECT_EQ(entries[0].arg_index, 4u);
  EXPECT_FALSE(summary.has_bin_file);
  EXPECT_EQ(summary.counters.at("total_args"), 1);
}

TEST(ManifestReaderTest, StopsWhenAskedWithoutReadingTheRest) {
  const std::string path = MakeCapture("stop");
  auto reader = std::move(ManifestReader::Open(path)).value();
  int seen = 0;
  EXPECT_TRUE(reader->ForEach([&](const ManifestEntry&) { return ++seen < 3; }).ok());
  EXPECT_EQ(seen, 3);
}

TEST(ManifestReaderTest, TaskFilterHandsOutThatTaskOnly) {
  const std::string path = MakeCapture("task_filter");
  absl::Status st;
  const auto all = ReadAll(path, &st);
  ASSERT_TRUE(st.ok()) << st;
  const auto one = ReadAll(path, &st, nullptr, 0x200000001ull);
  ASSERT_TRUE(st.ok()) << st;
  std::vector<ManifestEntry> want;
  for (const ManifestEntry& e : all) {
    if (e.task_id == 0x200000001ull) want.push_back(e);
  }
  ASSERT_FALSE(want.empty());
  ASSERT_EQ(one.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(one[i].index, want[i].index);  // indices count the skipped entries
    EXPECT_EQ(one[i].dtype, want[i].dtype);
    EXPECT_EQ(one[i].shape, want[i].shape);
    EXPECT_EQ(one[i].value, want[i].value);
    EXPECT_EQ(one[i].bin_offset, want[i].bin_offset);
  }
  // Every kind of filter hands out exactly what EntryFilter::Matches picks
  // from the whole list, with the same fields.
  std::vector<EntryFilter> filters(8);
  filters[0].args.stage = v1::STAGE_BEFORE_DISPATCH;
  filters[0].args.arg_index = 1;
  filters[1].args.role = v1::ROLE_INPUT;
  filters[2].args.arg_index = 0;
  filters[3].args.func_id = 7;
  filters[4].args.func_unknown = true;
  filters[5].args.stage = v1::STAGE_BEFORE_DISPATCH;
  filters[5].args.role = v1::ROLE_INPUT;
  filters[5].args.task_id = 0x200000002ull;
  filters[6].args.kind = v1::KIND_SCALAR;
  filters[7].args.dtype = v1::DTYPE_FLOAT16;
  filters[7].args.stage = v1::STAGE_BEFORE_DISPATCH;
  for (const EntryFilter& f : filters) {
    auto r = std::move(ManifestReader::Open(path)).value();
    r->set_filter(f);
    std::vector<uint64_t> got, expected;
    ASSERT_TRUE(r->ForEach([&](const ManifestEntry& e) {
                   got.push_back(e.index);
                   EXPECT_EQ(e.shape, all[e.index].shape);
                   EXPECT_EQ(e.bin_size, all[e.index].bin_size);
                   return true;
                 }).ok());
    for (const ManifestEntry& e : all) {
      if (f.Matches(e)) expected.push_back(e.index);
    }
    EXPECT_FALSE(expected.empty());
    EXPECT_EQ(got, expected);
  }
  // An index filter: that entry alone.
  auto reader = std::move(ManifestReader::Open(path)).value();
  EntryFilter by_index;
  by_index.index = 5;
  reader->set_filter(by_index);
  ManifestEntry e;
  ASSERT_TRUE(reader->Next(&e).value());
  EXPECT_EQ(e.index, 5u);
  EXPECT_EQ(e.task_id, all[5].task_id);
  EXPECT_EQ(e.value, all[5].value);
  EXPECT_FALSE(reader->Next(&e).value());
  EXPECT_EQ(reader->summary().counters.at("total_args"), 8);
  // Skipped entries may hold anything JSON allows: braces and brackets in
  // strings, escaped quotes, nested values.
  const std::string odd = TempPath("odd.json");
  Put(odd, R"({"args": [
    {"task_id": "0x1", "note": "a}b]\"}", "x": {"y": [1, {"z": "]"}]}, "role": "input"},
    {"task_id": "0x2", "role": "output", "stage": "after_completion", "kind": "tensor",
     "dtype": "INT8", "shape": [2], "strides": [1]}
  ], "total_args": 2})");
  const auto second = ReadAll(odd, &st, nullptr, 2);
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].index, 1u);
  EXPECT_EQ(second[0].role, v1::ROLE_OUTPUT);
  // A skipped entry cut short is still an error naming the byte.
  Put(odd, R"({"args": [{"task_id": "0x1", "note": "ab)");
  ReadAll(odd, &st, nullptr, 2);
  EXPECT_NE(st.message().find("odd.json: byte 40: entry 0: the file ends inside a string"),
            std::string::npos)
      << st;
}

TEST(ManifestReaderTest, IntegersAreExactOrAnError) {
  const std::string path = TempPath("ints.json");
  auto entry = [&](const std::string& bin_offset) {
    Put(path, absl::StrCat(R"({"args": [{"task_id": "0x1", "role": "input", "stage": )",
                           R"("before_dispatch", "kind": "tensor", "dtype": "INT8", )",
                           R"("bin_offset": )", bin_offset, "}]}"));
    absl::Status st;
    auto entries = ReadAll(path, &st);
    return std::make_pair(st, entries.empty() ? 0 : entries[0].bin_offset);
  };
  EXPECT_EQ(entry("18446744073709551615").second, 18446744073709551615ull);  // 20 digits
  EXPECT_EQ(entry("1234567890123456789").second, 1234567890123456789ull);    // 19
  EXPECT_EQ(entry("0").second, 0u);
  for (const char* bad : {"18446744073709551616", "1.5", "-1", "1e3", "12345678901234567890123"}) {
    const absl::Status st = entry(bad).first;
    EXPECT_NE(st.message().find(absl::StrCat("field \"bin_offset\": expected an unsigned integer, found ", bad)),
              std::string::npos)
        << st;
  }
}

TEST(ManifestReaderTest, ErrorsNameTheFileTheByteAndTheField) {
  const std::string path = TempPath("bad.json");
  Put(path, R"({"args": [{"task_id": "0xzz", "role": "input"}]})");
  absl::Status st;
  ReadAll(path, &st);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(st.message().find("bad.json: byte "), std::string::npos) << st;
  EXPECT_NE(st.message().find("entry 0: field \"task_id\""), std::string::npos) << st;
  Put(path, R"({"args": [{"task_id": "0x1", "role": "input", "stage": "before_dispatch",
               "kind": "tensor", "dtype": "INT8", "shape": [1, 2], "strides": [1]}]})");
  ReadAll(path, &st);
  EXPECT_NE(st.message().find("shape and strides"), std::string::npos) << st;
  Put(path, R"({"args": [{"role": "input"}]})");
  ReadAll(path, &st);
  EXPECT_NE(st.message().find("missing task_id"), std::string::npos) << st;
  ReadAll(TempPath("absent.json"), &st);
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(st.message().find("absent.json"), std::string::npos);
}

// "device_crash" reads back as the store was given it (hex task ids and
// fault address parsed), known before the first entry, filtered or not; a
// manifest without one has none.
TEST(ManifestReaderTest, ReadsTheDeviceCrashTheStoreWrites) {
  const std::string dir = TempPath("crash/args_dump");
  TestCapture c;
  c.Tensor(0x100000003, 0, v1::ROLE_INPUT, v1::STAGE_BEFORE_DISPATCH, v1::DTYPE_INT8, {2}, "ab");
  c.Tensor(0x100000002, 0, v1::ROLE_INPUT, v1::STAGE_BEFORE_DISPATCH, v1::DTYPE_INT8, {2}, "cd");
  v1::DeviceCrash crash = SegvCrash(0x100000003, 0x100000002);
  crash.set_fault_address(0xdeadbeef000);
  crash.mutable_executing(1)->set_step(4);
  c.SetDeviceCrash(crash);
  ASSERT_TRUE(c.WriteTo(dir).ok());
  for (const std::optional<uint64_t> task :
       {std::optional<uint64_t>(), std::optional<uint64_t>(0x100000002)}) {
    auto reader = ManifestReader::Open(dir + "/args_dump.json");
    ASSERT_TRUE(reader.ok());
    if (task) {
      EntryFilter f;
      f.args.task_id = task;
      (*reader)->set_filter(f);
    }
    ManifestEntry e;
    ASSERT_TRUE(*(*reader)->Next(&e));
    ASSERT_TRUE((*reader)->summary().device_crash.has_value());
    EXPECT_EQ((*reader)->summary().device_crash->SerializeAsString(), crash.SerializeAsString());
  }
  absl::Status st;
  ManifestSummary summary;
  ReadAll(MakeCapture("no_crash"), &st, &summary);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_FALSE(summary.device_crash.has_value());
  EXPECT_EQ(summary.counters.count("device_crash.signal"), 0u);
}

// The manifest is untrusted: a device_crash field of the wrong type, a bad
// hex spelling or one over the service's bounds is an error naming the
// field; unknown keys are skipped.
TEST(ManifestReaderTest, ABadDeviceCrashIsAnErrorNamingTheField) {
  const std::string path = TempPath("crash_bad.json");
  const std::string task =
      R"({"task_id": "0x5", "func_ids": [7], "func": "crash_segv", "func_type": "aiv",
          "worker": 2, "thread": 1, "step": 0, "crashing": true, "later": [1, {"x": 2}]})";
  const std::string good = R"("signal": 11, "signal_name": "SIGSEGV", "exit_status": 0,
      "fault_address": "0x0", "tasks_in_flight": 3, "description": "d", "added": {"a": 1},
      "executing": [)" + task + "]";
  auto manifest = [](const std::string& crash) {
    return "{\"device_crash\": {" + crash + "}, \"args\": []}";
  };
  Put(path, manifest(good));
  absl::Status st;
  ManifestSummary summary;
  ReadAll(path, &st, &summary);
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_TRUE(summary.device_crash.has_value());
  EXPECT_EQ(summary.device_crash->executing(0).task_id(), 5u);
  EXPECT_TRUE(summary.device_crash->has_fault_address());
  const std::vector<std::pair<std::pair<std::string, std::string>, std::string>> bad = {
      {{R"("signal": 11)", R"("signal": "11")"}, R"("signal": expected a number)"},
      {{R"("signal": 11)", R"("signal": 4294967296)"}, R"("signal": out of range)"},
      {{R"("signal": 11)", R"("signal": 300)"}, "device_crash.signal: 300 is not 0..127"},
      {{R"("exit_status": 0)", R"("exit_status": true)"}, R"("exit_status": expected a number)"},
      {{R"("signal_name": "SIGSEGV")", R"("signal_name": 11)"}, R"("signal_name": expected '"')"},
      {{R"("fault_address": "0x0")", R"("fault_address": 0)"}, R"("fault_address": expected '"')"},
      {{R"("fault_address": "0x0")", R"("fault_address": "12")"},
       R"("fault_address": expected "0x" and up to 16 hex digits, found "12")"},
      {{R"("tasks_in_flight": 3)", R"("tasks_in_flight": -3)"}, R"("tasks_in_flight": expected)"},
      {{R"("description": "d")", R"("description": ["d"])"}, R"("description": expected '"')"},
      {{R"("executing": [)", R"("executing": {"a": [)"}, R"("executing": expected '[')"},
      {{R"("task_id": "0x5")", R"("task_id": 5)"}, R"("task_id": expected '"')"},
      {{R"("task_id": "0x5")", R"("task_id": "0xzz")"}, R"("task_id": expected "0x")"},
      {{R"("func_ids": [7])", R"("func_ids": [-1])"}, R"("func_ids": expected an unsigned)"},
      {{R"("func_ids": [7])", R"("func_ids": [1, 2, 3, 4])"}, "executing[0].func_ids: 4 ids"},
      {{R"("worker": 2)", R"("worker": 1e3)"}, R"("worker": expected an unsigned integer)"},
      {{R"("crashing": true)", R"("crashing": 1)"}, R"("crashing": expected true or false)"},
      {{R"("description": "d")", "\"description\": \"" + std::string(5000, 'x') + "\""},
       "device_crash.description: 5000 bytes, at most 4096"},
  };
  for (const auto& [change, says] : bad) {
    std::string crash = good;
    ASSERT_NE(crash.find(change.first), std::string::npos) << change.first;
    crash.replace(crash.find(change.first), change.first.size(), change.second);
    Put(path, manifest(crash));
    ReadAll(path, &st);
    EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << change.second;
    EXPECT_NE(st.message().find("top-level field \"device_crash\""), std::string::npos) << st;
    EXPECT_NE(st.message().find(says), std::string::npos) << st;
  }
  std::string two_crashing = good;
  two_crashing.replace(two_crashing.rfind("]"), 1, ", " + task + "]");
  Put(path, manifest(two_crashing));
  ReadAll(path, &st);
  EXPECT_NE(st.message().find("a second crashing task"), std::string::npos) << st;
  Put(path, R"({"device_crash": 3, "args": []})");
  ReadAll(path, &st);
  EXPECT_NE(st.message().find("top-level field \"device_crash\": expected '{'"),
            std::string::npos)
      << st;
}

// "kernels" reads back as the store was given it, before the first entry
// (ReadHeader stops there and Next goes on with it).
TEST(ManifestReaderTest, ReadsTheKernelTableTheStoreWrites) {
  const std::string dir = TempPath("kernels/args_dump");
  TestCapture c;
  c.Tensor(0x100000001, 0, v1::ROLE_INPUT, v1::STAGE_BEFORE_DISPATCH, v1::DTYPE_INT8, {2}, "ab");
  c.SetKernels(SceneKernels());
  ASSERT_TRUE(c.WriteTo(dir).ok());
  auto reader = ManifestReader::Open(dir + "/args_dump.json");
  ASSERT_TRUE(reader.ok());
  ASSERT_TRUE((*reader)->ReadHeader().ok());
  const KernelTable& k = (*reader)->summary().kernels;
  ASSERT_EQ(k.size(), 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(k.Get(i).SerializeAsString(), SceneKernels().Get(i).SerializeAsString()) << i;
  }
  ManifestEntry e;
  ASSERT_TRUE(*(*reader)->Next(&e));
  EXPECT_EQ(e.task_id, 0x100000001u);
  EXPECT_FALSE(*(*reader)->Next(&e));
}

// The table is untrusted: a field of the wrong type, a direction or dtype
// outside the schema, a name too long or given twice, too many kernels or
// signature entries are errors naming the field; unknown keys are skipped.
TEST(ManifestReaderTest, AHostileKernelTableIsAnErrorNamingTheField) {
  const std::string path = TempPath("kernels_bad.json");
  const std::string good =
      R"({"func_id": 0, "name": "add", "type": "elementwise", "later": {"x": [1]},
          "signature": [{"direction": "in", "dtype": "FLOAT32", "more": 1}, {"direction": "out"}]},
         {"func_id": 1, "name": "mul", "signature": []})";
  auto manifest = [](const std::string& kernels) {
    return "{\"kernels\": [" + kernels + "], \"args\": []}";
  };
  Put(path, manifest(good));
  absl::Status st;
  ManifestSummary summary;
  ReadAll(path, &st, &summary);
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(summary.kernels.size(), 2);
  EXPECT_EQ(DescribeKernel(summary.kernels.Get(0)), "add (elementwise) [in FLOAT32, out]");
  const std::vector<std::pair<std::pair<std::string, std::string>, std::string>> bad = {
      {{R"("func_id": 0)", R"("func_id": "0")"}, R"("func_id": expected)"},
      {{R"("func_id": 0)", R"("func_id": 4294967296)"}, R"("func_id")"},
      {{R"("func_id": 0)", R"("func_id": 65535)"}, "kernels[0].func_id: 65535, at most 65534"},
      {{R"("func_id": 0)", R"("func_id": 1)"}, "kernels[1].func_id: 1 is given twice"},
      {{R"("name": "mul")", R"("name": "add")"}, R"(kernels[1].name: "add" is given twice)"},
      {{R"("name": "add")", R"("name": "")"}, "kernels[0].name: empty"},
      {{R"("name": "add")", R"("name": "a\u0007b")"}, "a control character (7)"},
      {{R"("name": "add")", R"("name": "\ud800")"}, "kernels[0].name: not UTF-8"},
      {{R"("name": "add")", "\"name\": \"" + std::string(200, 'n') + "\""},
       R"("name": 200 bytes, at most 128)"},
      {{R"("type": "elementwise")", "\"type\": \"" + std::string(65, 't') + "\""},
       R"("type": 65 bytes, at most 64)"},
      {{R"("name": "add")", R"("name": ["add"])"}, R"("name": expected '"')"},
      {{R"("direction": "in")", R"("direction": "sideways")"},
       R"(expected in, out, inout or scalar, found "sideways")"},
      {{R"("dtype": "FLOAT32")", R"("dtype": "FLOAT33")"}, R"(not a dtype: "FLOAT33")"},
      {{R"("direction": "out")", R"("direction": "out"}, {"direction": "scalar"}, {"direction": "in")"},
       "kernels[0].signature[3]: a tensor entry after a scalar entry"},
      {{R"("signature": [])", R"("signature": {})"}, R"("signature": expected '[')"},
  };
  for (const auto& [change, says] : bad) {
    std::string kernels = good;
    ASSERT_NE(kernels.find(change.first), std::string::npos) << change.first;
    kernels.replace(kernels.find(change.first), change.first.size(), change.second);
    Put(path, manifest(kernels));
    ReadAll(path, &st);
    EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << change.second;
    EXPECT_NE(st.message().find("top-level field \"kernels\""), std::string::npos) << st;
    EXPECT_NE(st.message().find(says), std::string::npos) << st;
  }
  // Counts are bounded as they are read.
  std::string many;
  for (int i = 0; i <= kMaxKernels; ++i) {
    absl::StrAppend(&many, i > 0 ? "," : "", "{\"func_id\": ", i, ", \"name\": \"k", i, "\"}");
  }
  Put(path, manifest(many));
  ReadAll(path, &st);
  EXPECT_NE(st.message().find("more than 4096 kernels"), std::string::npos) << st;
  std::string wide = "{\"func_id\": 0, \"name\": \"w\", \"signature\": [";
  for (int i = 0; i <= kMaxKernelSignature; ++i) {
    absl::StrAppend(&wide, i > 0 ? "," : "", "{\"direction\": \"in\"}");
  }
  Put(path, manifest(wide + "]}"));
  ReadAll(path, &st);
  EXPECT_NE(st.message().find("more than 64 entries"), std::string::npos) << st;
  Put(path, R"({"kernels": {"a": 1}, "args": []})");
  ReadAll(path, &st);
  EXPECT_NE(st.message().find("top-level field \"kernels\": expected '['"), std::string::npos)
      << st;
}

// Role, stage, kind and dtype are the schema's names or the entry is an
// error naming the field, what it holds and what it may hold.
TEST(ManifestReaderTest, NamesOutsideTheSchemaAreErrors) {
  const std::string path = TempPath("names.json");
  const std::string good =
      R"("task_id": "0x1", "role": "input", "stage": "before_dispatch", "kind": "tensor",
         "dtype": "INT8", "shape": [2], "strides": [1])";
  Put(path, "{\"args\": [{" + good + "}]}");
  absl::Status st;
  ASSERT_EQ(ReadAll(path, &st).size(), 1u);
  ASSERT_TRUE(st.ok()) << st;
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"("role": "input")", R"(field "role": "weights" is not input, output or inout)"},
      {R"("stage": "before_dispatch")",
       R"(field "stage": "before" is not before_dispatch or after_completion)"},
      {R"("kind": "tensor")", R"(field "kind": "vector" is not tensor or scalar)"},
      {R"("dtype": "INT8")", R"(field "dtype": "COMPLEX64" is not a dtype this build knows)"},
  };
  const std::vector<std::string> replacement = {R"("role": "weights")", R"("stage": "before")",
                                                R"("kind": "vector")", R"("dtype": "COMPLEX64")"};
  for (size_t i = 0; i < bad.size(); ++i) {
    std::string entry = good;
    entry.replace(entry.find(bad[i].first), bad[i].first.size(), replacement[i]);
    Put(path, "{\"args\": [{" + entry + "}]}");
    ReadAll(path, &st);
    EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << replacement[i];
    EXPECT_NE(st.message().find(bad[i].second), std::string::npos) << st;
  }
}

// Every prefix of a real manifest, and many with a byte changed: an OK
// parse or a DataLoss that names the file and a byte; never a crash (ASan
// and UBSan run this too).
TEST(ManifestReaderTest, TruncatedAndCorruptedManifestsFailCleanly) {
  const std::string good = ReadFileOrEmpty(MakeCapture("fuzz"));
  ASSERT_GT(good.size(), 1000u);
  const std::string path = TempPath("fuzz_case.json");
  auto check = [&](const std::string& text, const std::string& what) {
    Put(path, text);
    absl::Status st;
    ReadAll(path, &st);
    if (!st.ok()) {
      EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << what << ": " << st;
      EXPECT_NE(st.message().find("fuzz_case.json: byte "), std::string::npos) << what << ": " << st;
    }
    // The same with a task filter (other tasks' entries are only skimmed):
    // an error of the same kind, or OK.
    absl::Status filtered;
    ReadAll(path, &filtered, nullptr, 0x200000001ull);
    auto by_index = ManifestReader::Open(path);
    if (by_index.ok()) {
      EntryFilter f;
      f.index = 3;
      f.args.stage = v1::STAGE_AFTER_COMPLETION;
      (*by_index)->set_filter(f);
      if (!filtered.ok()) filtered = (*by_index)->ForEach([](const ManifestEntry&) { return true; });
    }
    if (!filtered.ok()) {
      EXPECT_EQ(filtered.code(), absl::StatusCode::kDataLoss) << what << ": " << filtered;
      EXPECT_NE(filtered.message().find("fuzz_case.json: byte "), std::string::npos)
          << what << ": " << filtered;
    }
    return st.ok();
  };
  int ok = 0;
  for (size_t n = 0; n < good.size(); n += 7) {
    ok += check(good.substr(0, n), absl::StrCat("prefix ", n));
  }
  EXPECT_EQ(ok, 0) << "a cut manifest parsed";
  std::mt19937 rng(11);
  const char junk[] = {'"', '{', '}', '[', ']', ',', ':', '\\', 'x', '9', '-', '\0', '\n', 'e'};
  for (int i = 0; i < 1500; ++i) {
    std::string text = good;
    const size_t at = rng() % text.size();
    text[at] = junk[rng() % sizeof(junk)];
    check(text, absl::StrCat("byte ", at));
  }
  EXPECT_TRUE(check(good, "unchanged"));
}


namespace scanner {

// A capture the store writes with every optional field somewhere: steps,
// func ids (one, several, none), 0- to 5-dimensional tensors, scalars of
// several dtypes (0.5, NaN, a bool, an integer), the three flags, stats.
std::string StoreManifest(const std::string& name) {
  const std::string dir = TempPath(name + "/args_dump");
  TestCapture c;
  for (uint32_t t = 0; t < 6; ++t) {
    const uint64_t task = 0x100000000ull + t;
    std::vector<uint32_t> shape;
    for (uint32_t d = 0; d < t % 6; ++d) shape.push_back(d + 2);
    const std::vector<uint32_t> funcs = t % 3 == 0   ? std::vector<uint32_t>{7, 9, 11}
                                        : t % 3 == 1 ? std::vector<uint32_t>{7}
                                                     : std::vector<uint32_t>{};
    const v1::Role roles[] = {v1::ROLE_INPUT, v1::ROLE_OUTPUT, v1::ROLE_INOUT};
    v1::ArgRecord tensor = TensorRecord(task).Step(t % 3).FuncIds(funcs).Arg(0)
                               .Role(roles[t % 3])
                               .Stage(t % 3 == 0 ? v1::STAGE_BEFORE_DISPATCH
                                                 : v1::STAGE_AFTER_COMPLETION)
                               .Dtype(v1::DTYPE_FLOAT16).Shape(shape).Contiguous()
                               .Truncated(t == 1).InFlightSnapshot(t == 2).Overflow(t == 3);
    if (t == 4) {
      v1::TensorStats* s = tensor.mutable_stats();
      s->set_count(24);
      s->set_min(-1.25);
      s->set_max(3e300);
      s->set_mean(0.1);
      s->set_l2(7);
      s->set_nan(1);
      s->set_zeros(2);
    }
    uint64_t bytes = 2;
    for (uint32_t d : shape) bytes *= d;
    c.Add(tensor, std::string(t == 1 ? bytes - 2 : bytes, 'x'));
    const v1::DType dtypes[] = {v1::DTYPE_FLOAT32, v1::DTYPE_BOOL,    v1::DTYPE_FLOAT32,
                                v1::DTYPE_FLOAT32, v1::DTYPE_BOOL, v1::DTYPE_INT64};
    c.Add(ScalarRecord(task).Step(t % 3).Arg(1).Dtype(dtypes[t])
              .ScalarBits(t == 2 ? 0x7FC00000u : t == 0 ? 0x3F000000u : 1)
              .AmbiguousArgIndex(t == 5),
          "");
  }
  const absl::Status written = c.WriteTo(dir, name);
  EXPECT_TRUE(written.ok()) << written;
  return ReadFileOrEmpty(dir + "/args_dump.json");
}

// The filters the reader drops entries early on, one per field it checks
// (format/manifest_fields.h up to dtype), and none.
std::vector<EntryFilter> Filters() {
  std::vector<EntryFilter> f(8);
  f[1].args.task_id = 0x100000002ull;
  f[2].args.step = 1;
  f[3].args.func_id = 9;
  f[4].args.role = v1::ROLE_OUTPUT;
  f[5].args.stage = v1::STAGE_AFTER_COMPLETION;
  f[6].args.arg_index = 1;
  f[6].args.kind = v1::KIND_SCALAR;
  f[7].args.dtype = v1::DTYPE_FLOAT16;
  return f;
}

// The same transcript with the scanner and without, for every filter and
// buffers from 1 byte to the whole file.
void ExpectSameReading(const std::string& manifest, const std::string& what) {
  for (const EntryFilter& f : Filters()) {
    for (size_t buffer : {size_t{1} << 20, size_t{1}, size_t{61}, size_t{200}, size_t{333}}) {
      const std::string with = ReadTranscript(manifest, f, true, 1000, buffer);
      const std::string without = ReadTranscript(manifest, f, false, 1000, buffer);
      ASSERT_EQ(with, without) << what << ", buffer " << buffer << ", filter "
                               << f.args.Describe();
    }
  }
}

// `text` with the first `from` replaced by `to` (which must be there).
std::string With(const std::string& text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at == std::string::npos) return text;
  return text.substr(0, at) + to + text.substr(at + from.size());
}

}  // namespace scanner

TEST(ManifestReaderTest, StoreLayoutScannerReadsTheStoresOutputAsTheParserDoes) {
  const std::string manifest = scanner::StoreManifest("scanner_store");
  // The fields the capture is meant to have are there.
  for (const char* field : {"\"step\": 1", "\"func_id\": [7, 9, 11]", "\"func_id\": [-1]",
                            "\"in_flight_snapshot\": true", "\"overflow\": true",
                            "\"arg_index_ambiguous\": true", "\"stats\": {\"count\": 24",
                            "\"value\": \"NaN\"", "\"value\": true", "\"shape\": [2, 3, 4, 5, 6]"}) {
    EXPECT_NE(manifest.find(field), std::string::npos) << field << " in\n" << manifest;
  }
  const std::string transcript = ReadTranscript(manifest, EntryFilter(), true, 1000);
  EXPECT_NE(transcript.find("\nend\n"), std::string::npos) << transcript;
  scanner::ExpectSameReading(manifest, "the store's manifest");
  // A large one: 1 MiB buffers end in the middle of lines.
  std::string big = manifest;
  const size_t open = big.find("\"args\": [\n") + 10, close = big.rfind("\n  ]");
  const std::string entries = big.substr(open, close - open);
  std::string many;
  while (many.size() < (3u << 20)) many += entries + ",\n";
  big = big.substr(0, open) + many + entries + big.substr(close);
  for (const EntryFilter& f : scanner::Filters()) {
    EXPECT_EQ(ReadTranscript(big, f, true, 1 << 20), ReadTranscript(big, f, false, 1 << 20));
  }
}

// Hand-made deviations from the store's layout, each in one entry: the
// scanner gives way to the parser there, which reads them (or refuses them,
// naming the byte) as it always did.
TEST(ManifestReaderTest, StoreLayoutScannerGivesWayToTheParserOnEveryDeviation) {
  const std::string m = scanner::StoreManifest("scanner_deviations");
  const std::string first = "{\"task_id\": \"0x0000000100000000\"";
  const std::vector<std::pair<std::string, std::string>> deviations = {
      // reordered keys
      {"\"role\": \"input\", \"stage\": \"before_dispatch\"",
       "\"stage\": \"before_dispatch\", \"role\": \"input\""},
      {first + ", \"step\": 0", "{\"step\": 0, \"task_id\": \"0x0000000100000000\""},
      {first + ", \"step\": 0", first},
      {first + ", \"step\": 0", first + ", \"step\": 0, \"step\": 1"},
      // other spacing
      {first, "{ \"task_id\": \"0x0000000100000000\""},
      {first, "{\"task_id\":\"0x0000000100000000\""},
      {first, "{\"task_id\" :  \"0x0000000100000000\""},
      {"\"numel\": ", "\"numel\":\t"},
      {"\"shape\": [2, 3]", "\"shape\": [ 2,3 ]"},
      {"\"bin_size\": 12}", "\"bin_size\": 12 }"},
      {"},\n    {", "}  ,\n\n{"},
      // escapes and control characters in strings
      {"\"role\": \"input\"", "\"role\": \"in\\u0070ut\""},
      {"\"dtype\": \"FLOAT16\"", "\"dtype\": \"FLOAT\\u00316\""},
      {"\"dtype\": \"FLOAT16\"", "\"dtype\": \"float16\""},
      {"\"dtype\": \"FLOAT16\"", "\"dtype\": \"FLOAT17\""},
      {"\"task_id\": \"0x0000000100000000\"", "\"task_id\": \"0x000000010000000\\u0030\""},
      {"\"task_id\": \"0x0000000100000000\"", "\"task_id\": \"0X0000000100000000\""},
      {"\"task_id\": \"0x0000000100000000\"", "\"task_id\": \"0x00000001000000AB\""},
      {"\"task_id\": \"0x0000000100000000\"", "\"task_id\": \"0x1\""},
      {"\"task_id\": \"0x0000000100000000\"", "\"task_id\": \"0x00000001000000000\""},
      {"\"task_id\": \"0x0000000100000000\"", "\"task_id\": \"0x00000001000000g0\""},
      {"\"role\": \"input\"", "\"role\": \"in\tput\""},
      {"\"role\": \"input\"", "\"role\": \"inpu"},
      {"\"value\": \"NaN\"", "\"value\": \"N\\u0061N\""},
      // numbers: huge, signed, with leading zeros, fractions, not numbers
      {"\"bin_size\": 12", "\"bin_size\": 18446744073709551615"},
      {"\"bin_size\": 12", "\"bin_size\": 18446744073709551616"},
      {"\"bin_size\": 12", "\"bin_size\": 1234567890123456789"},
      {"\"bin_size\": 12", "\"bin_size\": 00000000000000000000012"},
      {"\"bin_size\": 12", "\"bin_size\": 012"},
      {"\"bin_size\": 12", "\"bin_size\": -12"},
      {"\"bin_size\": 12", "\"bin_size\": 12.0"},
      {"\"bin_size\": 12", "\"bin_size\": 1e3"},
      {"\"bin_size\": 12", "\"bin_size\": null"},
      {"\"arg_index\": 0", "\"arg_index\": 4294967295"},
      {"\"arg_index\": 0", "\"arg_index\": 4294967296"},
      {"\"step\": 0", "\"step\": 99999999999999999999"},
      {"\"func_id\": [7, 9, 11]", "\"func_id\": [-7, 922337203685477580, 9223372036854775807]"},
      {"\"func_id\": [7, 9, 11]", "\"func_id\": [9223372036854775808]"},
      {"\"func_id\": [7, 9, 11]", "\"func_id\": [-0, +3]"},
      {"\"func_id\": [7, 9, 11]", "\"func_id\": []"},
      {"\"func_id\": [7, 9, 11]", "\"func_id\": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]"},
      {"\"func_id\": [7, 9, 11]", "\"func_id\": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18]"},
      {"\"value\": 0.5", "\"value\": -1.5e-300"},
      {"\"value\": 0.5", "\"value\": 1e5e5--"},
      {"\"value\": 0.5", "\"value\": " + std::string(64, '9')},
      {"\"value\": 0.5", "\"value\": " + std::string(65, '9')},
      {"\"value\": 0.5", "\"value\": false"},
      {"\"value\": 0.5", "\"value\": null"},
      {"\"value\": 0.5", "\"value\": [1]"},
      {"\"is_contiguous\": true", "\"is_contiguous\": 1"},
      {"\"is_contiguous\": true", "\"is_contiguous\": tru"},
      {"\"truncated\": false", "\"truncated\": falsey"},
      {"\"truncated\": false", "\"overflow\": false, \"truncated\": false"},
      {"\"shape\": [2, 3]", "\"shape\": [2, 3, 4]"},
      {"\"stats\": {\"count\": 24, \"min\": -1.25", "\"stats\": {\"min\": -1.25, \"count\": 24"},
      {"\"stats\": {\"count\": 24", "\"stats\": {\"count\": 24, \"extra\": [{}]"},
      {"\"min\": -1.25", "\"min\": -1.25e400"},
      {"\"min\": -1.25", "\"min\": 1.2.3"},
      // missing fields, required and not
      {"\"role\": \"input\", ", ""},
      {"\"kind\": \"tensor\", ", ""},
      {"\"shape\": [2, 3], ", ""},
      {"\"numel\": 6, ", ""},
      {", \"bin_size\": 12}", "}"},
      {first, "{"},
      // duplicate and unknown keys
      {"\"numel\": 6", "\"numel\": 6, \"numel\": 7"},
      {"\"bin_size\": 12", "\"bin_size\": 12, \"bin_size\": 13"},
      {"\"kind\": \"tensor\"", "\"kind\": \"tensor\", \"kind\": \"scalar\""},
      {"\"bin_size\": 12", "\"bin_size\": 12, \"stats\": {\"count\": 1}"},
      {"\"numel\": 6", "\"numel\": 6, \"later\": {\"a\": [1, \"}\"]}"},
      {"\"bin_size\": 12", "\"bin_size\": 12, \"z\": \"\\\"}\""},
  };
  for (const auto& [from, to] : deviations) {
    const std::string changed = scanner::With(m, from, to);
    scanner::ExpectSameReading(changed, to);
  }
  // A deviation is read as the parser reads it, not refused for it.
  const std::string lower = scanner::With(m, "\"dtype\": \"FLOAT16\"", "\"dtype\": \"float16\"");
  EXPECT_NE(ReadTranscript(lower, EntryFilter(), true, 1000).find("\nend\n"), std::string::npos);
  // Truncated anywhere in the first entries: the same error at the same byte.
  const size_t begin = m.find(first);
  for (size_t cut = begin; cut < begin + 1200 && cut < m.size(); ++cut) {
    scanner::ExpectSameReading(m.substr(0, cut), absl::StrCat("cut at ", cut));
  }
  // And an error names the file and the byte.
  const std::string bad = scanner::With(m, "\"arg_index\": 0", "\"arg_index\": 4294967296");
  const std::string t = ReadTranscript(bad, EntryFilter(), true, 1000);
  EXPECT_NE(t.find("fuzz.json: byte "), std::string::npos) << t;
  EXPECT_NE(t.find("field \"arg_index\": out of range"), std::string::npos) << t;
}

}  // namespace
}  // namespace argsdump
