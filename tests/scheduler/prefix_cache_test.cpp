// PrefixCache (engine/cache/prefix_cache.h): the block hash chain, longest-prefix lookup at exact positions, page
// references, pins, LRU eviction and reclaimable pages, against hand-checked small cases and seeded random prompts.
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include "cache/id_pool.h"
#include "cache/page_table.h"
#include "cache/prefix_cache.h"

using namespace voltserve;

namespace {

std::vector<int32_t> iota_tokens(int32_t n, int32_t base = 100) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) t[static_cast<size_t>(i)] = base + i;
  return t;
}

// Inserts tokens as an entry over freshly allocated pages (the cache retains them; the "sequence" then lets go).
int32_t insert(PrefixCache& cache, PageAllocator& pool, const std::vector<int32_t>& tokens,
               const std::string& salt = "") {
  std::optional<int32_t> row = cache.begin_insert(tokens, salt);
  if (!row) return -1;
  std::vector<int32_t> pages;
  REQUIRE(pool.allocate_n(pages_for_tokens(static_cast<int32_t>(tokens.size()), cache.page_size()), pages));
  REQUIRE(cache.commit_insert(tokens, salt, *row, pages).is_ok());
  for (int32_t p : pages) REQUIRE(pool.release(p).is_ok());
  return *row;
}

}  // namespace

TEST_CASE("block hash chain: each block's hash depends on every token before it", "[unit]") {
  const std::vector<int32_t> a = iota_tokens(40);
  std::vector<int32_t> b = a;
  b[3] = 7;  // differs in block 0
  const auto ha = block_hash_chain(a, 16);
  const auto hb = block_hash_chain(b, 16);
  REQUIRE(ha.size() == 2);  // 40 tokens: two full blocks, a partial tail
  REQUIRE(hb.size() == 2);
  CHECK(ha[0] != hb[0]);
  CHECK(ha[1] != hb[1]);  // the change propagates down the chain
  std::vector<int32_t> c = a;
  c[20] = 7;  // differs in block 1 only
  const auto hc = block_hash_chain(c, 16);
  CHECK(hc[0] == ha[0]);
  CHECK(hc[1] != ha[1]);
  CHECK(block_hash_chain(std::span<const int32_t>(a).first(32), 16) == ha);  // the tail does not matter
  CHECK(tail_hash(ha[1], std::span<const int32_t>(a).subspan(32)) !=
        tail_hash(ha[1], std::span<const int32_t>(a).subspan(32, 7)));
}

TEST_CASE("lookup finds the longest entry that is a prefix, at its exact length, within the limit", "[unit]") {
  PageAllocator pool(64);
  PrefixCache cache(8, 16, pool);
  const std::vector<int32_t> base = iota_tokens(100);
  auto prefix = [&](int32_t n) { return std::vector<int32_t>(base.begin(), base.begin() + n); };
  REQUIRE(insert(cache, pool, prefix(5)) >= 0);    // shorter than one block: no alignment
  REQUIRE(insert(cache, pool, prefix(37)) >= 0);   // mid-block
  REQUIRE(insert(cache, pool, prefix(64)) >= 0);   // block-aligned
  CHECK(cache.stats().n_entries == 3);

  auto hit = cache.lookup(base, 99);
  REQUIRE(hit);
  CHECK(hit->n_tokens == 64);
  CHECK(hit->pages.size() == 4);
  hit = cache.lookup(base, 63);  // the limit excludes the 64-token entry
  REQUIRE(hit);
  CHECK(hit->n_tokens == 37);
  CHECK(hit->pages.size() == 3);
  hit = cache.lookup(prefix(6), 5);
  REQUIRE(hit);
  CHECK(hit->n_tokens == 5);
  CHECK_FALSE(cache.lookup(prefix(6), 4));

  // A request that diverges inside the 37-token entry's tail only reaches the 5-token one.
  std::vector<int32_t> other = base;
  other[36] = 1;
  hit = cache.lookup(other, 99);
  REQUIRE(hit);
  CHECK(hit->n_tokens == 5);
  other[0] = 1;
  CHECK_FALSE(cache.lookup(other, 99));

  // An equal entry is not inserted twice.
  CHECK_FALSE(cache.begin_insert(prefix(37)).has_value());
  CHECK(cache.stats().n_entries == 3);
}

