#include "sdk/device_crash.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/files.h"
#include "base/utf8.h"
#include "client/capture_client.h"
#include "collector/abi_convert.h"
#include "sdk/exception_dump.h"
#include "format/arg_filter.h"
#include "format/device_crash.h"
#include "format/names.h"
#include "format/record.h"
#include "store/live_query.h"
#include "store/capture_store.h"
#include "store/manifest.h"

namespace argsdump {
namespace {

// Each call reading a crashed task's records back from a capture service.
constexpr std::chrono::milliseconds kCrashReadCallTimeout{30000};

std::string JsonString(const std::string& s) {
  std::string out;
  AppendJsonString(s, &out);
  return out;
}

// `s` as valid UTF-8 (a proto3 string must be: a kernel's name is the
// user's bytes), each bad byte '?', at most `max` bytes, cut between
// characters.
std::string Utf8(const std::string& s, size_t max) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8SequenceLength(absl::string_view(s).substr(i));
    if (out.size() + std::max<size_t>(n, 1) > max) break;
    if (n > 0) {
      out.append(s, i, n);
    } else {
      out.push_back('?');
    }
    i += std::max<size_t>(n, 1);
  }
  return out;
}

const KernelInfo* KernelOf(const KernelRegistry& kernels, const FlightTask& t, uint32_t subtask) {
  if (subtask >= t.task.func_count || subtask >= abi::kMaxFuncIds) return nullptr;
  return kernels.Find(t.task.func_ids[subtask]);
}

// Every slot in flight, by slot index: the index in a.in_flight of the task
// in each slot, -1 for an empty one.
std::vector<int> ReadInFlightTasks(const FlightTable& flight, const DeviceMemory& memory,
                                   DeviceCrashAnalysis& a) {
  std::vector<int> by_slot(flight.slots(), -1);
  for (uint32_t s = 0; s < flight.slots(); ++s) {
    auto t = std::make_unique<FlightTask>();
    if (!flight.ReadTask(s, memory, t.get())) continue;
    by_slot[s] = static_cast<int>(a.in_flight.size());
    a.in_flight.push_back(std::move(t));
  }
  return by_slot;
}

// One executing entry per worker that was running a task in flight; the
// crashing one is the fault handler's slot and worker.
void AddExecutingTasks(const FlightTable& flight, const KernelRegistry& kernels,
                       const std::vector<int>& by_slot, uint32_t crash_slot,
                       int32_t crash_worker, DeviceCrashAnalysis& a) {
  v1::DeviceCrash& c = a.crash;
  for (uint32_t w = 0; w < flight.workers(); ++w) {
    const uint32_t s = flight.worker(w).slot.load(std::memory_order_acquire);
    if (s >= flight.slots() || by_slot[s] < 0) continue;
    const FlightTask& t = *a.in_flight[by_slot[s]];
    const uint32_t subtask = flight.worker(w).subtask;
    v1::CrashedTask* e = c.add_executing();
    e->set_task_id(t.task.task_id);
    for (uint32_t f = 0; f < t.task.func_count && f < abi::kMaxFuncIds; ++f) {
      e->add_func_ids(t.task.func_ids[f]);
    }
    if (const KernelInfo* k = KernelOf(kernels, t, subtask)) {
      // Within the capture's bounds (format/device_crash.h).
      e->set_func(Utf8(k->name, kMaxCrashTextBytes));
      e->set_func_type(Utf8(k->type, kMaxCrashTextBytes));
    }
    e->set_worker(w);
    e->set_thread(t.scheduler);
    e->set_step(t.task.step);
    e->set_crashing(s == crash_slot && static_cast<int32_t>(w) == crash_worker);
  }
}

