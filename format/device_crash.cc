#include "format/device_crash.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "format/names.h"

namespace argsdump {
namespace {

absl::Status CheckText(const std::string& text, absl::string_view field) {
  if (text.size() <= kMaxCrashTextBytes) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("device_crash.", field, ": ", text.size(),
                                                 " bytes, at most ", kMaxCrashTextBytes));
}

// "task 0x..., func f, worker 2, thread 1, step 0"
std::string DescribeTask(const v1::CrashedTask& t) {
  std::vector<std::string> parts = {absl::StrCat("task ", TaskIdHex(t.task_id()))};
  if (!t.func().empty()) parts.push_back(absl::StrCat("func ", t.func()));
  if (!t.func_type().empty()) parts.push_back(absl::StrCat("type ", t.func_type()));
  absl::StrAppend(&parts.emplace_back(), "worker ", t.worker());
  absl::StrAppend(&parts.emplace_back(), "thread ", t.thread());
  absl::StrAppend(&parts.emplace_back(), "step ", t.step());
  return absl::StrJoin(parts, ", ");
}

}  // namespace

absl::Status CheckDeviceCrash(const v1::DeviceCrash& c) {
  if (c.signal() < 0 || c.signal() > 127) {
    return absl::InvalidArgumentError(
        absl::StrCat("device_crash.signal: ", c.signal(), " is not 0..127"));
  }
  if (c.signal() == 0 && !c.signal_name().empty()) {
    return absl::InvalidArgumentError("device_crash.signal_name: set, but signal is 0");
  }
  if (absl::Status s = CheckText(c.signal_name(), "signal_name"); !s.ok()) return s;
  if (absl::Status s = CheckText(c.description(), "description"); !s.ok()) return s;
  if (c.executing_size() > kMaxCrashedTasks) {
    return absl::InvalidArgumentError(absl::StrCat("device_crash.executing: ",
                                                   c.executing_size(), " tasks, at most ",
                                                   kMaxCrashedTasks));
  }
  int crashing = 0;
  for (int i = 0; i < c.executing_size(); ++i) {
    const v1::CrashedTask& t = c.executing(i);
    const std::string at = absl::StrCat("executing[", i, "].");
    if (t.func_ids_size() > kMaxCrashedTaskFuncIds) {
      return absl::InvalidArgumentError(absl::StrCat("device_crash.", at, "func_ids: ",
                                                     t.func_ids_size(), " ids, at most ",
                                                     kMaxCrashedTaskFuncIds));
    }
    if (absl::Status s = CheckText(t.func(), absl::StrCat(at, "func")); !s.ok()) return s;
    if (absl::Status s = CheckText(t.func_type(), absl::StrCat(at, "func_type")); !s.ok()) {
      return s;
    }
    if (t.crashing() && ++crashing > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("device_crash.", at, "crashing: a second crashing task"));
    }
  }
  if (c.ByteSizeLong() > kMaxDeviceCrashBytes) {
    return absl::InvalidArgumentError(absl::StrCat("device_crash: ", c.ByteSizeLong(),
                                                   " bytes serialized, at most ",
                                                   kMaxDeviceCrashBytes));
  }
  return absl::OkStatus();
}

std::string FaultAddressHex(uint64_t address) {
  return absl::StrCat("0x", absl::Hex(address));
}

const v1::CrashedTask* CrashingTask(const v1::DeviceCrash& c) {
  for (const v1::CrashedTask& t : c.executing()) {
    if (t.crashing()) return &t;
  }
  return nullptr;
}

std::string DescribeDeviceCrash(const v1::DeviceCrash& c) {
  std::string out;
  if (c.signal() != 0) {
    out = c.signal_name().empty() ? absl::StrCat("signal ", c.signal()) : c.signal_name();
  } else {
    out = absl::StrCat("exit status ", c.exit_status());
  }
  if (c.has_fault_address()) absl::StrAppend(&out, " at ", FaultAddressHex(c.fault_address()));
  const v1::CrashedTask* crashing = CrashingTask(c);
  if (crashing != nullptr) absl::StrAppend(&out, " (", DescribeTask(*crashing), ")");
  absl::StrAppend(&out, "; ", c.tasks_in_flight(),
                  c.tasks_in_flight() == 1 ? " task in flight" : " tasks in flight");
  if (crashing == nullptr && c.executing_size() > 0) {
    std::vector<std::string> tasks;
    for (int i = 0; i < c.executing_size() && i < 4; ++i) {
      tasks.push_back(DescribeTask(c.executing(i)));
    }
    if (c.executing_size() > 4) tasks.push_back(absl::StrCat(c.executing_size() - 4, " more"));
    absl::StrAppend(&out, ", ", c.executing_size(), " executing (", absl::StrJoin(tasks, "; "),
                    ")");
  }
  return out;
}

}  // namespace argsdump
