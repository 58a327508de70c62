#include "device/workload.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/files.h"
#include "google/protobuf/util/json_util.h"

namespace argsdump {
namespace {

absl::Status FieldError(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

std::optional<abi::ArgRole> RoleFromName(const std::string& role) {
  if (role == "input" || role == "in") return abi::ArgRole::kInput;
  if (role == "output" || role == "out") return abi::ArgRole::kOutput;
  if (role == "inout") return abi::ArgRole::kInOut;
  return std::nullopt;
}

DataType ScalarDtype(const v1::ScalarSpec& s) {
  if (s.dtype().empty()) return DataType::kFloat32;
  return *DataTypeFromName(s.dtype());
}

bool IsScalarType(DataType d) {
  switch (d) {
    case DataType::kFloat32: case DataType::kFloat64: case DataType::kInt8:
    case DataType::kInt16: case DataType::kInt32: case DataType::kInt64:
    case DataType::kUint8: case DataType::kUint16: case DataType::kUint32:
    case DataType::kUint64: case DataType::kBool:
      return true;
    default:
      return false;
  }
}

std::vector<std::string> TaskFuncs(const v1::TaskSpec& t) {
  std::vector<std::string> funcs(t.funcs().begin(), t.funcs().end());
  if (!t.func().empty()) funcs.insert(funcs.begin(), t.func());
  return funcs;
}

// Writes `value` as element `i` of a buffer of `dtype`. FP8/FP4 take the
// value as raw bits.
void StoreElement(uint8_t* data, DataType dtype, uint64_t i, double value) {
  switch (dtype) {
    case DataType::kFloat32: { float v = static_cast<float>(value); std::memcpy(data + 4 * i, &v, 4); break; }
    case DataType::kFloat64: std::memcpy(data + 8 * i, &value, 8); break;
    case DataType::kFloat16: {
      // Round to nearest half (normal range; subnormals flush to zero).
      float f = static_cast<float>(value);
      uint32_t b;
      std::memcpy(&b, &f, 4);
      const uint32_t sign = (b >> 16) & 0x8000;
      int32_t exp = static_cast<int32_t>((b >> 23) & 0xFF) - 127 + 15;
      uint32_t mant = b & 0x7FFFFF;
      uint16_t h;
      if (std::isnan(f)) h = static_cast<uint16_t>(sign | 0x7E00);
      else if (exp >= 31) h = static_cast<uint16_t>(sign | 0x7C00);
      else if (exp <= 0) h = static_cast<uint16_t>(sign);
      else {
        uint32_t r = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
        if ((mant & 0x1FFF) > 0x1000 || ((mant & 0x1FFF) == 0x1000 && (r & 1))) ++r;
        h = static_cast<uint16_t>(sign | r);
      }
      std::memcpy(data + 2 * i, &h, 2);
      break;
    }
    case DataType::kBfloat16: {
      float f = static_cast<float>(value);
      uint32_t b;
      std::memcpy(&b, &f, 4);
      const uint16_t h = static_cast<uint16_t>((b + 0x7FFF + ((b >> 16) & 1)) >> 16);
      std::memcpy(data + 2 * i, &h, 2);
      break;
    }
    case DataType::kInt8: case DataType::kUint8: case DataType::kBool:
    case DataType::kFp8E4M3Fn: case DataType::kFp8E8M0:
      data[i] = static_cast<uint8_t>(static_cast<int64_t>(value));
      break;
    case DataType::kInt16: case DataType::kUint16: {
      uint16_t v = static_cast<uint16_t>(static_cast<int64_t>(value));
      std::memcpy(data + 2 * i, &v, 2);
      break;
    }
    case DataType::kInt32: case DataType::kUint32: {
      uint32_t v = static_cast<uint32_t>(static_cast<int64_t>(value));
      std::memcpy(data + 4 * i, &v, 4);
      break;
    }
    case DataType::kInt64: { int64_t v = static_cast<int64_t>(value); std::memcpy(data + 8 * i, &v, 8); break; }
    case DataType::kUint64: { uint64_t v = static_cast<uint64_t>(value); std::memcpy(data + 8 * i, &v, 8); break; }
    case DataType::kFp4E2M1: {
      const uint8_t nib = static_cast<uint8_t>(static_cast<int64_t>(value)) & 0xF;
      data[i / 2] = (i & 1) ? static_cast<uint8_t>((data[i / 2] & 0x0F) | (nib << 4))
                            : static_cast<uint8_t>((data[i / 2] & 0xF0) | nib);
      break;
    }
  }
}

// One typed lvalue per scalar var, so dump(var) selects by identity.
struct ScalarBox {
  union {
    float f32;
    double f64;
    int8_t i8;
    int16_t i16;
    int32_t i32;
    int64_t i64;
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
    bool b;
  };
  DataType dtype;
};

void SetBox(ScalarBox* box, DataType dtype, double v) {
  box->dtype = dtype;
  switch (dtype) {
    case DataType::kFloat32: box->f32 = static_cast<float>(v); break;
    case DataType::kFloat64: box->f64 = v; break;
    case DataType::kInt8: box->i8 = static_cast<int8_t>(v); break;
    case DataType::kInt16: box->i16 = static_cast<int16_t>(v); break;
    case DataType::kInt32: box->i32 = static_cast<int32_t>(v); break;
    case DataType::kInt64: box->i64 = static_cast<int64_t>(v); break;
    case DataType::kUint8: box->u8 = static_cast<uint8_t>(v); break;
    case DataType::kUint16: box->u16 = static_cast<uint16_t>(v); break;
    case DataType::kUint32: box->u32 = static_cast<uint32_t>(v); break;
    case DataType::kUint64: box->u64 = static_cast<uint64_t>(v); break;
    default: box->b = v != 0; break;
  }
}

template <typename F>
absl::Status WithBox(ScalarBox& box, F f) {
  switch (box.dtype) {
    case DataType::kFloat32: return f(box.f32);
    case DataType::kFloat64: return f(box.f64);
    case DataType::kInt8: return f(box.i8);
    case DataType::kInt16: return f(box.i16);
    case DataType::kInt32: return f(box.i32);
    case DataType::kInt64: return f(box.i64);
    case DataType::kUint8: return f(box.u8);
    case DataType::kUint16: return f(box.u16);
    case DataType::kUint32: return f(box.u32);
    case DataType::kUint64: return f(box.u64);
    default: return f(box.b);
  }
}

v1::BufferSpec* AddBuffer(v1::WorkloadSpec* w, const std::string& name, const char* dtype,
                          std::vector<uint32_t> shape) {
  v1::BufferSpec* b = w->add_buffers();
  b->set_name(name);
  b->set_dtype(dtype);
  for (uint32_t s : shape) b->add_shape(s);
  return b;
}

v1::TaskSpec* AddTask(v1::WorkloadSpec* w, std::vector<std::string> funcs) {
  v1::TaskSpec* t = w->add_tasks();
  if (funcs.size() == 1) {
    t->set_func(funcs[0]);
  } else {
    for (auto& f : funcs) t->add_funcs(f);
  }
  return t;
}

void AddTensorArg(v1::TaskSpec* t, const std::string& tensor, const char* role,
                  bool dump = false) {
  v1::ArgSpec* a = t->add_args();
  a->set_tensor(tensor);
  a->set_role(role);
  a->set_dump(dump);
}

void AddScalarArg(v1::TaskSpec* t, const char* dtype, double value, bool dump = false) {
  v1::ArgSpec* a = t->add_args();
  a->mutable_scalar()->set_dtype(dtype);
  a->mutable_scalar()->set_value(value);
  a->set_dump(dump);
}

// crash_example*: the crash kernel of each variant (crash_example_none runs
// copy, an ordinary kernel of the same [in, out] signature, in its place).
struct CrashVariant {
  const char* workload;
  const char* kernel;
};
constexpr CrashVariant kCrashVariants[] = {
    {"crash_example", "crash_segv"},
    {"crash_example_abort", "crash_abort"},
    {"crash_example_terminate", "crash_terminate"},
    {"crash_example_exit", "crash_exit"},
    {"crash_example_fpe", "crash_fpe"},
    {"crash_example_wait", "crash_wait"},
    {"crash_example_none", "copy"},
};

// Task 3 of 8 crashes; tasks 0..2 feed it, 4 and 7 depend on it (never run
// when it crashes), 5 and 6 depend on nothing before them (they may run
// before, beside or after it).
void AddCrashExample(v1::WorkloadSpec* w, const char* crash_kernel) {
  constexpr uint32_t kN = 1024;
  v1::IotaSpec iota;
  iota.set_start(-4.0);
  iota.set_step(0.0078125);
  AddBuffer(w, "a", "FLOAT32", {kN})->mutable_init()->set_fill(1.5);
  AddBuffer(w, "b", "FLOAT32", {kN})->mutable_init()->mutable_iota()->CopyFrom(iota);
  for (const char* name : {"c", "d", "e", "f", "g", "h", "k", "out"}) {
    AddBuffer(w, name, "FLOAT32", {kN});
  }
  v1::TaskSpec* t0 = AddTask(w, {"add"});  // c = a + b
  AddTensorArg(t0, "a", "input");
  AddTensorArg(t0, "b", "input");
  AddTensorArg(t0, "c", "output", /*dump=*/true);
  v1::TaskSpec* t1 = AddTask(w, {"scale"});  // d = c * 0.5
  AddTensorArg(t1, "c", "input");
  AddTensorArg(t1, "d", "output");
  AddScalarArg(t1, "FLOAT32", 0.5, /*dump=*/true);
  v1::TaskSpec* t2 = AddTask(w, {"mul"});  // e = c * d
  AddTensorArg(t2, "c", "input");
  AddTensorArg(t2, "d", "input");
  AddTensorArg(t2, "e", "output");
  v1::TaskSpec* t3 = AddTask(w, {crash_kernel});  // f = e (half, then the crash)
  AddTensorArg(t3, "e", "input");
  AddTensorArg(t3, "f", "output");
  t3->set_dump(true);
  v1::TaskSpec* t4 = AddTask(w, {"relu"});  // g = relu(f)
  AddTensorArg(t4, "f", "input");
  AddTensorArg(t4, "g", "output", true);
  v1::TaskSpec* t5 = AddTask(w, {"add"});  // h = a + a
  AddTensorArg(t5, "a", "input");
  AddTensorArg(t5, "a", "input");
  AddTensorArg(t5, "h", "output");
  v1::TaskSpec* t6 = AddTask(w, {"add_scalar"});  // k = h + 1
  AddTensorArg(t6, "h", "input");
  AddTensorArg(t6, "k", "output");
  AddScalarArg(t6, "FLOAT32", 1.0);
  t6->set_dump(true);
  v1::TaskSpec* t7 = AddTask(w, {"add"});  // out = g + k
  AddTensorArg(t7, "g", "input");
  AddTensorArg(t7, "k", "input");
  AddTensorArg(t7, "out", "output", true);
}

}  // namespace

std::vector<std::string> BuiltinWorkloadNames() {
  std::vector<std::string> names = {"vector_example", "mixed_example", "hang_example"};
  for (const CrashVariant& v : kCrashVariants) names.push_back(v.workload);
  return names;
}

namespace {

// vector_example: c = a + b, then f = c + 1 (both dumped).
void AddVectorExample(v1::WorkloadSpec* w) {
  AddBuffer(w, "a", "FLOAT32", {16384})->mutable_init()->set_fill(2.0);
  AddBuffer(w, "b", "FLOAT32", {16384})->mutable_init()->set_fill(3.0);
  AddBuffer(w, "c", "FLOAT32", {16384});
  AddBuffer(w, "f", "FLOAT32", {16384});
  v1::TaskSpec* add = AddTask(w, {"add"});
  AddTensorArg(add, "a", "input");
  AddTensorArg(add, "b", "input");
  AddTensorArg(add, "c", "output", /*dump=*/true);
  v1::TaskSpec* plus_one = AddTask(w, {"add_scalar"});
  AddTensorArg(plus_one, "c", "input");
  AddTensorArg(plus_one, "f", "output");
  AddScalarArg(plus_one, "FLOAT32", 1.0);
  plus_one->set_dump(true);
}

// mixed_example: a matmul, relu, softmax, accumulate, a transposed view's
// copy, a three-kernel task and a strided window's scale.
void AddMixedExample(v1::WorkloadSpec* w) {
  v1::IotaSpec iota;
  iota.set_start(-1.0);
  iota.set_step(0.015625);
  AddBuffer(w, "x", "FLOAT32", {8, 16})->mutable_init()->mutable_iota()->CopyFrom(iota);
  AddBuffer(w, "w", "FLOAT32", {16, 8})->mutable_init()->set_fill(0.125);
  AddBuffer(w, "h", "FLOAT32", {8, 8});
  AddBuffer(w, "r", "FLOAT32", {8, 8});
  AddBuffer(w, "p", "FLOAT32", {8, 8});
  AddBuffer(w, "acc", "FLOAT32", {8, 8})->mutable_init()->set_fill(1.0);
  AddBuffer(w, "pt", "FLOAT32", {8, 8});
  AddBuffer(w, "s", "FLOAT32", {8, 8});
  AddBuffer(w, "pr", "FLOAT32", {8, 8});
  AddBuffer(w, "mx", "FLOAT32", {8, 8});
  AddBuffer(w, "win", "FLOAT32", {4, 4});
  v1::ViewSpec* t = w->add_views();
  t->set_name("p_t");
  t->set_buffer("p");
  t->add_shape(8); t->add_shape(8); t->add_strides(1); t->add_strides(8);
  v1::ViewSpec* v = w->add_views();
  v->set_name("x_win");
  v->set_buffer("x");
  v->add_shape(4); v->add_shape(4); v->add_strides(32); v->add_strides(2);
  v->set_start_offset(3);
  v1::TaskSpec* mm = AddTask(w, {"matmul"});
  AddTensorArg(mm, "x", "input");
  AddTensorArg(mm, "w", "input");
  AddTensorArg(mm, "h", "output", true);
  v1::TaskSpec* relu = AddTask(w, {"relu"});
  AddTensorArg(relu, "h", "input");
  AddTensorArg(relu, "r", "output");
  v1::TaskSpec* sm = AddTask(w, {"softmax"});
  AddTensorArg(sm, "r", "input");
  AddTensorArg(sm, "p", "output", true);
  v1::TaskSpec* acc = AddTask(w, {"accumulate"});
  AddTensorArg(acc, "acc", "inout", true);
  AddTensorArg(acc, "p", "input");
  v1::TaskSpec* tr = AddTask(w, {"copy"});
  AddTensorArg(tr, "p_t", "input", true);
  AddTensorArg(tr, "pt", "output");
  v1::TaskSpec* mix = AddTask(w, {"mix_sum", "mix_prod", "mix_max"});
  AddTensorArg(mix, "acc", "input");
  AddTensorArg(mix, "pt", "input");
  AddTensorArg(mix, "s", "output");
  AddTensorArg(mix, "pr", "output");
  AddTensorArg(mix, "mx", "output");
  mix->set_dump(true);
  v1::TaskSpec* sc = AddTask(w, {"scale"});
  AddTensorArg(sc, "x_win", "input");
  AddTensorArg(sc, "win", "output", true);
  AddScalarArg(sc, "FLOAT32", 0.5, true);
}

// hang_example: an add, then a kernel that never returns.
void AddHangExample(v1::WorkloadSpec* w) {
  AddBuffer(w, "a", "FLOAT32", {1024})->mutable_init()->set_fill(1.0);
  AddBuffer(w, "b", "FLOAT32", {1024})->mutable_init()->set_fill(2.0);
  AddBuffer(w, "c", "FLOAT32", {1024});
  AddBuffer(w, "d", "FLOAT32", {1024});
  v1::TaskSpec* add = AddTask(w, {"add"});
  AddTensorArg(add, "a", "input");
  AddTensorArg(add, "b", "input");
  AddTensorArg(add, "c", "output");
  add->set_dump(true);
  v1::TaskSpec* hang = AddTask(w, {"hang"});
  AddTensorArg(hang, "c", "input");
  AddTensorArg(hang, "d", "output");
  hang->set_dump(true);
}

}  // namespace

absl::StatusOr<v1::WorkloadSpec> BuiltinWorkload(const std::string& name) {
  v1::WorkloadSpec w;
  w.set_name(name);
  if (name == "vector_example") {
    AddVectorExample(&w);
  } else if (name == "mixed_example") {
    AddMixedExample(&w);
  } else if (name == "hang_example") {
    AddHangExample(&w);
  } else if (auto v = std::find_if(std::begin(kCrashVariants), std::end(kCrashVariants),
                                   [&](const CrashVariant& c) { return name == c.workload; });
             v != std::end(kCrashVariants)) {
    AddCrashExample(&w, v->kernel);
  } else {
    return absl::NotFoundError(absl::StrCat("no built-in workload '", name, "' (built in: ",
                                            absl::StrJoin(BuiltinWorkloadNames(), ", "), ")"));
  }
  return w;
}

absl::StatusOr<v1::WorkloadSpec> LoadWorkloadFile(const std::string& path,
                                                  const KernelRegistry& kernels) {
  // A directory, FIFO or device is refused by type (never read or waited
  // on), and a file over the reader's bound by size.
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("workload file ", text.status().message(),
                                     " (pass a .json workload file or a built-in name)"));
  }
  std::string base = path.substr(path.find_last_of('/') + 1);
  return ParseWorkloadJson(*text, absl::StrCat("workload file ", path),
                           base.substr(0, base.find('.')), kernels);
}

