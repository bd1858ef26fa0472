// runtime::arena_pool: the arenas a program keeps per device. A call takes one and gives it back;
// the next call gets the same memory; concurrent calls get distinct memory; a call that needs more
// replaces the block it outgrew; devices never share a block.
#include <gtest/gtest.h>

#include <mutex>
#include <set>
#include <thread>

#include <kiln/runtime/arena.hpp>

namespace {

using kiln::runtime::arena_pool;

// Host blocks that count how many were made.
struct counting_maker {
  int made = 0;
  arena_pool::block operator()(std::int64_t bytes) {
    ++made;
    return arena_pool::host_block(bytes);
  }
};

TEST(ArenaPool, ACallReusesTheArenaOfTheCallBefore) {
  arena_pool pool;
  counting_maker make;
  unsigned char* first;
  {
    auto lease = pool.take(nullptr, 1000, make);
    first = lease.get().host;
    ASSERT_NE(first, nullptr);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(first) % 64, 0u);
    first[999] = 7;  // the whole size is addressable
    EXPECT_EQ(pool.free_blocks(), 0u);
  }
  EXPECT_EQ(pool.free_blocks(), 1u);
  for (std::int64_t bytes : {1000, 10, 0}) {  // smaller calls fit in it too
    auto lease = pool.take(nullptr, bytes, make);
    EXPECT_EQ(lease.get().host, first);
  }
  EXPECT_EQ(make.made, 1);
}

TEST(ArenaPool, ConcurrentCallsGetDistinctArenasAndAllComeBack) {
  arena_pool pool;
  counting_maker make;
  {
    auto a = pool.take(nullptr, 256, make);
    auto b = pool.take(nullptr, 256, make);  // a is lent: b is new memory
    EXPECT_NE(a.get().host, b.get().host);
    auto moved = std::move(a);  // a lease moves without giving the block back twice
    EXPECT_EQ(pool.free_blocks(), 0u);
  }
  EXPECT_EQ(pool.free_blocks(), 2u);
  EXPECT_EQ(make.made, 2);

  // Threads hammering one pool: no block is ever lent twice at once.
  std::mutex m;
  std::set<unsigned char*> lent;
  bool overlap = false;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        auto lease =
            pool.take(nullptr, 256, [](std::int64_t n) { return arena_pool::host_block(n); });
        {
          std::lock_guard lock(m);
          overlap = overlap || !lent.insert(lease.get().host).second;
        }
        std::lock_guard lock(m);
        lent.erase(lease.get().host);
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_FALSE(overlap);
  EXPECT_LE(pool.free_blocks(), 6u);  // at most one per thread beyond the first two
}

TEST(ArenaPool, ALargerCallReplacesTheBlockItOutgrew) {
  arena_pool pool;
  counting_maker make;
  { auto small = pool.take(nullptr, 100, make); }
  {
    auto large = pool.take(nullptr, 5000, make);
    EXPECT_GE(large.get().bytes, 5000);
    large.get().host[4999] = 1;
  }
  EXPECT_EQ(make.made, 2);
  EXPECT_EQ(pool.free_blocks(), 1u);  // the small block went
  { auto again = pool.take(nullptr, 4000, make); }
  EXPECT_EQ(make.made, 2);
}

TEST(ArenaPool, DevicesNeverShareABlock) {
  arena_pool pool;
  counting_maker make;
  int device_a = 0, device_b = 0;  // any distinct addresses key a device
  { auto on_a = pool.take(&device_a, 64, make); }
  {
    auto on_b = pool.take(&device_b, 64, make);
    EXPECT_EQ(on_b.get().device, &device_b);
    auto on_host = pool.take(nullptr, 64, make);
    EXPECT_EQ(on_host.get().device, nullptr);
  }
  EXPECT_EQ(make.made, 3);
  { auto on_a = pool.take(&device_a, 64, make); }
  EXPECT_EQ(make.made, 3);
}

}  // namespace
