#include "apps/sim_run/planted_fault.h"

#include <cmath>

#include "device/sim/kernels.h"
#include "device/workload.h"
#include "gtest/gtest.h"

namespace argsdump {
namespace {

v1::WorkloadSpec Mixed() {
  absl::StatusOr<v1::WorkloadSpec> w = BuiltinWorkload("mixed_example");
  EXPECT_TRUE(w.ok()) << w.status();
  return *w;
}

TEST(PlantedFaultTest, ParsesEachKindAndNamesWhatIsWrong) {
  absl::StatusOr<PlantedFault> f = ParsePlantedFault("11:3:5:nan");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->rank, 11u);
  EXPECT_EQ(f->step, 3u);
  EXPECT_EQ(f->task, 5u);
  EXPECT_EQ(f->kind, PlantedFault::Kind::kNan);
  f = ParsePlantedFault("0:0:2:scalar=2.5");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->kind, PlantedFault::Kind::kScalar);
  EXPECT_EQ(f->value, 2.5);
  EXPECT_EQ(ParsePlantedFault("1:2:3:crash")->kind, PlantedFault::Kind::kCrash);
  EXPECT_NE(ParsePlantedFault("1:2:nan").status().message().find("four parts"), absl::string_view::npos);
  EXPECT_NE(ParsePlantedFault("x:2:3:nan").status().message().find("rank"), absl::string_view::npos);
  EXPECT_NE(ParsePlantedFault("1:-2:3:nan").status().message().find("step"), absl::string_view::npos);
  EXPECT_NE(ParsePlantedFault("1:2:99999999999:nan").status().message().find("task"),
            absl::string_view::npos);
  EXPECT_NE(ParsePlantedFault("1:2:3:boom").status().message().find("unknown kind"),
            absl::string_view::npos);
  EXPECT_FALSE(ParsePlantedFault("1:2:3:scalar=nan").ok());
  EXPECT_FALSE(ParsePlantedFault("1:2:3:scalar=").ok());
}

TEST(PlantedFaultTest, NanGoesIntoACopyOfTheFirstFloatInput) {
  const v1::WorkloadSpec w = Mixed();
  for (uint32_t t = 0; t < static_cast<uint32_t>(w.tasks_size()); ++t) {
    PlantedFault f;
    f.task = t;
    absl::StatusOr<v1::WorkloadSpec> planted = PlantFault(w, f);
    if (!planted.ok()) continue;  // a task without a float input
    ASSERT_TRUE(ValidateWorkload(*planted, BuiltinKernels()).ok());
    // Only task t changed, and only one tensor of it.
    for (int k = 0; k < w.tasks_size(); ++k) {
      if (k != static_cast<int>(t)) {
        EXPECT_EQ(planted->tasks(k).DebugString(), w.tasks(k).DebugString());
      }
    }
    int changed = 0;
    for (int a = 0; a < w.tasks(t).args_size(); ++a) {
      if (planted->tasks(t).args(a).tensor() != w.tasks(t).args(a).tensor()) ++changed;
    }
    EXPECT_EQ(changed, 1);
    const v1::BufferSpec& copy = planted->buffers(planted->buffers_size() - 1);
    ASSERT_GT(copy.init().values_size(), 0);
    EXPECT_TRUE(std::isnan(copy.init().values(0)));
    for (int i = 1; i < copy.init().values_size(); ++i) EXPECT_FALSE(std::isnan(copy.init().values(i)));
  }
}

TEST(PlantedFaultTest, ScalarAndCrashAndMissingTasks) {
  const v1::WorkloadSpec w = Mixed();
  PlantedFault f;
  f.task = static_cast<uint32_t>(w.tasks_size());
  EXPECT_NE(PlantFault(w, f).status().message().find("tasks"), absl::string_view::npos);
  int scalars = 0, crashes = 0;
  for (uint32_t t = 0; t < static_cast<uint32_t>(w.tasks_size()); ++t) {
    f.task = t;
    f.kind = PlantedFault::Kind::kScalar;
    f.value = 7.25;
    absl::StatusOr<v1::WorkloadSpec> s = PlantFault(w, f);
    if (s.ok()) {
      ++scalars;
      bool found = false;
      for (const v1::ArgSpec& a : s->tasks(t).args()) found |= a.has_scalar() && a.scalar().value() == 7.25;
      EXPECT_TRUE(found);
    } else {
      EXPECT_NE(s.status().message().find("no scalar"), absl::string_view::npos);
    }
    f.kind = PlantedFault::Kind::kCrash;
    absl::StatusOr<v1::WorkloadSpec> c = PlantFault(w, f);
    if (c.ok()) {
      ++crashes;
      EXPECT_EQ(c->tasks(t).func(), "crash_segv");
      EXPECT_TRUE(ValidateWorkload(*c, BuiltinKernels()).ok());
    }
  }
  EXPECT_GT(scalars, 0);
  EXPECT_GT(crashes, 0);
}

}  // namespace
}  // namespace argsdump
