// The scheduler: admission rules and reservation arithmetic, pending order, the state
// machine (every legal and illegal move), memory reservations and eviction order under
// pressure, cancel releasing resources, pacing with an injected clock, SM granules, and
// concurrent submissions. Plain logic is tested directly; the rest through the C ABI on
// the cpu device, where it runs the same code as on a GPU.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "scheduler/admission.h"
#include "scheduler/pacer.h"
#include "scheduler/sm_granules.h"
#include "common/error.h"
#include "runtime/objects.h"
#include "test_runtime.h"

namespace gk::test {
namespace {

constexpr uint64_t MiB = uint64_t(1) << 20;
constexpr uint64_t GiB = uint64_t(1) << 30;

static_assert(GK_TASK_SPEC_SIZE == 56, "gk_task_spec 1.3 layout");
static_assert(offsetof(gk_task_spec, memory_request) == 32);
static_assert(GK_PACING_SIZE == 20);
static_assert(offsetof(gk_task_info, reason) == 112);

AdmissionRequest req(uint64_t id, Qos qos, uint64_t memory, int32_t sms = 0, int32_t priority = 0) {
  AdmissionRequest r;
  r.id = id;
  r.name = "t" + std::to_string(id);
  r.qos = qos;
  r.priority = priority;
  r.requests = {memory, sms};
  return r;
}

// ---- admission (plain logic) -----------------------------------------------------------

TEST(Admission, guaranteed_reserves_and_waits_when_it_does_not_fit) {
  Admission a(10 * GiB, 132);
  auto d1 = a.submit(req(1, Qos::kGuaranteed, 6 * GiB, 64));
  EXPECT_EQ(d1.verdict, Admission::Verdict::kAdmitted) << d1.reason;
  EXPECT_EQ(a.memory_reserved(), 6 * GiB);
  EXPECT_EQ(a.sms_reserved(), 64);
  auto d2 = a.submit(req(2, Qos::kGuaranteed, 5 * GiB));
  EXPECT_EQ(d2.verdict, Admission::Verdict::kPending);
  EXPECT_NE(d2.reason.find("exceeds the 4.00 GiB unreserved"), std::string::npos) << d2.reason;
  EXPECT_EQ(a.memory_reserved(), 6 * GiB);  // a pending task reserves nothing
  auto admitted = a.release(1);
  ASSERT_EQ(admitted.size(), 1u);
  EXPECT_EQ(admitted[0].id, 2u);
  EXPECT_EQ(a.memory_reserved(), 5 * GiB);
  EXPECT_EQ(a.sms_reserved(), 0);
}

TEST(Admission, sms_are_reserved_like_memory) {
  Admission a(10 * GiB, 132);
  EXPECT_EQ(a.submit(req(1, Qos::kGuaranteed, 0, 100)).verdict, Admission::Verdict::kAdmitted);
  auto d = a.submit(req(2, Qos::kBurstable, MiB, 40));
  EXPECT_EQ(d.verdict, Admission::Verdict::kPending);
  EXPECT_NE(d.reason.find("SM request 40 exceeds the 32 SMs unreserved"), std::string::npos)
      << d.reason;
}

TEST(Admission, best_effort_is_admitted_at_once_and_reserves_nothing) {
  Admission a(1 * GiB, 8);
  EXPECT_EQ(a.submit(req(1, Qos::kGuaranteed, GiB, 8)).verdict, Admission::Verdict::kAdmitted);
  auto d = a.submit(req(2, Qos::kBestEffort, 0));
  EXPECT_EQ(d.verdict, Admission::Verdict::kAdmitted);
  EXPECT_EQ(a.memory_reserved(), GiB);
}

TEST(Admission, a_request_larger_than_the_device_is_rejected_with_the_reason) {
  Admission a(8 * GiB, 132);
  auto d = a.submit(req(1, Qos::kBurstable, 9 * GiB));
  EXPECT_EQ(d.verdict, Admission::Verdict::kRejected);
  EXPECT_NE(d.reason.find("can never fit"), std::string::npos) << d.reason;
  auto s = a.submit(req(2, Qos::kGuaranteed, GiB, 200));
  EXPECT_EQ(s.verdict, Admission::Verdict::kRejected);
  EXPECT_NE(s.reason.find("SM request 200"), std::string::npos) << s.reason;
  EXPECT_EQ(a.memory_reserved(), 0u);
}

TEST(Admission, pending_is_fifo_within_priority_and_higher_priority_goes_first) {
  Admission a(10 * GiB, 132);
  a.submit(req(1, Qos::kGuaranteed, 10 * GiB));
  a.submit(req(2, Qos::kBurstable, 4 * GiB, 0, 0));
  a.submit(req(3, Qos::kBurstable, 4 * GiB, 0, 5));  // higher priority: ahead of 2
  a.submit(req(4, Qos::kBurstable, 2 * GiB, 0, 0));  // behind 2
  a.submit(req(5, Qos::kGuaranteed, 1 * GiB, 0, 0)); // Guaranteed ranks before Burstable
  EXPECT_EQ(a.pending(), (std::vector<uint64_t>{5, 3, 2, 4}));
  EXPECT_NE(a.pending_reason(4).find("behind"), std::string::npos);
  auto admitted = a.release(1);
  std::vector<uint64_t> ids;
  for (auto& x : admitted) ids.push_back(x.id);
  EXPECT_EQ(ids, (std::vector<uint64_t>{5, 3, 2}));  // 1+4+4 GiB; 4 (2 GiB) no longer fits
  EXPECT_EQ(a.pending(), (std::vector<uint64_t>{4}));
  EXPECT_EQ(a.memory_reserved(), 9 * GiB);
}

TEST(Admission, a_new_task_does_not_jump_the_queue_but_a_higher_priority_one_does) {
  Admission a(10 * GiB, 132);
  a.submit(req(1, Qos::kBurstable, 8 * GiB));
  EXPECT_EQ(a.submit(req(2, Qos::kBurstable, 4 * GiB)).verdict, Admission::Verdict::kPending);
  // 1 GiB would fit, but task 2 (same rank) waits ahead of it.
  EXPECT_EQ(a.submit(req(3, Qos::kBurstable, 1 * GiB)).verdict, Admission::Verdict::kPending);
  // A higher priority is ahead of the queue and fits.
  EXPECT_EQ(a.submit(req(4, Qos::kBurstable, 1 * GiB, 0, 9)).verdict,
            Admission::Verdict::kAdmitted);
  // Releasing a pending task takes it out of the queue.
  a.release(2);
  EXPECT_EQ(a.pending(), std::vector<uint64_t>{});  // 3 was admitted once 2 left
  EXPECT_EQ(a.memory_reserved(), 10 * GiB);
}

TEST(Admission, a_larger_capacity_admits_waiting_tasks) {
  Admission a(1 * GiB, 4);
  a.submit(req(1, Qos::kGuaranteed, GiB));
  a.submit(req(2, Qos::kGuaranteed, GiB));
  auto admitted = a.set_memory_capacity(2 * GiB);
  ASSERT_EQ(admitted.size(), 1u);
  EXPECT_EQ(admitted[0].id, 2u);
}

// ---- pacing (plain logic, injected clock) ----------------------------------------------

TEST(Pacer, best_effort_goes_while_no_guaranteed_work_is_queued) {
  PacingConfig c;
  PacingView v;
  v.now_ns = 10'000'000;
  v.own_inflight = 50;
  EXPECT_TRUE(pace_best_effort(c, v).go);
  v.guaranteed_last_launch_ns = v.now_ns - 201'000;  // idle for more than 200 us
  EXPECT_TRUE(pace_best_effort(c, v).go);
}

TEST(Pacer, best_effort_is_held_while_guaranteed_work_is_in_flight) {
  PacingConfig c;  // 1 in flight, 200 us idle, 2000 us max hold
  PacingView v;
  v.now_ns = 10'000'000;
  v.guaranteed_inflight = 3;
  v.own_inflight = 1;
  PacingDecision d = pace_best_effort(c, v);
  EXPECT_FALSE(d.go);
  EXPECT_NE(d.reason.find("3 Guaranteed op(s) in flight"), std::string::npos) << d.reason;
  v.own_inflight = 0;  // under the bound: it may launch one
  EXPECT_TRUE(pace_best_effort(c, v).go);
}

TEST(Pacer, a_recent_guaranteed_launch_counts_as_busy) {
  PacingConfig c;
  PacingView v;
  v.now_ns = 10'000'000;
  v.guaranteed_last_launch_ns = v.now_ns - 150'000;
  v.own_inflight = 1;
  EXPECT_FALSE(pace_best_effort(c, v).go);
  v.now_ns += 60'000;  // 210 us after the launch
  EXPECT_TRUE(pace_best_effort(c, v).go);
}

TEST(Pacer, a_held_launch_goes_after_max_hold_and_pacing_can_be_off) {
  PacingConfig c;
  PacingView v;
  v.now_ns = 50'000'000;
  v.guaranteed_inflight = 1;
  v.own_inflight = 4;
  v.held_since_ns = v.now_ns - 1'999'000;
  EXPECT_FALSE(pace_best_effort(c, v).go);
  v.now_ns += 1'000;
  EXPECT_TRUE(pace_best_effort(c, v).go);
  c.best_effort_inflight = 0;
  v.held_since_ns = v.now_ns;
  EXPECT_TRUE(pace_best_effort(c, v).go);
}

// ---- SM granules (plain logic) ---------------------------------------------------------

TEST(SmGranules, exclusive_partitions_are_disjoint_and_rounded_to_granules) {
  SmGranules g(16, 8, 4);  // H100: 132 SMs
  EXPECT_EQ(g.granules_for(20), 3);
  std::string note;
  auto a = g.take_exclusive(3, &note);
  auto b = g.take_exclusive(4, &note);
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 4u);
  for (int x : a) EXPECT_EQ(std::count(b.begin(), b.end(), x), 0);
  EXPECT_EQ(g.sms_of(a), 24);
  EXPECT_EQ(g.exclusive_free(), 9);
  EXPECT_TRUE(g.take_exclusive(10, &note).empty());  // only 9 left
  g.give_back(a, true);
  EXPECT_EQ(g.exclusive_free(), 12);
}

TEST(SmGranules, shared_sets_avoid_exclusive_granules_and_count_the_remainder) {
  SmGranules g(16, 8, 4);
  std::string note;
  auto excl = g.take_exclusive(4, &note);
  auto shared = g.take_shared(16);  // everything not exclusive: 12 granules + remainder
  EXPECT_EQ(g.sms_of(shared), 12 * 8 + 4);
  for (int x : excl) EXPECT_EQ(std::count(shared.begin(), shared.end(), x), 0);
  auto small = g.take_shared(2);  // limit 16 SMs: remainder 4 + one granule of 8
  EXPECT_EQ(g.sms_of(small), 12);
  // A later exclusive request prefers granules no shared set uses, and says when it cannot.
  auto late = g.take_exclusive(12, &note);
  EXPECT_EQ(late.size(), 12u);
  EXPECT_NE(note.find("also used by BestEffort"), std::string::npos) << note;
}

// ---- the C ABI on the cpu device -------------------------------------------------------

struct TaskDeleter {
  void operator()(gk_task* t) const { gk_task_destroy(t); }
};
using TaskPtr = std::unique_ptr<gk_task, TaskDeleter>;

gk_task_spec spec(const char* name, int32_t qos, uint64_t request, uint64_t limit = 0,
                  int32_t priority = 0) {
  gk_task_spec s{};
  s.struct_size = sizeof(s);
  s.name = name;
  s.device = 0;
  s.qos = qos;
  s.priority = priority;
  s.memory_request = request;
  s.memory_limit = limit;
  return s;
}

TaskPtr create(gk_runtime* rt, const gk_task_spec& s) {
  gk_task* t = nullptr;
  EXPECT_EQ(gk_task_create(rt, &s, &t), GK_OK) << gk_last_error();
  return TaskPtr(t);
}

gk_task_info info(gk_task* t) {
  gk_task_info i{};
  i.struct_size = sizeof(i);
  EXPECT_EQ(gk_task_get_info(t, &i), GK_OK) << gk_last_error();
  return i;
}

gk_buffer* alloc_for(gk_runtime* rt, gk_task* task, uint64_t size, uint32_t flags = 0) {
  gk_memory_owner* owner = nullptr;
  EXPECT_EQ(gk_task_memory_owner(task, &owner), GK_OK);
  gk_alloc_args a{};
  a.struct_size = sizeof(a);
  a.size = size;
  a.flags = flags;
  a.owner = owner;
  gk_buffer* b = nullptr;
  EXPECT_EQ(gk_buffer_alloc(rt, &a, &b), GK_OK) << gk_last_error();
  return b;
}

nlohmann::json events(gk_task* t) {
  char* text = nullptr;
  EXPECT_EQ(gk_task_events_json(t, &text), GK_OK);
  auto j = nlohmann::json::parse(text);
  gk_string_free(text);
  return j;
}

bool has_event(gk_task* t, const std::string& kind, const std::string& text) {
  const nlohmann::json all = events(t);
  for (const auto& e : all["events"]) {
    if (e["kind"] == kind && e["text"].get<std::string>().find(text) != std::string::npos) {
      return true;
    }
  }
  return false;
}

class SchedulerApi : public ::testing::Test {
 protected:
  void SetUp() override {
    rt_ = make_runtime(test_options());
    ASSERT_EQ(gk_memory_set_budget(rt_.get(), 0, 64 * MiB), GK_OK);
  }
  RuntimePtr rt_;
};

TEST_F(SchedulerApi, specs_that_break_the_class_rules_are_refused_with_the_rule) {
  gk_task* t = nullptr;
  auto g = spec("g", GK_QOS_GUARANTEED, 8 * MiB, 16 * MiB);
  EXPECT_EQ(gk_task_create(rt_.get(), &g, &t), GK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("requests = limits"), std::string::npos);
  auto b = spec("b", GK_QOS_BURSTABLE, 8 * MiB, 4 * MiB);
  EXPECT_EQ(gk_task_create(rt_.get(), &b, &t), GK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("below memory_request"), std::string::npos);
  auto e = spec("e", GK_QOS_BEST_EFFORT, MiB);
  EXPECT_EQ(gk_task_create(rt_.get(), &e, &t), GK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("BestEffort tasks request nothing"),
            std::string::npos);
  auto nothing = spec("n", GK_QOS_GUARANTEED, 0);
  EXPECT_EQ(gk_task_create(rt_.get(), &nothing, &t), GK_INVALID_ARGUMENT);
  auto bad_qos = spec("q", 7, 0);
  EXPECT_EQ(gk_task_create(rt_.get(), &bad_qos, &t), GK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("not a gk_qos value"), std::string::npos);
  auto unnamed = spec("", GK_QOS_BEST_EFFORT, 0);
  EXPECT_EQ(gk_task_create(rt_.get(), &unnamed, &t), GK_INVALID_ARGUMENT);
  auto too_big = spec("big", GK_QOS_GUARANTEED, 65 * MiB);
  EXPECT_EQ(gk_task_create(rt_.get(), &too_big, &t), GK_RESOURCE_EXHAUSTED);
  EXPECT_NE(std::string(gk_last_error()).find("can never fit"), std::string::npos);
  EXPECT_EQ(t, nullptr);
}

TEST_F(SchedulerApi, admission_waits_and_admits_when_a_reservation_is_released) {
  auto a = create(rt_.get(), spec("a", GK_QOS_GUARANTEED, 40 * MiB));
  auto b = create(rt_.get(), spec("b", GK_QOS_BURSTABLE, 30 * MiB, 60 * MiB));
  EXPECT_EQ(info(a.get()).state, GK_TASK_ADMITTED);
  EXPECT_EQ(info(a.get()).memory_reserved, 40 * MiB);
  EXPECT_EQ(info(b.get()).state, GK_TASK_PENDING);
  EXPECT_NE(std::string(info(b.get()).reason).find("exceeds the 24.0 MiB unreserved"),
            std::string::npos)
      << info(b.get()).reason;
  int32_t state = -1;
  EXPECT_EQ(gk_task_wait(b.get(), 10, &state), GK_DEADLINE_EXCEEDED);
  EXPECT_EQ(state, GK_TASK_PENDING);
  gk_stream* s = nullptr;
  EXPECT_EQ(gk_task_stream_create(b.get(), &s), GK_FAILED_PRECONDITION);  // not admitted yet

  std::thread waiter([&] {
    int32_t st = -1;
    EXPECT_EQ(gk_task_wait(b.get(), -1, &st), GK_OK);
    EXPECT_EQ(st, GK_TASK_ADMITTED);
  });
  ASSERT_EQ(gk_task_run(a.get()), GK_OK);
  ASSERT_EQ(gk_task_complete(a.get()), GK_OK);
  waiter.join();
  EXPECT_EQ(info(a.get()).memory_reserved, 0u);
  EXPECT_EQ(info(b.get()).memory_reserved, 30 * MiB);
  EXPECT_TRUE(has_event(b.get(), "state", "after 'a' released"));
  auto best = create(rt_.get(), spec("be", GK_QOS_BEST_EFFORT, 0));
  EXPECT_EQ(info(best.get()).state, GK_TASK_ADMITTED);
}

TEST_F(SchedulerApi, every_legal_move_works_and_every_illegal_one_is_refused) {
  const int32_t all[] = {GK_TASK_PENDING,   GK_TASK_ADMITTED, GK_TASK_RUNNING, GK_TASK_THROTTLED,
                         GK_TASK_COMPLETED, GK_TASK_FAILED,   GK_TASK_CANCELLED};
  const std::vector<std::pair<int32_t, int32_t>> legal = {
      {GK_TASK_PENDING, GK_TASK_ADMITTED},    {GK_TASK_PENDING, GK_TASK_FAILED},
      {GK_TASK_PENDING, GK_TASK_CANCELLED},   {GK_TASK_ADMITTED, GK_TASK_RUNNING},
      {GK_TASK_ADMITTED, GK_TASK_FAILED},     {GK_TASK_ADMITTED, GK_TASK_CANCELLED},
      {GK_TASK_RUNNING, GK_TASK_THROTTLED},   {GK_TASK_RUNNING, GK_TASK_COMPLETED},
      {GK_TASK_RUNNING, GK_TASK_FAILED},      {GK_TASK_RUNNING, GK_TASK_CANCELLED},
      {GK_TASK_THROTTLED, GK_TASK_RUNNING},   {GK_TASK_THROTTLED, GK_TASK_FAILED},
      {GK_TASK_THROTTLED, GK_TASK_CANCELLED}};
  auto& scheduler = rt_->impl->scheduler();
  // Drive a fresh task to `from` through legal moves, then try `to`.
  auto reach = [&](int32_t from) {
    TaskSpec s;
    s.name = "m";
    s.qos = Qos::kGuaranteed;
    s.memory_request = from == GK_TASK_PENDING ? 64 * MiB : MiB;
    auto blocker = from == GK_TASK_PENDING ? scheduler.submit(s) : nullptr;
    auto t = scheduler.submit(s);
    if (blocker) EXPECT_EQ(t->state, GK_TASK_PENDING);
    if (from != GK_TASK_PENDING && from != GK_TASK_ADMITTED) {
      scheduler.transition(*t, GK_TASK_RUNNING, "test");
    }
    if (from == GK_TASK_THROTTLED) scheduler.transition(*t, GK_TASK_THROTTLED, "test");
    if (from == GK_TASK_COMPLETED || from == GK_TASK_FAILED || from == GK_TASK_CANCELLED) {
      scheduler.transition(*t, from, "test");
    }
    EXPECT_EQ(t->state, from);
    return std::make_pair(t, blocker);
  };
  for (int32_t from : all) {
    for (int32_t to : all) {
      auto [t, blocker] = reach(from);
      bool ok = std::find(legal.begin(), legal.end(), std::make_pair(from, to)) != legal.end();
      if (ok) {
        EXPECT_NO_THROW(scheduler.transition(*t, to, "test")) << from << " -> " << to;
        EXPECT_EQ(t->state, to);
      } else {
        try {
          scheduler.transition(*t, to, "test");
          ADD_FAILURE() << task_state_name(from) << " -> " << task_state_name(to) << " allowed";
        } catch (const gk::Error& e) {
          EXPECT_EQ(e.status(), GK_FAILED_PRECONDITION);
          EXPECT_NE(std::string(e.what()).find(std::string("cannot go from ") +
                                               task_state_name(from)),
                    std::string::npos);
        }
        EXPECT_EQ(t->state, from);  // nothing changed
      }
      scheduler.retire(*t);
      if (blocker) scheduler.retire(*blocker);
    }
  }
  // Through the C ABI: completing an admitted task is refused with the state named.
  auto c = create(rt_.get(), spec("c", GK_QOS_GUARANTEED, MiB));
  EXPECT_EQ(gk_task_complete(c.get()), GK_FAILED_PRECONDITION);
  EXPECT_NE(std::string(gk_last_error()).find("from Admitted to Completed"), std::string::npos);
  EXPECT_EQ(gk_task_cancel(c.get()), GK_OK);
  EXPECT_EQ(gk_task_cancel(c.get()), GK_FAILED_PRECONDITION);
}

TEST_F(SchedulerApi, the_first_op_on_a_task_stream_runs_it_and_charges_its_outputs) {
  auto t = create(rt_.get(), spec("ops", GK_QOS_BURSTABLE, 8 * MiB, 16 * MiB));
  gk_stream* s = nullptr;
  ASSERT_EQ(gk_task_stream_create(t.get(), &s), GK_OK) << gk_last_error();
  gk_tensor_desc d = desc(GK_DTYPE_F32, {256, 256});
  gk_tensor* x = nullptr;
  ASSERT_EQ(gk_tensor_create(rt_.get(), 0, &d, s, &x), GK_OK) << gk_last_error();
  gk_op_args args{};
  args.struct_size = sizeof(args);
  gk_tensor* in[] = {x, x};
  args.inputs = in;
  args.num_inputs = 2;
  args.stream = s;
  gk_tensor* out = nullptr;
  ASSERT_EQ(gk_op_call_alloc(rt_.get(), "add", &args, 1, &out, nullptr), GK_OK) << gk_last_error();
  gk_task_info i = info(t.get());
  EXPECT_EQ(i.state, GK_TASK_RUNNING);
  EXPECT_EQ(i.ops_launched, 1u);
  EXPECT_GE(i.memory_in_use, 2 * 256 * 256 * 4u);  // x (on its stream) and the output
  EXPECT_GT(i.started_ns, 0u);
  gk_tensor_release(out);
  gk_tensor_release(x);
  EXPECT_EQ(gk_task_complete(t.get()), GK_OK);
  EXPECT_EQ(info(t.get()).state, GK_TASK_COMPLETED);
  EXPECT_GT(info(t.get()).finished_ns, 0u);
  // A finished task cannot launch.
  gk_tensor* y = nullptr;
  EXPECT_EQ(gk_tensor_create(rt_.get(), 0, &d, nullptr, &y), GK_OK);
  gk_tensor* in2[] = {y, y};
  args.inputs = in2;
  EXPECT_EQ(gk_op_call_alloc(rt_.get(), "add", &args, 1, &out, nullptr), GK_FAILED_PRECONDITION);
  EXPECT_NE(std::string(gk_last_error()).find("is Completed"), std::string::npos);
  gk_tensor_release(y);
  EXPECT_EQ(gk_stream_destroy(s), GK_OK);
}

TEST_F(SchedulerApi, cancel_frees_the_task_buffers_and_its_reservation) {
  auto t = create(rt_.get(), spec("victim", GK_QOS_GUARANTEED, 48 * MiB));
  auto waiting = create(rt_.get(), spec("next", GK_QOS_GUARANTEED, 32 * MiB));
  EXPECT_EQ(info(waiting.get()).state, GK_TASK_PENDING);
  gk_buffer* a = alloc_for(rt_.get(), t.get(), 16 * MiB);
  gk_buffer* b = alloc_for(rt_.get(), t.get(), 16 * MiB);
  ASSERT_EQ(gk_buffer_free(b, nullptr), GK_OK);  // freed by the user: not freed twice
  EXPECT_EQ(info(t.get()).memory_in_use, 16 * MiB);
  ASSERT_EQ(gk_task_cancel(t.get()), GK_OK);
  EXPECT_EQ(info(t.get()).state, GK_TASK_CANCELLED);
  EXPECT_EQ(info(t.get()).memory_in_use, 0u);
  uint64_t size = 0;
  EXPECT_EQ(gk_buffer_size(a, &size), GK_INVALID_ARGUMENT);  // its handle is stale now
  EXPECT_EQ(info(waiting.get()).state, GK_TASK_ADMITTED);
  EXPECT_TRUE(has_event(t.get(), "state", "cancel freed 1 buffer(s)"));
}

TEST_F(SchedulerApi, a_quota_is_the_task_limit) {
  auto t = create(rt_.get(), spec("capped", GK_QOS_BURSTABLE, 4 * MiB, 8 * MiB));
  gk_buffer* a = alloc_for(rt_.get(), t.get(), 6 * MiB);
  gk_memory_owner* owner = nullptr;
  ASSERT_EQ(gk_task_memory_owner(t.get(), &owner), GK_OK);
  gk_alloc_args args{};
  args.struct_size = sizeof(args);
  args.size = 4 * MiB;
  args.owner = owner;
  gk_buffer* b = nullptr;
  EXPECT_EQ(gk_buffer_alloc(rt_.get(), &args, &b), GK_RESOURCE_EXHAUSTED);
  EXPECT_NE(std::string(gk_last_error()).find("task:capped"), std::string::npos);
  gk_buffer_free(a, nullptr);
}

// A Guaranteed allocation within its request spills BestEffort buffers first, then
// Burstable memory above its request, least recently used first; never fails; and the
// spilled data comes back intact.
TEST_F(SchedulerApi, pressure_spills_best_effort_first_then_burstable_above_request) {
  auto burst = create(rt_.get(), spec("burst", GK_QOS_BURSTABLE, 8 * MiB, 40 * MiB));
  auto hog = create(rt_.get(), spec("hog", GK_QOS_BEST_EFFORT, 0));
  // 64 MiB budget, 8 reserved for burst: the hog fills 40 MiB of what is unreserved.
  std::vector<gk_buffer*> hog_buffers;
  for (int i = 0; i < 5; ++i) {
    hog_buffers.push_back(alloc_for(rt_.get(), hog.get(), 8 * MiB, GK_BUFFER_EVICTABLE));
    void* p = nullptr;
    ASSERT_EQ(gk_buffer_map(hog_buffers.back(), &p), GK_OK);
    std::memset(p, 0x40 + i, 8 * MiB);
    gk_buffer_unmap(hog_buffers.back());
  }
  // Burstable takes its request, then grows to 24 MiB while capacity is free.
  std::vector<gk_buffer*> burst_buffers;
  for (int i = 0; i < 3; ++i) {
    burst_buffers.push_back(alloc_for(rt_.get(), burst.get(), 8 * MiB, GK_BUFFER_EVICTABLE));
  }
  int32_t spilled = 0;
  for (gk_buffer* h : hog_buffers) {
    ASSERT_EQ(gk_buffer_is_spilled(h, &spilled), GK_OK);
    EXPECT_EQ(spilled, 0);
  }
  // A Guaranteed task admitted now (48 of the 56 MiB unreserved) gets its whole request:
  // the device is full, so the hog's buffers go first, oldest first, then burst's memory
  // above its request.
  auto gold = create(rt_.get(), spec("gold", GK_QOS_GUARANTEED, 48 * MiB));
  ASSERT_EQ(info(gold.get()).state, GK_TASK_ADMITTED);
  std::vector<gk_buffer*> gold_buffers;
  for (int i = 0; i < 6; ++i) {
    gold_buffers.push_back(alloc_for(rt_.get(), gold.get(), 8 * MiB));
    if (i < 5) {  // the i-th allocation spilled the hog's i-th (least recently used) buffer
      ASSERT_EQ(gk_buffer_is_spilled(hog_buffers[size_t(i)], &spilled), GK_OK);
      EXPECT_EQ(spilled, 1) << "allocation " << i;
      if (i + 1 < 5) {
        gk_buffer_is_spilled(hog_buffers[size_t(i) + 1], &spilled);
        EXPECT_EQ(spilled, 0) << "allocation " << i << " spilled more than it needed";
      }
    }
  }
  int32_t burst_spilled = 0;
  for (gk_buffer* b : burst_buffers) {
    gk_buffer_is_spilled(b, &spilled);
    burst_spilled += spilled;
  }
  EXPECT_EQ(burst_spilled, 1) << "only burst's memory above its request is spilled";
  EXPECT_EQ(info(burst.get()).memory_in_use, 16 * MiB);
  EXPECT_EQ(info(gold.get()).memory_in_use, 48 * MiB);
  gk_memory_stats st{};
  st.struct_size = sizeof(st);
  gk_memory_stats_get(rt_.get(), 0, &st);
  EXPECT_EQ(st.failure_count, 0u);
  EXPECT_TRUE(has_event(hog.get(), "eviction", "to make room for 'task:gold'"));
  EXPECT_TRUE(has_event(burst.get(), "eviction", "above this task's request"));
  EXPECT_TRUE(has_event(gold.get(), "eviction", "made room by spilling"));
  // While gold holds its reservation the hog cannot come back into it; once gold is
  // cancelled (its buffers freed), the hog's data returns intact.
  void* p = nullptr;
  EXPECT_EQ(gk_buffer_map(hog_buffers[0], &p), GK_RESOURCE_EXHAUSTED);
  ASSERT_EQ(gk_task_cancel(gold.get()), GK_OK);
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(gk_buffer_map(hog_buffers[size_t(i)], &p), GK_OK) << gk_last_error();
    auto* bytes = static_cast<unsigned char*>(p);
    EXPECT_TRUE(std::all_of(bytes, bytes + 8 * MiB, [&](unsigned char c) { return c == 0x40 + i; }));
    gk_buffer_unmap(hog_buffers[size_t(i)]);
  }
}

