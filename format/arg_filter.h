// Which records a query selects: the one predicate behind v1::ArgFilter,
// used by the finished index, live captures, watches, the viewer's local
// reader and its remote source. Every set field must match; unset fields
// match everything. Field-by-field checks let a reader drop a record at the
// first field it has read that rules it out.
#ifndef ARGSDUMP_FORMAT_ARG_FILTER_H_
#define ARGSDUMP_FORMAT_ARG_FILTER_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "format/record.h"
#include "proto/argsdump/v1/capture.pb.h"

namespace argsdump {

struct ArgFilter {
  std::optional<uint64_t> task_id;
  int stage = 0;  // v1::Stage; 0 (UNSPECIFIED): any
  int role = 0;   // v1::Role
  int kind = 0;   // v1::Kind
  std::optional<uint32_t> arg_index;
  // Records whose func_ids contain this id.
  std::optional<uint32_t> func_id;
  // Records whose kernel is not known (no func ids; the manifest's [-1]).
  bool func_unknown = false;
  // Records whose func_ids contain a kernel of this name (exact) / of this
  // type in the capture's kernel table (format/kernel_table.h). They match
  // through func_named, the ids ResolveKernelFilter found for them:
  // unresolved, they match nothing.
  std::optional<std::string> func_name;
  std::optional<std::string> func_type;
  std::optional<std::vector<uint32_t>> func_named;  // sorted
  int dtype = 0;  // v1::DType
  std::optional<uint32_t> step;
  std::optional<bool> overflow;
  // Records whose captured elements hold a NaN or an Inf (true: the
  // collector's nonfinite flag, or stored stats that count one), or the
  // others.
  std::optional<bool> has_nonfinite;

  static ArgFilter FromProto(const v1::ArgFilter& f);
  v1::ArgFilter ToProto() const;
  bool any() const;
  // "task 0x... stage after_completion role output": what a user asked.
  std::string Describe() const;

  // One field each: true when the record's value passes.
  bool TaskOk(uint64_t v) const { return !task_id || v == *task_id; }
  bool StageOk(int v) const { return stage == 0 || v == stage; }
  bool RoleOk(int v) const { return role == 0 || v == role; }
  bool KindOk(int v) const { return kind == 0 || v == kind; }
  bool ArgIndexOk(uint32_t v) const { return !arg_index || v == *arg_index; }
  bool DTypeOk(int v) const { return dtype == 0 || v == dtype; }
  bool StepOk(uint32_t v) const { return !step || v == *step; }
  bool OverflowOk(bool v) const { return !overflow || v == *overflow; }
  // `v`: the record is flagged nonfinite, or its stored stats count a NaN
  // or an Inf.
  bool NonfiniteOk(bool v) const { return !has_nonfinite || v == *has_nonfinite; }
  // The record's known func ids, [first, last).
  template <typename It>
  bool FuncOk(It first, It last) const {
    if (func_unknown && first != last) return false;
    if (func_id && std::find(first, last, *func_id) == last) return false;
    if (!func_name && !func_type) return true;
    if (!func_named) return false;
    for (It it = first; it != last; ++it) {
      const int64_t id = static_cast<int64_t>(*it);  // the manifest's -1: no kernel
      if (id >= 0 && std::binary_search(func_named->begin(), func_named->end(),
                                        static_cast<uint32_t>(id))) {
        return true;
      }
    }
    return false;
  }

  // FuncOk over the manifest's func_id array, where [-1] says the kernel is
  // not known (no ids).
  bool ManifestFuncIdsOk(const std::vector<int64_t>& func_ids) const {
    const bool unknown = func_ids.size() == 1 && func_ids[0] == -1;
    return FuncOk(func_ids.begin(), unknown ? func_ids.begin() : func_ids.end());
  }

  // The whole predicate over a stored row (`stats`: null when none stored).
  bool Matches(const ManifestRow& r, const StatsRow* stats = nullptr) const {
    return StepOk(r.step) && OverflowOk(r.overflow) &&
           NonfiniteOk(r.nonfinite || (stats != nullptr && stats->has_nonfinite())) && TaskOk(r.task_id) &&
           StageOk(r.stage) && RoleOk(r.role) && KindOk(r.kind) && ArgIndexOk(r.arg_index) &&
           DTypeOk(r.dtype) &&
           FuncOk(r.func_ids, r.func_ids + std::min<uint32_t>(r.func_count, kMaxRecordFuncIds));
  }
};

}  // namespace argsdump

#endif  // ARGSDUMP_FORMAT_ARG_FILTER_H_
