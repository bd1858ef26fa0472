// Asynchronous calls (runtime/fence.hpp): submit returns at once with a fence; calls on a device
// run in submission order; kiln::after makes a call wait for fences of other devices, of a
// framework's host timeline or of its Vulkan semaphores; failures reach fence.wait(), also of
// calls that waited for a failed one; kiln keeps its buffers alive until the fence. Device-only
// calls on Vulkan go straight to the device queue (their host queue stays untouched).
#include <gtest/gtest.h>
#include <vulkan/vulkan.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <optional>
#include <thread>

#include <kiln/executable.hpp>
#include <kiln/kiln.hpp>
#include <kiln/runtime/vulkan/context.hpp>

using namespace kiln;
using namespace std::chrono_literals;

namespace {

constexpr auto twice_plus_one = fn<tensor<f32, dyn>>([](auto x) { return x * 2.0f + 1.0f; });
constexpr auto scaled = fn<tensor<f32, dyn>, tensor<f32>>([](auto x, auto s) { return x * s; });

// y = x * x + x (one region).
executable square_plus_self() {
  graph g;
  auto x = g.input("x", dtype::f32, {dyn});
  g.output("y", g.add(g.mul(x, x), x));
  return compile(g);
}

std::vector<float> ramp(std::size_t n, float step = 0.25f, float start = -3.0f) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = start + step * float(i % 97);
  return v;
}

// A timeline semaphore on d's VkDevice, as a framework would make one; destroyed with it.
struct vk_timeline {
  VkDevice vk;
  VkSemaphore semaphore = VK_NULL_HANDLE;
  explicit vk_timeline(const kiln::device& d) : vk(d.vulkan_device()) {
    VkSemaphoreTypeCreateInfo type{};
    type.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO;
    type.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
    VkSemaphoreCreateInfo ci{};
    ci.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO;
    ci.pNext = &type;
    EXPECT_EQ(vkCreateSemaphore(vk, &ci, nullptr, &semaphore), VK_SUCCESS);
  }
  ~vk_timeline() { vkDestroySemaphore(vk, semaphore, nullptr); }
  void signal(std::uint64_t value) const {
    VkSemaphoreSignalInfo si{};
    si.sType = VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO;
    si.semaphore = semaphore;
    si.value = value;
    EXPECT_EQ(vkSignalSemaphore(vk, &si), VK_SUCCESS);
  }
  std::uint64_t value() const {
    std::uint64_t v = 0;
    EXPECT_EQ(vkGetSemaphoreCounterValue(vk, semaphore, &v), VK_SUCCESS);
    return v;
  }
};

std::vector<device> devices() { return {device::cpu(), device::vulkan()}; }

}  // namespace

// Two dependent calls on each device, the second after the first's fence, on device buffers and
// on host data; the results against a scalar reference.
TEST(Async, DependentCallsChainOnEachDevice) {
  const executable sq = square_plus_self();
  const std::vector<float> x = ramp(5000);
  std::vector<float> want(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    float y = x[i] * 2.0f + 1.0f;
    want[i] = y * y + y;
  }
  for (const device& d : devices()) {
    SCOPED_TRACE(d.name());
    buffer<float> xb = d.upload(x), yb = d.alloc<float>(5000), zb = d.alloc<float>(5000);
    fence a = twice_plus_one.on(d).submit(xb, into(yb));
    fence b = sq.submit(after(a), {yb}, {zb}, d);
    b.wait();
    EXPECT_TRUE(a.ready());
    std::vector<float> z(5000);
    zb.download(z);
    EXPECT_EQ(z, want);
    // Host data: the same chain through the device's host queue.
    std::vector<float> y(5000), z2(5000);
    fence c = twice_plus_one.on(d).submit(x, into(y));
    sq.submit(after(c), {y}, {z2}, d).wait();
    EXPECT_EQ(z2, want);
  }
  // The CPU device's buffers given to a Vulkan submission: host data, as in a synchronous call.
  const device cpu = device::cpu();
  buffer<float> xb = cpu.upload(x), yb = cpu.alloc<float>(5000);
  twice_plus_one.on(device::vulkan()).submit(xb, into(yb)).wait();
  std::vector<float> y(5000);
  yb.download(y);
  for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i] * 2.0f + 1.0f) << i;
}

constexpr auto plus_one = fn<tensor<i32, dyn>>([](auto x) { return x + 1; });