TEST_CASE("the cache holds page references: pages come back to the pool only on eviction", "[unit]") {
  PageAllocator pool(16);
  PrefixCache cache(4, 4, pool);
  const std::vector<int32_t> t = iota_tokens(10);  // 3 pages of 4
  REQUIRE(insert(cache, pool, t) >= 0);
  CHECK(pool.n_free() == 13);
  CHECK(cache.stats().n_pages_held == 3);
  CHECK(cache.reclaimable_pages() == 3);

  // A running sequence shares the hit's first two (full) pages: they are no longer reclaimable.
  auto hit = cache.lookup(t, 10);
  REQUIRE(hit);
  const std::vector<int32_t> shared(hit->pages.begin(), hit->pages.begin() + 2);  // hit->pages dies with the entry
  REQUIRE(pool.retain(shared[0]).is_ok());
  REQUIRE(pool.retain(shared[1]).is_ok());
  CHECK(cache.reclaimable_pages() == 1);
  // Pinned entries are never evicted.
  cache.pin(hit->entry);
  CHECK(cache.reclaimable_pages() == 0);
  CHECK_FALSE(cache.evict_for_pages(16));
  CHECK(cache.stats().n_entries == 1);
  cache.unpin(hit->entry);
  CHECK(cache.evict_for_pages(14));
  CHECK(cache.stats().n_entries == 0);
  CHECK(pool.n_free() == 14);  // the shared pages stay the sequence's
  REQUIRE(pool.release(shared[0]).is_ok());
  REQUIRE(pool.release(shared[1]).is_ok());
  CHECK(pool.n_free() == 16);
  CHECK(cache.stats().n_pages_held == 0);
}

TEST_CASE("LRU eviction when the snapshots run out: the least recently used entry goes, shallower first", "[unit]") {
  PageAllocator pool(64);
  PrefixCache cache(2, 16, pool);
  const std::vector<int32_t> a = iota_tokens(20, 1000);
  const std::vector<int32_t> b = iota_tokens(30, 2000);
  const std::vector<int32_t> c = iota_tokens(40, 3000);
  const int32_t row_a = insert(cache, pool, a);
  const int32_t row_b = insert(cache, pool, b);
  REQUIRE(row_a >= 0);
  REQUIRE(row_b >= 0);
  CHECK(row_a != row_b);
  REQUIRE(cache.lookup(a, 20));  // a is now more recent than b
  const int32_t row_c = insert(cache, pool, c);
  CHECK(row_c == row_b);  // b's snapshot row was reused
  CHECK(cache.lookup(a, 20));
  CHECK_FALSE(cache.lookup(b, 30));
  CHECK(cache.lookup(c, 40));
  CHECK(cache.stats().n_evictions == 1);
  cache.clear();
  CHECK(pool.n_free() == 64);
  CHECK(cache.stats().n_snapshots_used == 0);
}

TEST_CASE("random prompts: lookup equals a brute-force longest common entry", "[unit]") {
  std::mt19937 rng(20261201);
  PageAllocator pool(4096);
  PrefixCache cache(64, 8, pool);
  std::vector<std::vector<int32_t>> entries;
  // Prompts over a tiny vocabulary share many prefixes.
  auto random_tokens = [&](int32_t n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = static_cast<int32_t>(rng() % 3);
    return t;
  };
  for (int i = 0; i < 40; ++i) {
    std::vector<int32_t> t = random_tokens(1 + static_cast<int32_t>(rng() % 40));
    if (insert(cache, pool, t) >= 0) entries.push_back(t);
  }
  for (int q = 0; q < 300; ++q) {
    const std::vector<int32_t> query = random_tokens(1 + static_cast<int32_t>(rng() % 50));
    const int32_t limit = static_cast<int32_t>(rng() % (query.size() + 1));
    int32_t expect = 0;
    for (const auto& e : entries) {
      if (static_cast<int32_t>(e.size()) <= limit && std::equal(e.begin(), e.end(), query.begin())) {
        expect = std::max(expect, static_cast<int32_t>(e.size()));
      }
    }
    const auto hit = cache.lookup(query, limit);
    INFO("query " << q << " limit " << limit);
    CHECK((hit ? hit->n_tokens : 0) == expect);
  }
}

