#include "format/kernel_table.h"

#include <string>
#include <vector>

#include "format/arg_filter.h"
#include "gtest/gtest.h"

namespace argsdump {
namespace {

v1::Kernel K(uint32_t id, std::string name, std::string type,
             std::vector<v1::ArgDirection> dirs, std::vector<v1::DType> dtypes = {}) {
  v1::Kernel k;
  k.set_func_id(id);
  k.set_name(std::move(name));
  k.set_type(std::move(type));
  for (size_t i = 0; i < dirs.size(); ++i) {
    v1::KernelArg* a = k.add_signature();
    a->set_direction(dirs[i]);
    if (i < dtypes.size()) a->set_dtype(dtypes[i]);
  }
  return k;
}

constexpr v1::ArgDirection kIn = v1::ARG_DIRECTION_IN, kOut = v1::ARG_DIRECTION_OUT,
                           kScalar = v1::ARG_DIRECTION_SCALAR;

KernelTable Table() {
  KernelTable t;
  *t.Add() = K(0, "add", "elementwise", {kIn, kIn, kOut},
               {v1::DTYPE_FLOAT32, v1::DTYPE_FLOAT32, v1::DTYPE_FLOAT32});
  *t.Add() = K(1, "scale", "elementwise", {kIn, kOut, kScalar});
  *t.Add() = K(2, "matmul", "matmul", {kIn, kIn, kOut});
  *t.Add() = K(3, "mix_sum", "mix", {kIn, kIn, kOut});
  *t.Add() = K(4, "copy", "", {kIn, kOut});
  return t;
}

TEST(KernelTableTest, AGoodTablePassesAndDescribesItsKernels) {
  const KernelTable t = Table();
  ASSERT_TRUE(CheckKernelTable(t).ok());
  EXPECT_EQ(DescribeKernel(*FindKernel(t, 0)),
            "add (elementwise) [in FLOAT32, in FLOAT32, out FLOAT32]");
  EXPECT_EQ(DescribeKernel(*FindKernel(t, 4)), "copy [in, out]");
  EXPECT_EQ(FindKernel(t, 9), nullptr);
  const std::vector<uint32_t> mix = {3, 0, 9};
  EXPECT_EQ(KernelNames(t, mix.begin(), mix.end()), "mix_sum+add+#9");
  const std::vector<int64_t> unknown = {-1};
  EXPECT_EQ(KernelNames(t, unknown.begin(), unknown.end()), "#-1");
  EXPECT_EQ(ArgDirectionFromName("inout"), v1::ARG_DIRECTION_INOUT);
  EXPECT_FALSE(ArgDirectionFromName("sideways"));
}

// Func ids out of order (a table read back need not be in registration
// order) are found all the same.
TEST(KernelTableTest, FindsKernelsOutOfOrder) {
  KernelTable t;
  *t.Add() = K(7, "b", "", {});
  *t.Add() = K(0, "a", "", {});
  ASSERT_TRUE(CheckKernelTable(t).ok());
  EXPECT_EQ(FindKernel(t, 0)->name(), "a");
  EXPECT_EQ(FindKernel(t, 7)->name(), "b");
}

// Every way a hostile table breaks the bounds, named by entry and field.
TEST(KernelTableTest, HostileTablesAreRefusedNamingTheField) {
  struct Case {
    std::string what;
    KernelTable table;
    std::string message;
  };
  std::vector<Case> cases;
  auto one = [](v1::Kernel k) {
    KernelTable t;
    *t.Add() = std::move(k);
    return t;
  };
  cases.push_back({"empty name", one(K(0, "", "", {})), "kernels[0].name: empty"});
  cases.push_back({"long name", one(K(0, std::string(129, 'a'), "", {})),
                   "kernels[0].name: 129 bytes, at most 128"});
  cases.push_back({"not UTF-8", one(K(0, "a\xff", "", {})), "kernels[0].name: not UTF-8"});
  cases.push_back({"overlong UTF-8", one(K(0, "\xc0\xaf", "", {})), "not UTF-8"});
  cases.push_back({"newline", one(K(0, "a\nb", "", {})), "a control character (10)"});
  cases.push_back({"NUL", one(K(0, std::string("a\0b", 3), "", {})),
                   "a control character (0)"});
  cases.push_back({"long type", one(K(0, "a", std::string(65, 't'), {})),
                   "kernels[0].type: 65 bytes, at most 64"});
  cases.push_back({"func id", one(K(0xFFFF, "a", "", {})), "kernels[0].func_id: 65535"});
  cases.push_back({"direction", one(K(0, "a", "", {static_cast<v1::ArgDirection>(9)})),
                   "kernels[0].signature[0]: direction 9"});
  cases.push_back({"unspecified direction", one(K(0, "a", "", {v1::ARG_DIRECTION_UNSPECIFIED})),
                   "direction 0"});
  cases.push_back({"dtype", one(K(0, "a", "", {kIn}, {static_cast<v1::DType>(99)})),
                   "kernels[0].signature[0]: dtype 99"});
  cases.push_back({"scalar first", one(K(0, "a", "", {kScalar, kIn})),
                   "kernels[0].signature[1]: a tensor entry after a scalar entry"});
  cases.push_back({"long signature", one(K(0, "a", "", std::vector<v1::ArgDirection>(65, kIn))),
                   "kernels[0].signature: 65 entries, at most 64"});
  KernelTable twice_id = Table();
  *twice_id.Add() = K(2, "other", "", {});
  cases.push_back({"id twice", twice_id, "kernels[5].func_id: 2 is given twice"});
  KernelTable twice_name = Table();
  *twice_name.Add() = K(5, "add", "", {});
  cases.push_back({"name twice", twice_name, "kernels[5].name: \"add\" is given twice"});
  KernelTable many;
  for (uint32_t i = 0; i <= static_cast<uint32_t>(kMaxKernels); ++i) {
    *many.Add() = K(i, "k" + std::to_string(i), "", {});
  }
  cases.push_back({"too many", many, "kernels: 4097 kernels, at most 4096"});
  KernelTable big;
  for (uint32_t i = 0; i < 4000; ++i) {
    *big.Add() = K(i, std::string(120, 'n') + std::to_string(i), std::string(60, 't'),
                   std::vector<v1::ArgDirection>(64, kIn));
  }
  cases.push_back({"too many bytes", big, "kernels: more than 1048576 bytes"});
  for (const Case& c : cases) {
    const absl::Status s = CheckKernelTable(c.table);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << c.what << ": " << s;
    EXPECT_NE(s.message().find(c.message), absl::string_view::npos) << c.what << ": " << s;
  }
}

TEST(KernelTableTest, NamesAndTypesResolveIntoFuncIds) {
  const KernelTable t = Table();
  ArgFilter f;
  f.func_name = "matmul";
  ASSERT_TRUE(ResolveKernelFilter(t, &f).ok());
  EXPECT_EQ(*f.func_named, std::vector<uint32_t>{2});
  ArgFilter g;
  g.func_type = "elementwise";
  ASSERT_TRUE(ResolveKernelFilter(t, &g).ok());
  EXPECT_EQ(*g.func_named, (std::vector<uint32_t>{0, 1}));
  // Name and type together: both must hold (a kernel of that name and type).
  ArgFilter both;
  both.func_name = "add";
  both.func_type = "matmul";
  ASSERT_TRUE(ResolveKernelFilter(t, &both).ok());
  EXPECT_TRUE(both.func_named->empty());
  // Neither: nothing resolved, nothing changed.
  ArgFilter none;
  ASSERT_TRUE(ResolveKernelFilter(t, &none).ok());
  EXPECT_FALSE(none.func_named);
}

TEST(KernelTableTest, AnUnknownNameIsAnErrorListingTheKnownOnes) {
  ArgFilter f;
  f.func_name = "strided_affine";
  const absl::Status s = ResolveKernelFilter(Table(), &f);
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_TRUE(IsUnknownKernel(s));
  EXPECT_FALSE(IsUnknownKernel(absl::InvalidArgumentError("other")));
  EXPECT_EQ(s.message(),
            "no kernel named \"strided_affine\" in this capture; its kernels: add, copy, "
            "matmul, mix_sum, scale");
  ArgFilter g;
  g.func_type = "conv";
  EXPECT_EQ(ResolveKernelFilter(Table(), &g).message(),
            "no kernel of type \"conv\" in this capture; its types: elementwise, matmul, mix");
  ArgFilter h;
  h.func_name = "add";
  EXPECT_NE(ResolveKernelFilter(KernelTable(), &h).message().find("has no kernel table"),
            absl::string_view::npos);
  // A long table's names are cut at 40 in the message.
  KernelTable many;
  for (uint32_t i = 0; i < 100; ++i) *many.Add() = K(i, "k" + std::to_string(100 + i), "", {});
  EXPECT_NE(ResolveKernelFilter(many, &f).message().find(", and 60 more"),
            absl::string_view::npos);
}

TEST(KernelTableTest, ANameFilterMatchesRecordsOfItsKernelsOnly) {
  ArgFilter f;
  f.func_name = "mix_sum";
  ManifestRow r{};
  r.func_count = 2;
  r.func_ids[0] = 0;
  r.func_ids[1] = 3;
  // Unresolved, a name matches nothing (a caller that forgot to resolve
  // finds out at once).
  EXPECT_FALSE(f.Matches(r));
  ASSERT_TRUE(ResolveKernelFilter(Table(), &f).ok());
  EXPECT_TRUE(f.Matches(r));
  r.func_ids[1] = 2;
  EXPECT_FALSE(f.Matches(r));
  EXPECT_FALSE(f.ManifestFuncIdsOk({-1}));
  EXPECT_TRUE(f.ManifestFuncIdsOk({1, 3}));
  EXPECT_EQ(f.Describe(), "func mix_sum");
  // Through the proto and back: names travel, resolution does not.
  const ArgFilter back = ArgFilter::FromProto(f.ToProto());
  EXPECT_EQ(back.func_name, "mix_sum");
  EXPECT_FALSE(back.func_type);
  EXPECT_FALSE(back.func_named);
  EXPECT_TRUE(back.any());
}

}  // namespace
}  // namespace argsdump