// 1,000 dependent submissions on device buffers, ping-ponging between two buffers, with one host
// wait at the end: every element must have gained exactly 1,000 (a call that ran before the one
// it waits for would read a stale buffer and lose steps).
TEST(Async, AThousandChainedSubmissionsWithOneHostWait) {
  std::vector<std::int32_t> x(4096), want(4096);
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<std::int32_t>(i * 7) - 9000;
    want[i] = x[i] + 1000;
  }
  for (const device& d : devices()) {
    SCOPED_TRACE(d.name());
    buffer<std::int32_t> a = d.upload(x), b = d.alloc<std::int32_t>(4096);
    fence last = plus_one.on(d).submit(a, into(b));
    for (int k = 1; k < 1000; ++k)
      last = k % 2 ? plus_one.on(d).submit(after(last), b, into(a))
                   : plus_one.on(d).submit(after(last), a, into(b));
    last.wait();
    std::vector<std::int32_t> got(4096);
    a.download(got);  // the 1,000th call (k = 999) wrote a
    EXPECT_EQ(got, want);
  }
}

// Without after(), calls on one device still run in submission order: the second reads what the
// first wrote, and a synchronous call (submit + wait) comes after both.
TEST(Async, CallsOnADeviceRunInSubmissionOrder) {
  const executable sq = square_plus_self();
  for (const device& d : devices()) {
    SCOPED_TRACE(d.name());
    host_timeline gate;
    std::vector<float> x = ramp(3000), y(3000, -1.0f), z(3000, -1.0f), w(3000, -1.0f);
    // Held back by the gate, so that everything below is queued while it waits.
    fence first = twice_plus_one.on(d).submit(after(gate.at(1)), x, into(y));
    fence second = sq.submit({y}, {z}, d);
    EXPECT_FALSE(first.ready());
    EXPECT_FALSE(second.ready());
    std::thread opener([&] {
      std::this_thread::sleep_for(20ms);
      gate.signal(1);
    });
    twice_plus_one.on(d)(z, into(w));  // waits for both before it runs
    opener.join();
    EXPECT_TRUE(first.ready());
    EXPECT_TRUE(second.ready());
    for (std::size_t i = 0; i < x.size(); ++i) {
      float yi = x[i] * 2.0f + 1.0f, zi = yi * yi + yi;
      ASSERT_EQ(y[i], yi) << i;
      ASSERT_EQ(z[i], zi) << i;
      ASSERT_EQ(w[i], zi * 2.0f + 1.0f) << i;
    }
  }
}

// wait_for gives up at its limit while the call waits for a fence nobody has signalled, then
// succeeds once it is; a default fence is reached.
TEST(Async, WaitForTimesOut) {
  EXPECT_TRUE(fence().ready());
  EXPECT_NO_THROW(fence().wait());
  for (const device& d : devices()) {
    SCOPED_TRACE(d.name());
    host_timeline gate;
    std::vector<float> x = ramp(100), y(100);
    fence done = twice_plus_one.on(d).submit(after(gate.at(5)), x, into(y));
    EXPECT_FALSE(done.wait_for(15ms));
    gate.signal(4);
    EXPECT_FALSE(done.wait_for(5ms));
    gate.signal(5);
    EXPECT_TRUE(done.wait_for(10s));
    EXPECT_EQ(y[3], x[3] * 2.0f + 1.0f);
  }
}

// Limits too long for nanoseconds (hours::max() overflows a cast) wait without one, rather than
// giving up at once; negative ones do not wait.
TEST(Async, WaitForTakesAnyLimit) {
  for (const device& d : devices()) {
    SCOPED_TRACE(d.name());
    host_timeline gate;
    std::vector<float> x = ramp(100), y(100);
    fence done = twice_plus_one.on(d).submit(after(gate.at(1)), x, into(y));
    EXPECT_FALSE(done.wait_for(-5s));
    EXPECT_FALSE(done.wait_for(std::chrono::hours::min()));
    std::thread later([&] {
      std::this_thread::sleep_for(30ms);
      gate.signal(1);
    });
    EXPECT_TRUE(done.wait_for(std::chrono::hours::max()));
    later.join();
    EXPECT_EQ(y[3], x[3] * 2.0f + 1.0f);
    EXPECT_TRUE(done.wait_for(std::chrono::duration<double, std::ratio<31557600000>>(5)));
  }
}