absl::StatusOr<v1::WorkloadSpec> ParseWorkloadJson(const std::string& text,
                                                   const std::string& source,
                                                   const std::string& default_name,
                                                   const KernelRegistry& kernels) {
  v1::WorkloadSpec spec;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  auto parsed = google::protobuf::util::JsonStringToMessage(text, &spec, options);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": not a valid workload: ", std::string(parsed.message())));
  }
  if (spec.name().empty()) spec.set_name(default_name);
  if (absl::Status s = ValidateWorkload(spec, kernels); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", s.message()));
  }
  return spec;
}

namespace {

// The first dozen names a workload defines, for an error naming a missing one.
std::string KnownNames(const std::set<std::string>& names) {
  std::vector<std::string> v(names.begin(), names.end());
  if (v.size() > 12) v.resize(12);
  return absl::StrJoin(v, ", ");
}

// A buffer's or view's name (field `f`): present, and not one already in `names`.
absl::Status AddName(const std::string& f, const std::string& name,
                     std::set<std::string>* names) {
  if (name.empty()) return FieldError(f + ".name", "missing");
  if (!names->insert(name).second) {
    return FieldError(f + ".name", absl::StrCat("'", name, "' is used twice"));
  }
  return absl::OkStatus();
}

// Buffer `b` (field `f`); its element count.
absl::StatusOr<uint64_t> ValidateBuffer(const v1::BufferSpec& b, const std::string& f,
                                        std::set<std::string>* names) {
  if (absl::Status s = AddName(f, b.name(), names); !s.ok()) return s;
  if (!DataTypeFromName(b.dtype())) {
    return FieldError(f + ".dtype", absl::StrCat("'", b.dtype(), "' is not a dtype (expected "
                                                 "FLOAT32, FLOAT16, BFLOAT16, INT32, ...)"));
  }
  if (b.shape_size() == 0 || b.shape_size() > 5) {
    return FieldError(f + ".shape", "expected 1 to 5 dims");
  }
  uint64_t n = 1;
  for (uint32_t s : b.shape()) {
    if (s == 0) return FieldError(f + ".shape", "a dim of 0");
    n *= s;
    if (n > (uint64_t{1} << 32)) return FieldError(f + ".shape", "more than 2^32 elements");
  }
  const v1::InitSpec& init = b.init();
  const int ways = init.has_fill() + init.has_iota() + (init.values_size() > 0);
  if (ways > 1) return FieldError(f + ".init", "give one of fill, iota, values");
  if (init.values_size() > 0 && static_cast<uint64_t>(init.values_size()) != n) {
    return FieldError(f + ".init.values",
                      absl::StrCat(init.values_size(), " values for ", n, " elements"));
  }
  return n;
}

// View `v` (field `f`) over one of the buffers (name -> element count).
absl::Status ValidateView(const v1::ViewSpec& v, const std::string& f,
                          const std::map<std::string, uint64_t>& buffer_elements,
                          std::set<std::string>* names) {
  if (absl::Status s = AddName(f, v.name(), names); !s.ok()) return s;
  auto it = buffer_elements.find(v.buffer());
  if (it == buffer_elements.end()) {
    return FieldError(f + ".buffer", absl::StrCat("no buffer named '", v.buffer(), "'"));
  }
  if (v.shape_size() == 0 || v.shape_size() > 5 || v.shape_size() != v.strides_size()) {
    return FieldError(f + ".shape", "expected 1 to 5 dims and one stride per dim");
  }
  TensorView tv;
  tv.ndims = static_cast<uint32_t>(v.shape_size());
  for (int d = 0; d < v.shape_size(); ++d) {
    tv.shape[d] = v.shape(d);
    tv.strides[d] = v.strides(d);
  }
  tv.start_offset = v.start_offset();
  if (tv.extent_elements() > it->second) {
    return FieldError(f, absl::StrCat("reaches element ", tv.extent_elements() - 1,
                                      " of buffer '", v.buffer(), "' which has ", it->second));
  }
  return absl::OkStatus();
}

// Argument `a` of a task (field `af`): a scalar of a scalar dtype, or a
// tensor naming a buffer or view (`names`) with a role.
absl::Status ValidateArg(const v1::ArgSpec& a, const std::string& af,
                         const std::set<std::string>& names) {
  if (a.has_scalar() == !a.tensor().empty()) {
    return FieldError(af, "give either tensor (with role) or scalar");
  }
  if (a.has_scalar()) {
    const auto d = a.scalar().dtype().empty() ? std::optional<DataType>(DataType::kFloat32)
                                              : DataTypeFromName(a.scalar().dtype());
    if (!d || !IsScalarType(*d)) {
      return FieldError(af + ".scalar.dtype",
                        absl::StrCat("'", a.scalar().dtype(), "' is not a scalar dtype "
                                     "(FLOAT32, FLOAT64, INT8..INT64, UINT8..UINT64, BOOL)"));
    }
    return absl::OkStatus();
  }
  if (!names.count(a.tensor())) {
    return FieldError(af + ".tensor", absl::StrCat("no buffer or view named '", a.tensor(),
                                                   "' (known: ", KnownNames(names), ")"));
  }
  if (!RoleFromName(a.role())) {
    return FieldError(af + ".role", absl::StrCat("'", a.role(),
                                                 "' (expected input, output or inout)"));
  }
  return absl::OkStatus();
}

// Task `t` (field `f`): its kernels, each argument, and how many there are.
absl::Status ValidateTask(const v1::TaskSpec& t, const std::string& f,
                          const KernelRegistry& kernels, const std::set<std::string>& names) {
  const std::vector<std::string> funcs = TaskFuncs(t);
  if (funcs.empty() || funcs.size() > 3) {
    return FieldError(f + ".func", "expected one kernel (func) or up to three (funcs)");
  }
  for (const std::string& fn : funcs) {
    if (!kernels.IdOf(fn).ok()) {
      return FieldError(f + ".func", absl::StrCat("no kernel named '", fn, "'"));
    }
  }
  int tensors = 0, scalars = 0;
  for (int j = 0; j < t.args_size(); ++j) {
    const v1::ArgSpec& a = t.args(j);
    if (absl::Status s = ValidateArg(a, absl::StrCat(f, ".args[", j, "]"), names); !s.ok()) {
      return s;
    }
    if (a.has_scalar()) {
      ++scalars;
    } else {
      ++tensors;
    }
  }
  if (tensors > static_cast<int>(CoreTaskArgs::kMaxTensors) ||
      scalars > static_cast<int>(CoreTaskArgs::kMaxScalars)) {
    return FieldError(f + ".args", "too many args (16 tensors, 16 scalars at most)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateWorkload(const v1::WorkloadSpec& spec, const KernelRegistry& kernels) {
  std::map<std::string, uint64_t> buffer_elements;
  std::set<std::string> names;  // of buffers and views
  for (int i = 0; i < spec.buffers_size(); ++i) {
    const v1::BufferSpec& b = spec.buffers(i);
    auto n = ValidateBuffer(b, absl::StrCat("buffers[", i, "]"), &names);
    if (!n.ok()) return n.status();
    buffer_elements[b.name()] = *n;
  }
  for (int i = 0; i < spec.views_size(); ++i) {
    absl::Status s =
        ValidateView(spec.views(i), absl::StrCat("views[", i, "]"), buffer_elements, &names);
    if (!s.ok()) return s;
  }
  for (int i = 0; i < spec.tasks_size(); ++i) {
    absl::Status s = ValidateTask(spec.tasks(i), absl::StrCat("tasks[", i, "]"), kernels, names);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

namespace {

// Writes `init` (fill, iota or values) over the `n` elements at `data`.
void InitElements(const v1::InitSpec& init, DataType dtype, uint8_t* data, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) {
    const double v = init.has_fill()   ? init.fill()
                     : init.has_iota() ? init.iota().start() + init.iota().step() * i
                                       : init.values(static_cast<int>(i));
    StoreElement(data, dtype, i, v);
  }
}

bool HasInit(const v1::InitSpec& init) {
  return init.has_fill() || init.has_iota() || init.values_size() > 0;
}

// A buffer of the workload and what it holds at the start of a step: zeros
// and its init, if any. A small buffer's initial bytes are kept and copied
// back; a large one's are written again (a copy would double its memory).
struct PreparedBuffer {
  static constexpr uint64_t kKeptInitialBytes = 1 << 20;
  Tensor tensor;
  DataType dtype;
  bool has_init = false;
  v1::InitSpec init;
  std::vector<uint8_t> initial;  // has_init and small: the bytes it starts with
  void Reset() {
    DeviceBuffer& b = *tensor.buffer();
    b.Zero();
    if (!initial.empty()) {
      std::memcpy(b.data(), initial.data(), initial.size());
    } else if (has_init) {
      InitElements(init, dtype, b.data(), tensor.numel());
    }
  }
};

// A task's argument, resolved: a tensor (the prepared tensor it names, its
// role) or a scalar (its box among the task's).
struct PreparedArg {
  const Tensor* tensor = nullptr;
  abi::ArgRole role = abi::ArgRole::kInput;
  int box = -1;
  bool dump = false;
};

struct PreparedTask {
  std::vector<uint16_t> func_ids;
  std::vector<PreparedArg> args;
  // Its scalars: a named one shared by every arg that names it, anonymous
  // ones one each. dump(...) selects a scalar by the box it was added from.
  std::vector<ScalarBox> boxes;
  bool dump = false;
};

// The spec's buffers, allocated on the device and filled as their init says.
absl::Status AllocBuffers(const v1::WorkloadSpec& spec, SimRuntime* runtime,
                          std::map<std::string, Tensor>* tensors,
                          std::vector<PreparedBuffer>* buffers) {
  for (int i = 0; i < spec.buffers_size(); ++i) {
    const v1::BufferSpec& b = spec.buffers(i);
    const DataType dtype = *DataTypeFromName(b.dtype());
    auto t = runtime->Alloc(dtype, {b.shape().begin(), b.shape().end()});
    if (!t.ok()) {
      uint64_t numel = 1;
      for (uint32_t d : b.shape()) numel = d != 0 && numel > UINT64_MAX / d ? UINT64_MAX : numel * d;
      return FieldError(absl::StrCat("buffers[", i, "] '", b.name(), "'"),
                        absl::StrCat(std::string(b.dtype()), " ", numel, " elements: ",
                                     t.status().message()));
    }
    PreparedBuffer prepared;
    prepared.tensor = *t;
    prepared.dtype = dtype;
    prepared.has_init = HasInit(b.init());
    if (prepared.has_init) {
      uint8_t* data = t->buffer()->data();
      InitElements(b.init(), dtype, data, t->numel());
      if (t->buffer()->bytes() <= PreparedBuffer::kKeptInitialBytes) {
        prepared.initial.assign(data, data + t->buffer()->bytes());
      } else {
        prepared.init = b.init();
      }
    }
    buffers->push_back(std::move(prepared));
    (*tensors)[b.name()] = *t;
  }
  return absl::OkStatus();
}

// Task `t`'s kernels and args, resolved against the prepared `tensors`.
PreparedTask PrepareTask(const v1::TaskSpec& t, const KernelRegistry& kernels,
                         const std::map<std::string, Tensor>& tensors) {
  PreparedTask task;
  for (const std::string& fn : TaskFuncs(t)) task.func_ids.push_back(*kernels.IdOf(fn));
  task.dump = t.dump();
  std::map<std::string, int> vars;  // a named scalar's box
  for (const v1::ArgSpec& a : t.args()) {
    PreparedArg arg;
    arg.dump = a.dump();
    if (!a.has_scalar()) {
      arg.tensor = &tensors.at(a.tensor());
      arg.role = *RoleFromName(a.role());
    } else if (auto named = vars.find(a.scalar().var());
               !a.scalar().var().empty() && named != vars.end()) {
      arg.box = named->second;  // the first arg naming it set its value
    } else {
      arg.box = static_cast<int>(task.boxes.size());
      task.boxes.emplace_back();
      SetBox(&task.boxes.back(), ScalarDtype(a.scalar()), a.scalar().value());
      if (!a.scalar().var().empty()) vars[a.scalar().var()] = arg.box;
    }
    task.args.push_back(arg);
  }
  return task;
}

// Task `task` (tasks[i]): its args (tensors by role, scalars from its
// boxes) and what it marks for the dump, submitted to `runtime`.
absl::Status SubmitTask(PreparedTask& task, int i, SimRuntime* runtime) {
  CoreTaskArgs args;
  for (const PreparedArg& a : task.args) {
    absl::Status s = a.box >= 0 ? WithBox(task.boxes[a.box],
                                          [&](auto& v) { return args.add_scalar(v); })
                     : a.role == abi::ArgRole::kInput  ? args.add_input(*a.tensor)
                     : a.role == abi::ArgRole::kOutput ? args.add_output(*a.tensor)
                                                       : args.add_inout(*a.tensor);
    if (!s.ok()) return s;
  }
  for (size_t j = 0; j < task.args.size(); ++j) {
    const PreparedArg& a = task.args[j];
    if (!a.dump) continue;
    absl::Status s = a.box >= 0
                         ? WithBox(task.boxes[a.box], [&](auto& v) { return args.dump(v); })
                         : args.dump(*a.tensor);
    if (!s.ok()) return FieldError(absl::StrCat("tasks[", i, "].args[", j, "].dump"), std::string(s.message()));
  }
  if (task.dump) {
    if (absl::Status s = args.dump(); !s.ok()) return s;
  }
  auto id = runtime->Submit(task.func_ids, std::move(args));
  if (!id.ok()) {
    return FieldError(absl::StrCat("tasks[", i, "]"), std::string(id.status().message()));
  }
  return absl::OkStatus();
}

}  // namespace

struct PreparedWorkload::Plan {
  SimRuntime* runtime = nullptr;
  std::map<std::string, Tensor> tensors;  // by buffer or view name
  std::vector<PreparedBuffer> buffers;
  std::vector<PreparedTask> tasks;
  // The buffers are as allocated and initialised: the first Submit leaves
  // them so.
  bool fresh = true;
};

PreparedWorkload::PreparedWorkload(std::unique_ptr<Plan> plan) : plan_(std::move(plan)) {}
PreparedWorkload::PreparedWorkload(PreparedWorkload&&) = default;
PreparedWorkload& PreparedWorkload::operator=(PreparedWorkload&&) = default;
PreparedWorkload::~PreparedWorkload() = default;

absl::StatusOr<PreparedWorkload> PreparedWorkload::Prepare(const v1::WorkloadSpec& spec,
                                                           const KernelRegistry& kernels,
                                                           SimRuntime* runtime) {
  if (absl::Status s = ValidateWorkload(spec, kernels); !s.ok()) return s;
  auto plan = std::make_unique<Plan>();
  plan->runtime = runtime;
  std::map<std::string, Tensor>& tensors = plan->tensors;
  if (absl::Status s = AllocBuffers(spec, runtime, &tensors, &plan->buffers); !s.ok()) return s;
  for (const v1::ViewSpec& v : spec.views()) {
    auto t = tensors[v.buffer()].View({v.shape().begin(), v.shape().end()},
                                      {v.strides().begin(), v.strides().end()},
                                      v.start_offset());
    if (!t.ok()) return t.status();
    tensors[v.name()] = *t;
  }
  plan->tasks.reserve(spec.tasks_size());
  for (const v1::TaskSpec& t : spec.tasks()) {
    plan->tasks.push_back(PrepareTask(t, kernels, tensors));
  }
  return PreparedWorkload(std::move(plan));
}

absl::Status PreparedWorkload::Submit() {
  Plan& p = *plan_;
  if (!p.fresh) {
    if (p.runtime->tasks_completed() < p.runtime->tasks_submitted()) {
      return absl::FailedPreconditionError(
          "workload: submitted again while tasks submitted before still run (its buffers are "
          "reset for each submission)");
    }
    for (PreparedBuffer& b : p.buffers) b.Reset();
  }
  p.fresh = false;
  for (size_t i = 0; i < p.tasks.size(); ++i) {
    if (absl::Status s = SubmitTask(p.tasks[i], static_cast<int>(i), p.runtime); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

const std::map<std::string, Tensor>& PreparedWorkload::tensors() const {
  return plan_->tensors;
}

absl::StatusOr<std::map<std::string, Tensor>> SubmitWorkload(const v1::WorkloadSpec& spec,
                                                             const KernelRegistry& kernels,
                                                             SimRuntime* runtime) {
  absl::StatusOr<PreparedWorkload> prepared = PreparedWorkload::Prepare(spec, kernels, runtime);
  if (!prepared.ok()) return prepared.status();
  if (absl::Status s = prepared->Submit(); !s.ok()) return s;
  return prepared->tensors();
}

}  // namespace argsdump
