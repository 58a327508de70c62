#include "device/sim/core_task_args.h"

#include <memory>
#include <type_traits>
#include <utility>

#include "gtest/gtest.h"

namespace argsdump {
namespace {

// dump(...) must not accept temporaries: they name no added argument.
template <typename T, typename = void>
struct CanDump : std::false_type {};
template <typename T>
struct CanDump<T, std::void_t<decltype(std::declval<CoreTaskArgs&>().dump(std::declval<T>()))>>
    : std::true_type {};
static_assert(CanDump<float&>::value, "lvalues are selectable");
static_assert(CanDump<const double&>::value, "const lvalues too");
static_assert(!CanDump<float>::value, "a temporary float is rejected at compile time");
static_assert(!CanDump<float&&>::value, "an xvalue is rejected at compile time");
static_assert(!CanDump<Tensor>::value, "a temporary tensor is rejected at compile time");

Tensor MakeTensor(uint64_t id, uint32_t n) {
  auto t = Tensor::Whole(std::make_shared<DeviceBuffer>(id, DataType::kFloat32, n), {n});
  EXPECT_TRUE(t.ok());
  return *t;
}

TEST(CoreTaskArgsTest, SelectsTensorsAndScalarsByIdentity) {
  Tensor x = MakeTensor(1, 4), y = MakeTensor(2, 4), z = MakeTensor(3, 4);
  float scale = 1.0f;
  float other = 1.0f;  // same value, different lvalue
  CoreTaskArgs args;
  ASSERT_TRUE(args.add_input(x).ok());
  ASSERT_TRUE(args.add_input(y).ok());
  ASSERT_TRUE(args.add_output(z).ok());
  ASSERT_TRUE(args.add_scalar(scale).ok());
  ASSERT_TRUE(args.add_scalar(other).ok());
  EXPECT_FALSE(args.has_marker());
  ASSERT_TRUE(args.dump(x, z, scale).ok());
  EXPECT_TRUE(args.has_marker());
  EXPECT_FALSE(args.whole_task_marked());
  EXPECT_TRUE(args.tensors()[0].marked);
  EXPECT_FALSE(args.tensors()[1].marked);
  EXPECT_TRUE(args.tensors()[2].marked);
  EXPECT_TRUE(args.scalars()[0].marked);
  EXPECT_FALSE(args.scalars()[1].marked);
  EXPECT_FALSE(args.scalars()[0].ambiguous);
  EXPECT_EQ(args.tensors()[2].role, abi::ArgRole::kOutput);
}

TEST(CoreTaskArgsTest, RepeatedScalarLvalueSelectsFirstAndIsAmbiguous) {
  double alpha = 0.5;
  int32_t n = 7;
  CoreTaskArgs args;
  ASSERT_TRUE(args.add_scalar(alpha).ok());
  ASSERT_TRUE(args.add_scalar(n).ok());
  ASSERT_TRUE(args.add_scalar(alpha).ok());
  ASSERT_TRUE(args.dump(alpha).ok());
  EXPECT_TRUE(args.scalars()[0].marked);
  EXPECT_TRUE(args.scalars()[0].ambiguous);
  EXPECT_FALSE(args.scalars()[2].marked);
  EXPECT_EQ(args.scalars()[0].dtype, DataType::kFloat64);
  EXPECT_EQ(args.scalars()[1].dtype, DataType::kInt32);
  double back = 0;
  std::memcpy(&back, &args.scalars()[2].bits, 8);
  EXPECT_EQ(back, 0.5);
}

TEST(CoreTaskArgsTest, WholeTaskMarker) {
  Tensor x = MakeTensor(1, 4);
  CoreTaskArgs args;
  ASSERT_TRUE(args.add_input(x).ok());
  ASSERT_TRUE(args.add_scalar(3.0f).ok());  // a temporary may be added, not selected
  ASSERT_TRUE(args.dump().ok());
  EXPECT_TRUE(args.whole_task_marked());
  EXPECT_TRUE(args.has_marker());
}

TEST(CoreTaskArgsTest, MisuseIsAClearErrorNotACrash) {
  Tensor x = MakeTensor(1, 4), stranger = MakeTensor(2, 4);
  float added = 1.0f, never_added = 1.0f;
  CoreTaskArgs args;
  ASSERT_TRUE(args.add_input(x).ok());
  ASSERT_TRUE(args.add_scalar(added).ok());
  absl::Status s = args.dump(x, stranger);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("argument 2"), std::string::npos) << s;
  EXPECT_NE(s.message().find("tensor"), std::string::npos) << s;
  s = args.dump(never_added);
  EXPECT_NE(s.message().find("scalar lvalue"), std::string::npos) << s;
  EXPECT_FALSE(args.status().ok());  // sticky: Submit will refuse the task

  CoreTaskArgs full;
  for (uint32_t i = 0; i < CoreTaskArgs::kMaxTensors; ++i) ASSERT_TRUE(full.add_input(x).ok());
  EXPECT_EQ(full.add_input(x).code(), absl::StatusCode::kResourceExhausted);
  CoreTaskArgs empty;
  EXPECT_EQ(empty.add_input(Tensor()).code(), absl::StatusCode::kInvalidArgument);
}

TEST(CoreTaskArgsTest, SameViewTwiceIsAmbiguousDifferentViewIsNot) {
  auto buffer = std::make_shared<DeviceBuffer>(9, DataType::kFloat32, 16);
  Tensor whole = *Tensor::Whole(buffer, {16});
  Tensor half = *whole.View({8}, {1}, 8);
  CoreTaskArgs args;
  ASSERT_TRUE(args.add_input(whole).ok());
  ASSERT_TRUE(args.add_input(half).ok());
  ASSERT_TRUE(args.add_input(whole).ok());
  ASSERT_TRUE(args.dump(half).ok());
  EXPECT_TRUE(args.tensors()[1].marked);
  EXPECT_FALSE(args.tensors()[1].ambiguous);
  ASSERT_TRUE(args.dump(whole).ok());
  EXPECT_TRUE(args.tensors()[0].marked);
  EXPECT_TRUE(args.tensors()[0].ambiguous);
  EXPECT_FALSE(args.tensors()[2].marked);
}

}  // namespace
}  // namespace argsdump