// A host timeline destroyed before it reaches a point fails that point, and the calls waiting for
// it fail without running, naming the timeline; the device goes on. A copy keeps it alive.
TEST(Async, ADestroyedHostTimelineFailsItsWaiters) {
  for (const device& d : devices()) {
    SCOPED_TRACE(d.name());
    std::vector<float> x = ramp(100), y(100, -7.0f), z(100);
    fence point, done, kept_done;
    {
      host_timeline gate;
      host_timeline copy = gate;
      point = gate.at(2);
      done = twice_plus_one.on(d).submit(after(point), x, into(y));
      {
        host_timeline other;
        kept_done = twice_plus_one.on(d).submit(after(other.at(1)), x, into(z));
      }  // `other` goes: kept_done's call fails
      gate.signal(1);
      EXPECT_FALSE(point.ready());
    }  // the last copy of `gate` goes
    EXPECT_TRUE(point.ready());
    try {
      done.wait();
      ADD_FAILURE() << "a call waiting for a destroyed timeline ran";
    } catch (const error& e) {
      EXPECT_NE(std::string(e.what()).find("host_timeline"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("destroyed at 1"), std::string::npos) << e.what();
    }
    EXPECT_THROW(kept_done.wait(), error);
    EXPECT_EQ(y, std::vector<float>(100, -7.0f));  // it did not run
    twice_plus_one.on(d).submit(x, into(z)).wait();
    EXPECT_EQ(z[5], x[5] * 2.0f + 1.0f);
  }
}

// A call that fails when it runs reports its kiln::error through its fence; one that waited for
// it fails with the same error without running (its output keeps its values); the device goes on
// with the next call.
TEST(Async, FailuresReachTheFenceAndWhatWaitedForIt) {
  graph g;
  auto x = g.input("x", dtype::f32, {dyn, dyn});
  g.output("i", g.argmax(x, 1, false));
  const executable arg = compile(g);
  const executable sq = square_plus_self();
  for (const device& d : devices()) {
    SCOPED_TRACE(d.name());
    std::vector<float> empty;  // 3 x 0: argmax has no index to give
    std::vector<std::int64_t> idx(3, 7);
    std::vector<float> y(10, 1.0f), z(10, -1.0f);
    fence bad = arg.submit({tensor_ref(empty.data(), dtype::f32, {3, 0})}, {idx}, d);
    fence after_bad = sq.submit(after(bad), {y}, {z}, d);
    try {
      bad.wait();
      ADD_FAILURE() << "the failed call's fence waited without an error";
    } catch (const error& e) {
      EXPECT_NE(std::string(e.what()).find("the axis has size 0 at this call"), std::string::npos)
          << e.what();
    }
    EXPECT_THROW(after_bad.wait(), error);
    EXPECT_EQ(z, std::vector<float>(10, -1.0f));  // it did not run
    // The device goes on: the next call runs.
    sq.submit({y}, {z}, d).wait();
    EXPECT_EQ(z, std::vector<float>(10, 2.0f));
  }
}

// Mistakes in the arguments are thrown by submit itself, before anything is queued.
TEST(Async, ArgumentMistakesThrowAtSubmit) {
  const executable sq = square_plus_self();
  std::vector<float> x(10);
  std::vector<std::int32_t> wrong(10);
  for (const device& d : devices()) {
    try {
      sq.submit({x}, {wrong}, d);
      ADD_FAILURE() << "an i32 result buffer was taken for an f32 result";
    } catch (const error& e) {
      EXPECT_EQ(std::string(e.what()),
                "kiln: " + sq.name() + ": result 1 ('y') is f32 but its buffer holds i32");
    }
  }
}

// kiln's buffers given to a submission stay alive until its fence: the input goes out of scope
// before the call runs, and the call still reads it. A number for a scalar is copied.
TEST(Async, BuffersAndScalarsOutliveTheirNames) {
  for (const device& d : devices()) {
    SCOPED_TRACE(d.name());
    host_timeline gate;
    buffer<float> out = d.alloc<float>(2000);
    fence done;
    {
      buffer<float> in = d.upload(ramp(2000));
      done = scaled.on(d).submit(after(gate.at(1)), in, 0.5f, into(out));
    }
    gate.signal(1);
    done.wait();
    std::vector<float> got(2000), want = ramp(2000);
    out.download(got);
    for (auto& v : want) v *= 0.5f;
    EXPECT_EQ(got, want);
  }
}

// A framework's Vulkan timeline semaphore: a call waits for it on the device and signals another
// one there. Device buffers only, so the calls go straight to the device queue: the device's host
// queue takes nothing.
TEST(Async, VulkanSemaphoresAreWaitedForAndSignalledOnTheDevice) {
  const device d = device::vulkan();
  const executable sq = square_plus_self();
  vk_timeline in_ready(d), out_ready(d);
  const std::uint64_t host_tasks = d.context()->host_queue().last_pushed();
  const std::vector<float> x = ramp(4096);
  buffer<float> xb = d.upload(x), yb = d.alloc<float>(4096), zb = d.alloc<float>(4096);
  fence a =
      twice_plus_one.on(d).submit(after(external_fence(d, in_ready.semaphore, 3)), xb, into(yb));
  fence b =
      sq.submit(after(a).then_signal(external_fence(d, out_ready.semaphore, 9)), {yb}, {zb}, d);
  EXPECT_FALSE(a.ready());
  EXPECT_FALSE(b.ready());
  EXPECT_EQ(out_ready.value(), 0u);
  in_ready.signal(3);
  b.wait();
  // Signalled with b's own point, though not necessarily observed at the same instant.
  EXPECT_TRUE(external_fence(d, out_ready.semaphore, 9).wait_for(10s));
  EXPECT_EQ(out_ready.value(), 9u);
  EXPECT_EQ(d.context()->host_queue().last_pushed(), host_tasks);
  std::vector<float> z(4096);
  zb.download(z);
  for (std::size_t i = 0; i < x.size(); ++i) {
    float y = x[i] * 2.0f + 1.0f;
    ASSERT_EQ(z[i], y * y + y) << i;
  }
  // The CPU waits for a Vulkan semaphore too (on its host queue), and signals one.
  vk_timeline gate(d);
  std::vector<float> host_y(4096);
  fence c = twice_plus_one.on(device::cpu())
                .submit(after(external_fence(d, gate.semaphore, 1))
                            .then_signal(external_fence(d, out_ready.semaphore, 10)),
                        x, into(host_y));
  EXPECT_FALSE(c.wait_for(10ms));
  gate.signal(1);
  c.wait();
  EXPECT_EQ(out_ready.value(), 10u);
  EXPECT_EQ(host_y[5], x[5] * 2.0f + 1.0f);
  EXPECT_THROW(external_fence(device::cpu(), gate.semaphore, 1), error);
}

// Across devices: a Vulkan call waits for a CPU call's fence (its host queue does), and the CPU
// for a Vulkan call's.
TEST(Async, CallsWaitForFencesOfOtherDevices) {
  const device cpu = device::cpu(), gpu = device::vulkan();
  const executable sq = square_plus_self();
  const std::vector<float> x = ramp(1500);
  std::vector<float> y(1500), z(1500), w(1500);
  host_timeline gate;
  fence on_cpu = twice_plus_one.on(cpu).submit(after(gate.at(1)), x, into(y));
  fence on_gpu = sq.submit(after(on_cpu), {y}, {z}, gpu);
  fence back = twice_plus_one.on(cpu).submit(after(on_gpu), z, into(w));
  EXPECT_FALSE(back.ready());
  gate.signal(1);
  back.wait();
  for (std::size_t i = 0; i < x.size(); ++i) {
    float yi = x[i] * 2.0f + 1.0f, zi = yi * yi + yi;
    ASSERT_EQ(w[i], zi * 2.0f + 1.0f) << i;
  }
}

// An MLP (two contractions, one transient between them) on device buffers goes to the device
// queue whole, its transient in an arena held until the fence; the result against a double
// reference.
TEST(Async, TransientsOfADeviceOnlyCallLiveUntilItsFence) {
  const device d = device::vulkan();
  constexpr std::int64_t rows = 33, in = 40, hidden = 72, out = 24;
  graph g;
  auto x = g.input("x", dtype::f32, {rows, in});
  auto w1 = g.input("w1", dtype::f32, {in, hidden});
  auto w2 = g.input("w2", dtype::f32, {hidden, out});
  g.output("y", g.matmul(g.relu(g.matmul(x, w1)), w2));
  const executable mlp = compile(g);
  ASSERT_EQ(mlp.dispatch_count(), 2);
  ASSERT_EQ(mlp.plan().transients.size(), 1u);
  auto fill = [](std::size_t n, int seed) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = float((i * 37 + seed) % 19) / 9.0f - 1.0f;
    return v;
  };
  std::vector<float> xs = fill(rows * in, 1), w1s = fill(in * hidden, 2),
                     w2s = fill(hidden * out, 3);
  const std::uint64_t host_tasks = d.context()->host_queue().last_pushed();
  buffer<float> yb = d.alloc<float>(shape{rows, out});
  fence done;
  {
    buffer<float> xb = d.upload(xs, {rows, in}), w1b = d.upload(w1s, {in, hidden}),
                  w2b = d.upload(w2s, {hidden, out});
    done = mlp.submit({xb, w1b, w2b}, {yb}, d);
  }
  done.wait();
  EXPECT_EQ(d.context()->host_queue().last_pushed(), host_tasks);
  std::vector<float> y(rows * out);
  yb.download(y);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < out; ++c) {
      double acc = 0;
      for (std::int64_t h = 0; h < hidden; ++h) {
        double t = 0;
        for (std::int64_t k = 0; k < in; ++k) t += double(xs[r * in + k]) * w1s[k * hidden + h];
        acc += std::max(t, 0.0) * w2s[h * out + c];
      }
      ASSERT_NEAR(y[r * out + c], acc, 1e-4 * (1 + std::abs(acc))) << r << "," << c;
    }
}