TEST_F(SchedulerApi, best_effort_cannot_take_reserved_memory) {
  auto gold = create(rt_.get(), spec("gold", GK_QOS_GUARANTEED, 48 * MiB));
  auto hog = create(rt_.get(), spec("hog", GK_QOS_BEST_EFFORT, 0));
  gk_buffer* a = alloc_for(rt_.get(), hog.get(), 16 * MiB);
  gk_memory_owner* owner = nullptr;
  gk_task_memory_owner(hog.get(), &owner);
  gk_alloc_args args{};
  args.struct_size = sizeof(args);
  args.size = MiB;
  args.owner = owner;
  gk_buffer* b = nullptr;
  EXPECT_EQ(gk_buffer_alloc(rt_.get(), &args, &b), GK_RESOURCE_EXHAUSTED);
  EXPECT_NE(std::string(gk_last_error()).find("reserved for other tasks' requests"),
            std::string::npos)
      << gk_last_error();
  // Gold gets its whole request although the hog holds non-evictable memory.
  gk_buffer* g = alloc_for(rt_.get(), gold.get(), 48 * MiB);
  gk_buffer_free(g, nullptr);
  gk_buffer_free(a, nullptr);
}

TEST_F(SchedulerApi, json_lists_devices_tasks_states_and_reasons) {
  auto g = create(rt_.get(), spec("decode", GK_QOS_GUARANTEED, 16 * MiB));
  auto p = create(rt_.get(), spec("prefill", GK_QOS_GUARANTEED, 60 * MiB));
  char* text = nullptr;
  ASSERT_EQ(gk_scheduler_json(rt_.get(), &text), GK_OK);
  auto j = nlohmann::json::parse(text);
  gk_string_free(text);
  ASSERT_EQ(j["devices"].size(), 1u);
  EXPECT_EQ(j["devices"][0]["memory_capacity"], 64 * MiB);
  EXPECT_EQ(j["devices"][0]["memory_reserved"], 16 * MiB);
  EXPECT_EQ(j["devices"][0]["partitions"]["available"], false);
  ASSERT_EQ(j["tasks"].size(), 2u);
  EXPECT_EQ(j["tasks"][0]["state"], "Admitted");
  EXPECT_EQ(j["tasks"][1]["state"], "Pending");
  EXPECT_NE(j["tasks"][1]["reason"].get<std::string>().find("pending"), std::string::npos);
  gk_pacing pacing{sizeof(gk_pacing), 2, 100, 1000};
  EXPECT_EQ(gk_scheduler_set_pacing(rt_.get(), 0, &pacing), GK_OK);
  pacing.best_effort_inflight = -1;
  EXPECT_EQ(gk_scheduler_set_pacing(rt_.get(), 0, &pacing), GK_INVALID_ARGUMENT);
}

