// HostMemoryPool: blocks made on demand by the allocation function, kept when freed and handed out again to
// the smallest request they fit; containers on it hold ordinary values; it is safe across threads.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory_resource>
#include <thread>
#include <vector>

#include "nvrtc_runtime/host_memory_pool.hpp"

using namespace lab;

namespace {

// A pool over pageable memory that counts what it was asked to make.
struct CountingPool {
  std::vector<size_t> made;
  HostMemoryPool pool{[this](size_t bytes) {
    made.push_back(bytes);
    return HostBuffer::pageable(bytes);
  }};
};

}  // namespace

TEST_CASE("host memory pool: a freed block serves the next request it fits, the smallest first",
          "[host_memory_pool]") {
  CountingPool c;
  void* big = c.pool.allocate(1000, 64);
  void* small = c.pool.allocate(100, 64);
  CHECK(big != small);
  c.pool.deallocate(big, 1000, 64);
  c.pool.deallocate(small, 100, 64);
  CHECK(c.pool.allocate(80, 64) == small);  // both fit: the smaller one
  CHECK(c.pool.allocate(900, 64) == big);
  void* fresh = c.pool.allocate(50, 64);  // both in use: a new block
  CHECK(fresh != big);
  CHECK(fresh != small);
  CHECK(c.made == std::vector<size_t>{1000, 100, 50});
  CHECK(c.pool.blocks() == 3);
}

TEST_CASE("host memory pool: vectors on it keep their values and reuse its memory", "[host_memory_pool]") {
  CountingPool c;
  for (int round = 0; round < 5; ++round) {
    std::pmr::vector<uint8_t> bytes(4096, uint8_t(round), &c.pool);
    bytes[17] = 200;
    const std::pmr::vector<uint8_t> moved(std::move(bytes));
    CHECK(moved.get_allocator().resource() == &c.pool);
    CHECK(moved[17] == 200);
    CHECK(moved[4095] == uint8_t(round));
  }
  CHECK(c.made.size() == 1);
}

TEST_CASE("host memory pool: threads allocating and freeing at once get distinct blocks", "[host_memory_pool]") {
  CountingPool c;
  std::vector<std::thread> threads;
  std::vector<std::vector<void*>> held(4);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        void* p = c.pool.allocate(256, 64);
        held[size_t(t)].push_back(p);
        if (i % 2) {
          c.pool.deallocate(p, 256, 64);
          held[size_t(t)].pop_back();
        }
      }
    });
  for (std::thread& t : threads) t.join();
  std::vector<void*> all;
  for (const auto& h : held) all.insert(all.end(), h.begin(), h.end());
  std::sort(all.begin(), all.end());
  CHECK(std::adjacent_find(all.begin(), all.end()) == all.end());  // no block held twice
  CHECK(all.size() == 400);
  CHECK(c.pool.blocks() <= 404);
}