// The crash in one line for people: how the process ended and where.
std::string DescribeCrash(const DeviceExit& exit, const DeviceCrashAnalysis& a,
                          bool handler_ran, int32_t crash_worker) {
  const v1::DeviceCrash& c = a.crash;
  std::string how = exit.signaled
                        ? absl::StrCat("was killed by ", SignalName(exit.signal))
                        : absl::StrCat("exited with status ", exit.exit_status,
                                       " before it reported (an exit() or _exit() in a kernel?)");
  if (c.has_fault_address()) {
    absl::StrAppend(&how, " (fault address ", FaultAddressHex(c.fault_address()), ")");
  }
  std::string where;
  int named = 0, more = 0;
  for (const v1::CrashedTask& e : c.executing()) {
    if (!a.dumps.empty() && c.executing(a.dumps[0]).crashing() && !e.crashing()) continue;
    if (named == 4) {  // the rest counted: the line stays within the capture's bounds
      ++more;
      continue;
    }
    ++named;
    absl::StrAppend(&where, where.empty() ? "" : ", ", "task ", TaskIdHex(e.task_id()),
                    " ran kernel '", Utf8(e.func(), 200), "' on worker ", e.worker(),
                    " (scheduler thread ", e.thread(), ", step ", e.step(), ")");
  }
  if (more > 0) absl::StrAppend(&where, " and ", more, " more");
  if (where.empty()) {
    where = handler_ran && crash_worker < 0
                ? "outside every kernel (on a device thread that runs no kernel)"
                : "while no kernel ran";
  } else {
    where = absl::StrCat(c.executing_size() > 1 && !c.executing(a.dumps[0]).crashing()
                             ? "while these kernels ran: "
                             : "while ",
                         where);
  }
  return absl::StrCat("the device process ", how, " ", where, "; ", a.in_flight.size(),
                      " task(s) in flight, ", a.tasks_completed, " of ", a.tasks_submitted,
                      " completed");
}

}  // namespace

DeviceCrashAnalysis AnalyzeDeviceCrash(const DeviceExit& exit, const FlightTable& flight,
                                       const DeviceMemory& memory,
                                       const KernelRegistry& kernels) {
  DeviceCrashAnalysis a;
  v1::DeviceCrash& c = a.crash;
  const abi::FlightHeader& h = flight.header();
  a.tasks_submitted = h.tasks_submitted.load(std::memory_order_relaxed);
  a.tasks_completed = h.tasks_completed.load(std::memory_order_relaxed);
  if (exit.signaled) {
    c.set_signal(exit.signal);
    c.set_signal_name(SignalName(exit.signal));
  } else {
    c.set_exit_status(exit.exit_status);
  }
  const int32_t fault = h.crash.signal.load(std::memory_order_acquire);
  const bool handler_ran = fault > 0;
  if (handler_ran && h.crash.has_fault_address != 0) {
    c.set_has_fault_address(true);
    c.set_fault_address(h.crash.fault_address);
  }
  const std::vector<int> by_slot = ReadInFlightTasks(flight, memory, a);
  c.set_tasks_in_flight(a.in_flight.size());
  const uint32_t crash_slot = handler_ran ? h.crash.slot : abi::kNoFlightSlot;
  const int32_t crash_worker = handler_ran ? h.crash.worker : -1;
  AddExecutingTasks(flight, kernels, by_slot, crash_slot, crash_worker, a);
  for (int i = 0; i < c.executing_size(); ++i) {
    if (c.executing(i).crashing()) a.dumps = {i};
  }
  if (a.dumps.empty()) {
    for (int i = 0; i < c.executing_size(); ++i) a.dumps.push_back(i);
  }
  const std::string line = DescribeCrash(exit, a, handler_ran, crash_worker);
  c.set_description(Utf8(line, kMaxCrashTextBytes));
  return a;
}

const FlightTask* ExecutingTask(const DeviceCrashAnalysis& a, const v1::CrashedTask& e) {
  for (const auto& t : a.in_flight) {
    if (t->task.task_id == e.task_id()) return t.get();
  }
  return nullptr;
}

absl::StatusOr<std::vector<TaskRecord>> ReadLocalTaskRecords(const std::string& dump_dir,
                                                             uint64_t task_id, v1::Stage stage) {
  ArgFilter filter;
  filter.task_id = task_id;
  filter.stage = stage;
  return ReadLocalRecords(dump_dir, filter);
}

