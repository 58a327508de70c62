#include "format/arg_filter.h"

#include "absl/strings/str_cat.h"
#include "format/names.h"

namespace argsdump {

ArgFilter ArgFilter::FromProto(const v1::ArgFilter& f) {
  ArgFilter q;
  if (f.has_task_id()) q.task_id = f.task_id();
  q.stage = f.stage();
  q.role = f.role();
  q.kind = f.kind();
  if (f.has_arg_index()) q.arg_index = f.arg_index();
  if (f.has_func_id()) q.func_id = f.func_id();
  q.func_unknown = f.func_unknown();
  if (f.has_func_name()) q.func_name = f.func_name();
  if (f.has_func_type()) q.func_type = f.func_type();
  q.dtype = f.dtype();
  if (f.has_step()) q.step = f.step();
  if (f.has_overflow()) q.overflow = f.overflow();
  if (f.has_has_nonfinite()) q.has_nonfinite = f.has_nonfinite();
  return q;
}

v1::ArgFilter ArgFilter::ToProto() const {
  v1::ArgFilter f;
  if (task_id) f.set_task_id(*task_id);
  f.set_stage(static_cast<v1::Stage>(stage));
  f.set_role(static_cast<v1::Role>(role));
  f.set_kind(static_cast<v1::Kind>(kind));
  if (arg_index) f.set_arg_index(*arg_index);
  if (func_id) f.set_func_id(*func_id);
  if (func_unknown) f.set_func_unknown(true);
  if (func_name) f.set_func_name(*func_name);
  if (func_type) f.set_func_type(*func_type);
  f.set_dtype(static_cast<v1::DType>(dtype));
  if (step) f.set_step(*step);
  if (overflow) f.set_overflow(*overflow);
  if (has_nonfinite) f.set_has_nonfinite(*has_nonfinite);
  return f;
}

bool ArgFilter::any() const {
  return task_id || stage != 0 || role != 0 || kind != 0 || arg_index || func_id ||
         func_unknown || func_name || func_type || dtype != 0 || step || overflow || has_nonfinite;
}

std::string ArgFilter::Describe() const {
  std::string out;
  auto add = [&out](absl::string_view what) {
    absl::StrAppend(&out, out.empty() ? "" : " ", what);
  };
  if (task_id) add(absl::StrCat("task ", TaskIdHex(*task_id)));
  if (step) add(absl::StrCat("step ", *step));
  if (stage != 0) add(absl::StrCat("stage ", StageName(static_cast<v1::Stage>(stage))));
  if (role != 0) add(absl::StrCat("role ", RoleName(static_cast<v1::Role>(role))));
  if (kind != 0) add(absl::StrCat("kind ", KindName(static_cast<v1::Kind>(kind))));
  if (arg_index) add(absl::StrCat("arg ", *arg_index));
  if (func_id) add(absl::StrCat("func ", *func_id));
  if (func_unknown) add("func unknown");
  if (func_name) add(absl::StrCat("func ", *func_name));
  if (func_type) add(absl::StrCat("func type ", *func_type));
  if (dtype != 0) add(absl::StrCat("dtype ", DTypeName(dtype)));
  if (overflow) add(*overflow ? "overflow" : "not overflow");
  if (has_nonfinite) add(*has_nonfinite ? "non-finite" : "finite");
  return out.empty() ? "all" : out;
}

}  // namespace argsdump