TEST_F(SchedulerApi, concurrent_submissions_keep_the_reservation_arithmetic_exact) {
  constexpr int kThreads = 8, kPerThread = 40;
  std::atomic<int> admitted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        std::string name = "t" + std::to_string(t) + "." + std::to_string(i);
        auto s = spec(name.c_str(), i % 2 ? GK_QOS_GUARANTEED : GK_QOS_BURSTABLE, 4 * MiB,
                      i % 2 ? 0 : 8 * MiB);
        gk_task* task = nullptr;
        ASSERT_EQ(gk_task_create(rt_.get(), &s, &task), GK_OK) << gk_last_error();
        int32_t state = -1;
        ASSERT_EQ(gk_task_wait(task, -1, &state), GK_OK);
        ASSERT_EQ(state, GK_TASK_ADMITTED);
        ++admitted;
        gk_buffer* b = alloc_for(rt_.get(), task, 2 * MiB);
        gk_buffer_free(b, nullptr);
        ASSERT_EQ(gk_task_run(task), GK_OK);
        ASSERT_EQ(gk_task_complete(task), GK_OK);
        gk_task_destroy(task);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(admitted.load(), kThreads * kPerThread);
  char* text = nullptr;
  ASSERT_EQ(gk_scheduler_json(rt_.get(), &text), GK_OK);
  auto j = nlohmann::json::parse(text);
  gk_string_free(text);
  EXPECT_EQ(j["devices"][0]["memory_reserved"], 0);
  EXPECT_EQ(j["tasks"].size(), 0u);
}

}  // namespace
}  // namespace gk::test
