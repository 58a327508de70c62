// CheckDeviceCrash's bounds, each refused with the field named, and the
// one-line summary for each way of dying.
#include "format/device_crash.h"

#include <string>

#include "gtest/gtest.h"

namespace argsdump {
namespace {

v1::DeviceCrash Segv() {
  v1::DeviceCrash c;
  c.set_signal(11);
  c.set_signal_name("SIGSEGV");
  c.set_has_fault_address(true);
  c.set_fault_address(0);
  c.set_tasks_in_flight(3);
  v1::CrashedTask* other = c.add_executing();
  other->set_task_id(0x0000000100000002);
  other->set_func("add");
  other->set_worker(1);
  v1::CrashedTask* t = c.add_executing();
  t->set_task_id(0x0000000100000003);
  t->add_func_ids(7);
  t->set_func("crash_segv");
  t->set_worker(2);
  t->set_thread(1);
  t->set_crashing(true);
  return c;
}

TEST(DeviceCrashTest, AcceptsAWellFormedOne) {
  EXPECT_TRUE(CheckDeviceCrash(Segv()).ok());
  EXPECT_TRUE(CheckDeviceCrash(v1::DeviceCrash()).ok());
}

TEST(DeviceCrashTest, RefusesWhatIsOverTheBounds) {
  auto refused = [](const v1::DeviceCrash& c, const std::string& names) {
    const absl::Status s = CheckDeviceCrash(c);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_NE(s.message().find(names), absl::string_view::npos) << s;
  };
  v1::DeviceCrash c = Segv();
  c.set_signal(-1);
  refused(c, "device_crash.signal: -1");
  c = Segv();
  c.set_signal(0);
  refused(c, "device_crash.signal_name");
  c = Segv();
  c.set_description(std::string(kMaxCrashTextBytes + 1, 'x'));
  refused(c, "device_crash.description: 4097 bytes");
  c = Segv();
  c.mutable_executing(1)->set_func(std::string(kMaxCrashTextBytes + 1, 'f'));
  refused(c, "device_crash.executing[1].func:");
  c = Segv();
  c.mutable_executing(0)->set_func_type(std::string(kMaxCrashTextBytes + 1, 't'));
  refused(c, "device_crash.executing[0].func_type:");
  c = Segv();
  for (int i = 0; i < 3; ++i) c.mutable_executing(0)->add_func_ids(i);
  EXPECT_TRUE(CheckDeviceCrash(c).ok());
  c.mutable_executing(0)->add_func_ids(9);
  refused(c, "device_crash.executing[0].func_ids: 4 ids");
  c = Segv();
  c.mutable_executing(0)->set_crashing(true);
  refused(c, "executing[1].crashing: a second crashing task");
  c = Segv();
  while (c.executing_size() <= kMaxCrashedTasks) c.add_executing()->set_task_id(1);
  refused(c, "device_crash.executing: 4097 tasks");
  // Under every per-field bound, over the whole one.
  c = v1::DeviceCrash();
  for (int i = 0; i < 400; ++i) {
    v1::CrashedTask* t = c.add_executing();
    t->set_func(std::string(kMaxCrashTextBytes, 'f'));
  }
  refused(c, "bytes serialized");
}

TEST(DeviceCrashTest, DescribesEachWayOfDying) {
  EXPECT_EQ(DescribeDeviceCrash(Segv()),
            "SIGSEGV at 0x0 (task 0x0000000100000003, func crash_segv, worker 2, thread 1, "
            "step 0); 3 tasks in flight");
  v1::DeviceCrash exited;
  exited.set_exit_status(3);
  exited.set_tasks_in_flight(1);
  EXPECT_EQ(DescribeDeviceCrash(exited), "exit status 3; 1 task in flight");
  v1::DeviceCrash killed = Segv();
  killed.set_signal(9);
  killed.set_signal_name("SIGKILL");
  killed.set_has_fault_address(false);
  killed.mutable_executing(1)->set_crashing(false);
  killed.mutable_executing(1)->set_func_type("aiv");
  EXPECT_EQ(DescribeDeviceCrash(killed),
            "SIGKILL; 3 tasks in flight, 2 executing (task 0x0000000100000002, func add, "
            "worker 1, thread 0, step 0; task 0x0000000100000003, func crash_segv, type aiv, "
            "worker 2, thread 1, step 0)");
  EXPECT_EQ(FaultAddressHex(0x7f12ab340000), "0x7f12ab340000");
  v1::DeviceCrash unnamed;
  unnamed.set_signal(40);
  EXPECT_EQ(DescribeDeviceCrash(unnamed), "signal 40; 0 tasks in flight");
}

}  // namespace
}  // namespace argsdump