absl::StatusOr<std::vector<TaskRecord>> ReadLocalRecords(const std::string& dump_dir,
                                                         const ArgFilter& filter) {
  std::vector<TaskRecord> out;
  auto index = IndexFile::Open(absl::StrCat(dump_dir, "/", kIndexName));
  if (!index.ok()) return index.status();
  const std::string bin_path = absl::StrCat(dump_dir, "/", kBinName);
  int fd = -1;
  for (uint64_t from = 0;;) {
    QueryPage page = (*index)->Query(filter, from, 1000, 1 << 20);
    for (const QueryHit& hit : page.hits) {
      TaskRecord r;
      r.record = RecordFromRow(hit.row);
      if (r.record.bin_size() > 0) {
        if (fd < 0) fd = ::open(bin_path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
          return absl::NotFoundError(absl::StrCat(bin_path, ": ", std::strerror(errno)));
        }
        r.payload.resize(r.record.bin_size());
        const ssize_t n = ::pread(fd, r.payload.data(), r.payload.size(),
                                  static_cast<off_t>(r.record.bin_offset()));
        if (n != static_cast<ssize_t>(r.payload.size())) {
          ::close(fd);
          return absl::DataLossError(absl::StrCat(bin_path, ": byte ", r.record.bin_offset(),
                                                  ": ", r.payload.size(),
                                                  " payload bytes are not there"));
        }
      }
      out.push_back(std::move(r));
    }
    if (!page.next) break;
    from = *page.next;
  }
  if (fd >= 0) ::close(fd);
  return out;
}

absl::StatusOr<std::vector<TaskRecord>> ReadRemoteTaskRecords(const std::string& server,
                                                              const std::string& capture,
                                                              const std::string& auth_token,
                                                              uint64_t task_id, v1::Stage stage) {
  CaptureClientOptions options;
  options.target = server;
  options.auth_token = auth_token;
  options.call_timeout = kCrashReadCallTimeout;
  absl::StatusOr<std::unique_ptr<CaptureClient>> client =
      CaptureClient::Create(std::move(options));
  if (!client.ok()) {
    return absl::UnavailableError(
        absl::StrCat("QueryArgs on ", server, ": ", client.status().message()));
  }
  v1::QueryArgsRequest q;
  q.set_capture(capture);
  q.set_task_id(task_id);
  q.set_stage(stage);
  q.set_page_size(kMaxPageSize);
  QueryArgsPager pager(client->get(), std::move(q));
  std::vector<TaskRecord> out;
  std::vector<v1::CapturedArg> page;
  while (!pager.done()) {
    absl::StatusOr<bool> got = pager.Next(&page);
    if (!got.ok()) {
      return absl::UnavailableError(
          absl::StrCat("QueryArgs on ", server, ": ", got.status().message()));
    }
    for (const v1::CapturedArg& arg : page) {
      TaskRecord r;
      r.record = arg.record();
      if (r.record.bin_size() > 0) {
        v1::ReadPayloadRequest p;
        p.set_capture(capture);
        p.set_record_id(arg.record_id());
        const absl::Status done = (*client)->ReadPayload(p, [&](const v1::PayloadChunk& chunk) {
          r.payload += chunk.data();
          return absl::OkStatus();
        });
        if (!done.ok() || r.payload.size() != r.record.bin_size()) {
          return absl::UnavailableError(absl::StrCat(
              "ReadPayload of record ", arg.record_id(), " on ", server, ": ",
              done.ok() ? "short payload" : done.message()));
        }
      }
      out.push_back(std::move(r));
    }
  }
  return out;
}

std::string CrashDumpName(const std::string& workload, const v1::CrashedTask& e) {
  FailedTask f;
  f.task_id = e.task_id();
  f.step = e.step();
  f.thread = e.thread();
  f.func = e.func();
  f.type = e.func_type();
  return ExceptionDumpName("crash", workload, f);
}