TEST_CASE("cache salts isolate: equal tokens under another salt never hit, the same salt does", "[unit]") {
  PageAllocator pool(64);
  PrefixCache cache(8, 16, pool);
  const std::vector<int32_t> t = iota_tokens(40);
  CHECK(chain_seed("") != chain_seed("tenant-a"));
  CHECK(chain_seed("tenant-a") != chain_seed("tenant-b"));
  CHECK(block_hash_chain(t, 16, chain_seed("tenant-a")) != block_hash_chain(t, 16));
  REQUIRE(insert(cache, pool, t, "tenant-a") >= 0);
  CHECK_FALSE(cache.lookup(t, 40));               // no salt
  CHECK_FALSE(cache.lookup(t, 40, "tenant-b"));   // another salt
  const auto hit = cache.lookup(t, 40, "tenant-a");
  REQUIRE(hit);
  CHECK(hit->n_tokens == 40);
  // The same tokens under another salt are a new entry, not "already cached".
  CHECK(insert(cache, pool, t, "tenant-b") >= 0);
  CHECK(insert(cache, pool, t) >= 0);
  CHECK(cache.stats().n_entries == 3);
  CHECK(insert(cache, pool, t, "tenant-a") == -1);  // equal entry: touched, no row taken
  cache.clear();
  CHECK(pool.n_free() == 64);
}

TEST_CASE("retention: a conversation's deep, recently hit prefix outlives its shallow snapshots and older traffic",
          "[unit]") {
  // A chat's chain of snapshots (two interval stops, the prompt end, the reply's end), then unrelated requests;
  // the next turn hits the deepest entry. When the rows run out, what goes first is everything that was not hit
  // since — the conversation's own shallow snapshots included — and the deep prefix stays.
  PageAllocator pool(256);
  PrefixCache cache(6, 16, pool);
  const std::vector<int32_t> turn = iota_tokens(93, 7000);
  auto first = [&](int32_t n) { return std::vector<int32_t>(turn.begin(), turn.begin() + n); };
  for (int32_t p : {32, 64, 69, 93}) REQUIRE(insert(cache, pool, first(p)) >= 0);
  REQUIRE(insert(cache, pool, iota_tokens(50, 100)) >= 0);
  REQUIRE(insert(cache, pool, iota_tokens(50, 200)) >= 0);
  std::vector<int32_t> next_turn = turn;
  for (int32_t i = 0; i < 20; ++i) next_turn.push_back(9000 + i);
  auto hit = cache.lookup(next_turn, static_cast<int32_t>(next_turn.size()) - 1);
  REQUIRE(hit);
  CHECK(hit->n_tokens == 93);
  for (int32_t k = 0; k < 5; ++k) REQUIRE(insert(cache, pool, iota_tokens(30, 1000 + 100 * k)) >= 0);
  CHECK(cache.stats().n_evictions == 5);
  hit = cache.lookup(next_turn, static_cast<int32_t>(next_turn.size()) - 1);
  REQUIRE(hit);
  CHECK(hit->n_tokens == 93);  // the deep prefix is still there
  CHECK_FALSE(cache.lookup(first(64), 64));  // its shallow snapshots went first
  CHECK_FALSE(cache.lookup(iota_tokens(50, 100), 50));
}
