#include "sdk/exception_dump.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/files.h"
#include "store/capture_store.h"
#include "store/manifest.h"
#include "format/element_stats.h"
#include "format/names.h"
#include "collector/abi_convert.h"

namespace argsdump {

std::string SafeFileName(const std::string& s) {
  std::string out = s.empty() ? "unnamed" : s;
  for (char& c : out) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '.';
    if (!ok) c = '_';
  }
  return out;
}

namespace {

// A tensor record's view as the task held it: dtype, shape, strides, start
// offset, contiguity and element count.
void SetViewGeometry(const TensorView& view, v1::ArgRecord* r) {
  r->set_dtype(ToProtoDType(view.dtype));
  for (uint32_t d = 0; d < view.ndims; ++d) {
    r->add_shape(view.shape[d]);
    r->add_strides(view.strides[d]);
  }
  r->set_start_offset(view.start_offset);
  r->set_is_contiguous(view.is_contiguous());
  r->set_numel(view.numel());
}

// A JSON string (store/manifest.h: escapes, invalid UTF-8 replaced).
std::string JsonString(const std::string& s) {
  std::string out;
  AppendJsonString(s, &out);
  return out;
}

}  // namespace

absl::Status AppendTaskAsItIs(const DumpTask& task, const TaskRecordContext& c, bool in_flight,
                              const std::set<uint32_t>* skip_scalars, uint64_t* bin_offset,
                              CaptureStore* store) {
  // What every record of the task shares.
  auto record = [&](uint32_t arg_index) {
    v1::ArgRecord r;
    r.set_task_id(c.task_id);
    for (uint32_t id : c.func_ids) r.add_func_ids(id);
    r.set_arg_index(arg_index);
    r.set_device_thread(c.thread);
    r.set_step(c.step);
    return r;
  };
  for (uint32_t i = 0; i < task.tensor_count; ++i) {
    const DumpTensorArg& a = task.tensors[i];
    v1::ArgRecord r = record(a.arg_index);
    r.set_role(ToProtoRole(a.role));
    r.set_stage(v1::STAGE_AFTER_COMPLETION);  // as they are now
    r.set_kind(v1::KIND_TENSOR);
    r.set_in_flight_snapshot(in_flight);
    SetViewGeometry(a.view, &r);
    r.set_logical_bytes(a.view.logical_bytes());
    r.set_bin_offset(*bin_offset);
    r.set_bin_size(a.view.logical_bytes());
    std::string payload(a.view.logical_bytes(), '\0');
    GatherLogical(a.view, reinterpret_cast<uint8_t*>(payload.data()), payload.size());
    r.set_nonfinite(HasNonFinite(a.view.dtype, reinterpret_cast<const uint8_t*>(payload.data()),
                                 a.view.numel()));
    *bin_offset += payload.size();
    if (absl::Status s = store->Append(r, payload); !s.ok()) return s;
  }
  for (uint32_t i = 0; i < task.scalar_count; ++i) {
    const DumpScalarArg& a = task.scalars[i];
    if (skip_scalars != nullptr && skip_scalars->count(a.arg_index) > 0) continue;
    v1::ArgRecord r = record(a.arg_index);
    r.set_role(v1::ROLE_INPUT);
    r.set_stage(v1::STAGE_BEFORE_DISPATCH);
    r.set_kind(v1::KIND_SCALAR);
    r.set_dtype(ToProtoDType(a.dtype));
    r.set_numel(1);
    r.set_is_contiguous(true);
    r.set_scalar_bits(a.bits);
    if (absl::Status s = store->Append(r, ""); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> AppendInputsAsDispatched(const std::vector<DispatchedInput>& inputs,
                                                  const TaskRecordContext& c,
                                                  const std::set<uint32_t>* skip,
                                                  uint64_t* bin_offset, CaptureStore* store) {
  uint32_t appended = 0;
  for (const DispatchedInput& in : inputs) {
    const DumpTensorArg& a = in.arg;
    if (a.role == abi::ArgRole::kOutput) continue;
    if (skip != nullptr && skip->count(a.arg_index) > 0) continue;
    v1::ArgRecord r;
    r.set_task_id(c.task_id);
    for (uint32_t id : c.func_ids) r.add_func_ids(id);
    r.set_arg_index(a.arg_index);
    r.set_device_thread(c.thread);
    r.set_step(c.step);
    r.set_role(ToProtoRole(a.role));
    r.set_stage(v1::STAGE_BEFORE_DISPATCH);  // as the kernel received them
    r.set_kind(v1::KIND_TENSOR);
    SetViewGeometry(a.view, &r);
    r.set_arg_index_ambiguous(a.ambiguous);
    const uint64_t bytes = a.view.logical_bytes();
    r.set_logical_bytes(bytes);
    r.set_bin_offset(*bin_offset);
    r.set_bin_size(bytes);
    r.set_nonfinite(HasNonFinite(a.view.dtype, in.copy, a.view.numel()));
    const absl::string_view payload(reinterpret_cast<const char*>(in.copy), bytes);
    *bin_offset += bytes;
    if (absl::Status s = store->Append(r, payload); !s.ok()) return s;
    ++appended;
  }
  return appended;
}

std::string ExceptionDumpName(const std::string& scenario, const std::string& workload,
                              const FailedTask& f) {
  return absl::StrCat(SafeFileName(scenario), "_", SafeFileName(workload), "_",
                      SafeFileName(f.func), "_", SafeFileName(f.type.empty() ? "untyped" : f.type),
                      "_", f.step, "_", f.thread, "_", TaskIdHex(f.task_id));
}

std::string ExceptionDumpName(const std::string& workload, const FailedTask& f) {
  return ExceptionDumpName("exception", workload, f);
}

absl::StatusOr<std::string> WriteExceptionDump(const std::string& root,
                                               const std::string& workload,
                                               const FailedTask& f) {
  const std::string dir =
      absl::StrCat(root, "/exception_dump/", ExceptionDumpName(workload, f));
  if (absl::Status s = CreateDirectories(dir); !s.ok()) return s;
  v1::CaptureInfo info;
  info.set_name(ExceptionDumpName(workload, f));
  info.set_level(v1::DUMP_LEVEL_FULL);
  auto store = CaptureStore::Create(dir, info);
  if (!store.ok()) return store.status();
  (*store)->set_keep_journal(false);  // written whole, in one go: never recovered
  std::vector<uint32_t> funcs(f.func_ids.begin(), f.func_ids.end());
  std::sort(funcs.begin(), funcs.end());
  uint64_t offset = 0;
  const TaskRecordContext shared{f.task_id, funcs, f.thread, f.step};
  uint32_t as_dispatched = 0;
  if (f.inputs != nullptr) {
    absl::StatusOr<uint32_t> n =
        AppendInputsAsDispatched(*f.inputs, shared, nullptr, &offset, store->get());
    if (!n.ok()) return n.status();
    as_dispatched = *n;
  }
  if (absl::Status s = AppendTaskAsItIs(*f.task, shared, /*in_flight=*/false, nullptr, &offset,
                                        store->get());
      !s.ok()) {
    return s;
  }
  if (absl::Status s = (*store)->Finish(v1::CaptureCounters()); !s.ok()) return s;
  const std::string context = absl::StrCat(
      "{\n  \"scenario\": \"exception\",\n  \"workload\": ", JsonString(workload),
      ",\n  \"func\": ", JsonString(f.func), ",\n  \"func_type\": ", JsonString(f.type),
      ",\n  \"func_ids\": [", absl::StrJoin(funcs, ", "), "],\n  \"task_id\": \"",
      TaskIdHex(f.task_id), "\",\n  \"step\": ", f.step, ",\n  \"thread\": ", f.thread,
      ",\n  \"records_before_dispatch\": ", as_dispatched,
      ",\n  \"error\": ", JsonString(f.error), ",\n  \"capture\": \"args_dump.json\"\n}\n");
  if (absl::Status s = WriteStringToFile(dir + "/context.json", context); !s.ok()) return s;
  return dir;
}

}  // namespace argsdump