absl::StatusOr<std::string> WriteCrashDump(const std::string& root, const std::string& workload,
                                           const DeviceCrashAnalysis& a,
                                           const v1::CrashedTask& e,
                                           const std::vector<TaskRecord>& before,
                                           const std::string& capture) {
  const std::string name = CrashDumpName(workload, e);
  const std::string dir = absl::StrCat(root, "/exception_dump/", name);
  if (absl::Status s = CreateDirectories(dir); !s.ok()) return s;
  v1::CaptureInfo info;
  info.set_name(name);
  info.set_level(v1::DUMP_LEVEL_FULL);
  *info.mutable_device_crash() = a.crash;
  auto store = CaptureStore::Create(dir, info);
  if (!store.ok()) return store.status();
  (*store)->set_keep_journal(false);  // written whole, in one go: never recovered
  uint64_t offset = 0;
  for (const TaskRecord& t : before) {
    v1::ArgRecord r = t.record;
    r.set_bin_offset(t.payload.empty() ? 0 : offset);
    r.set_bin_size(t.payload.size());
    offset += t.payload.size();
    if (absl::Status s = (*store)->Append(r, t.payload); !s.ok()) return s;
  }
  // The inputs the device copied before dispatch (snapshot_inputs), for the
  // tensors the capture has no before_dispatch record of (at level 0: all).
  const FlightTask* executing = ExecutingTask(a, e);
  uint32_t as_dispatched = 0;
  if (executing != nullptr && !executing->inputs.empty()) {
    std::set<uint32_t> captured;
    for (const TaskRecord& t : before) {
      if (t.record.kind() == v1::KIND_TENSOR) captured.insert(t.record.arg_index());
    }
    TaskRecordContext context{e.task_id(), {e.func_ids().begin(), e.func_ids().end()},
                              e.thread(), e.step()};
    std::sort(context.func_ids.begin(), context.func_ids.end());
    absl::StatusOr<uint32_t> n =
        AppendInputsAsDispatched(executing->inputs, context, &captured, &offset, store->get());
    if (!n.ok()) return n.status();
    as_dispatched = *n;
  }
  // The task as it is in device memory now: what the kernel left (and the
  // scalars the capture did not have).
  if (const FlightTask* f = ExecutingTask(a, e)) {
    std::set<uint32_t> scalars_before;
    for (const TaskRecord& t : before) {
      if (t.record.kind() == v1::KIND_SCALAR) scalars_before.insert(t.record.arg_index());
    }
    TaskRecordContext context{e.task_id(), {e.func_ids().begin(), e.func_ids().end()},
                              e.thread(), e.step()};
    std::sort(context.func_ids.begin(), context.func_ids.end());
    if (absl::Status s = AppendTaskAsItIs(f->task, context, /*in_flight=*/true, &scalars_before,
                                          &offset, store->get());
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = (*store)->Finish(v1::CaptureCounters()); !s.ok()) return s;
  std::vector<uint32_t> funcs(e.func_ids().begin(), e.func_ids().end());
  std::string context = absl::StrCat(
      "{\n  \"scenario\": \"crash\",\n  \"workload\": ", JsonString(workload),
      ",\n  \"func\": ", JsonString(e.func()), ",\n  \"func_type\": ", JsonString(e.func_type()),
      ",\n  \"func_ids\": [", absl::StrJoin(funcs, ", "), "],\n  \"task_id\": \"",
      TaskIdHex(e.task_id()), "\",\n  \"step\": ", e.step(), ",\n  \"thread\": ", e.thread(),
      ",\n  \"worker\": ", e.worker(), ",\n  \"crashing\": ", e.crashing() ? "true" : "false",
      ",\n  \"signal\": ", a.crash.signal(), ",\n  \"signal_name\": ",
      JsonString(a.crash.signal_name()), ",\n  \"exit_status\": ", a.crash.exit_status(),
      ",\n  \"fault_address\": ",
      a.crash.has_fault_address() ? absl::StrCat("\"", FaultAddressHex(a.crash.fault_address()), "\"")
                                  : std::string("null"),
      ",\n  \"records_before_dispatch\": ", before.size() + as_dispatched,
      ",\n  \"error\": ", JsonString(a.crash.description()),
      ",\n  \"capture\": \"args_dump.json\",\n  \"run_capture\": ", JsonString(capture), "\n}\n");
  if (absl::Status s = WriteStringToFile(dir + "/context.json", context); !s.ok()) return s;
  return dir;
}

absl::Status UploadExceptionDump(const std::string& dir, GrpcSinkOptions options,
                                 const v1::DeviceCrash* device_crash) {
  absl::StatusOr<std::vector<TaskRecord>> records = ReadLocalRecords(dir, ArgFilter());
  if (!records.ok()) return records.status();
  options.info.set_name(options.capture);
  options.info.set_level(v1::DUMP_LEVEL_FULL);
  auto sink = GrpcSink::Connect(std::move(options));
  if (!sink.ok()) return sink.status();
  uint64_t offset = 0;
  for (TaskRecord& t : *records) {
    t.record.set_bin_offset(t.payload.empty() ? 0 : offset);
    t.record.set_bin_size(t.payload.size());
    offset += t.payload.size();
    if (absl::Status s = (*sink)->Write(t.record, t.payload); !s.ok()) return s;
  }
  if (device_crash != nullptr) {
    v1::CaptureInfo end;
    *end.mutable_device_crash() = *device_crash;
    if (absl::Status s = (*sink)->Amend(end); !s.ok()) return s;
  }
  return (*sink)->Finish(v1::CaptureCounters());
}

}  // namespace argsdump
