// PageAllocator / SlotAllocator (refcounts, all-or-nothing allocation, double-free detection) and PageTable.
#include <algorithm>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include "cache/id_pool.h"
#include "cache/page_table.h"

using namespace voltserve;

TEST_CASE("id pool hands out the lowest free ids and takes them back", "[unit]") {
  PageAllocator pool(4);
  CHECK(pool.n_total() == 4);
  CHECK(pool.n_free() == 4);
  CHECK(pool.allocate() == 0);
  CHECK(pool.allocate() == 1);
  CHECK(pool.allocate() == 2);
  CHECK(pool.release(1).is_ok());
  CHECK(pool.allocate() == 1);
  CHECK(pool.allocate() == 3);
  CHECK(pool.n_free() == 0);
  CHECK_FALSE(pool.allocate().has_value());
  for (int32_t id = 0; id < 4; ++id) CHECK(pool.release(id).is_ok());
  CHECK(pool.n_free() == 4);
}

TEST_CASE("refcounts: a retained id is free only after its last release", "[unit]") {
  SlotAllocator slots(2);
  const int32_t s = *slots.allocate();
  CHECK(slots.refcount(s) == 1);
  CHECK(slots.retain(s).is_ok());
  CHECK(slots.refcount(s) == 2);
  CHECK(slots.release(s).is_ok());
  CHECK(slots.n_free() == 1);
  CHECK(slots.release(s).is_ok());
  CHECK(slots.n_free() == 2);
  // Double free, unknown ids and retaining a free id are reported, and leave the pool intact.
  Status twice = slots.release(s);
  CHECK(twice.code() == StatusCode::kInternal);
  CHECK(twice.message().find("not allocated") != std::string::npos);
  CHECK_FALSE(slots.release(-1).is_ok());
  CHECK_FALSE(slots.release(2).is_ok());
  CHECK_FALSE(slots.retain(0).is_ok());
  CHECK(slots.n_free() == 2);
}

TEST_CASE("allocate_n is all or nothing", "[unit]") {
  PageAllocator pool(5);
  std::vector<int32_t> got;
  CHECK(pool.allocate_n(3, got));
  CHECK(got == std::vector<int32_t>{0, 1, 2});
  CHECK_FALSE(pool.allocate_n(3, got));
  CHECK(got.size() == 3);
  CHECK(pool.n_free() == 2);
}

TEST_CASE("page table grows with the tokens computed and releases every page", "[unit]") {
  PageAllocator pool(6);
  PageTable a(4), b(4);
  CHECK(pages_for_tokens(0, 4) == 0);
  CHECK(pages_for_tokens(1, 4) == 1);
  CHECK(pages_for_tokens(4, 4) == 1);
  CHECK(pages_for_tokens(5, 4) == 2);
  CHECK(a.grow_to(5, pool));
  CHECK(a.n_pages() == 2);
  CHECK(a.capacity_tokens() == 8);
  CHECK(a.grow_to(8, pool));
  CHECK(a.n_pages() == 2);  // no new page within capacity
  CHECK(b.grow_to(13, pool));
  CHECK(b.n_pages() == 4);
  CHECK_FALSE(a.grow_to(9, pool));  // the pool is empty: unchanged
  CHECK(a.n_pages() == 2);
  // Two live tables never share a page.
  for (int32_t p : a.pages()) CHECK(std::find(b.pages().begin(), b.pages().end(), p) == b.pages().end());
  CHECK(a.release_all(pool).is_ok());
  CHECK(a.n_pages() == 0);
  CHECK(pool.n_free() == 2);
  CHECK(b.release_all(pool).is_ok());
  CHECK(pool.n_free() == 6);
}
