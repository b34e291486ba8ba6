// PrefixCache: block hash chain, bucketed entries, exact token comparison, LRU eviction (see prefix_cache.h).
#include "cache/prefix_cache.h"

#include <algorithm>
#include <string>
#include <string_view>

#include "cache/page_table.h"

namespace voltserve {

namespace {

constexpr uint64_t kChainSeed = 0x243f6a8885a308d3ULL;  // the chain hash before block 0 (digits of pi)

// splitmix64's finalizer: a well-mixed 64-bit step. Collisions only cost a token comparison (lookup verifies every
// candidate), so a non-cryptographic hash is enough.
uint64_t mix(uint64_t h, uint64_t v) {
  uint64_t z = h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t hash_tokens(uint64_t h, std::span<const int32_t> tokens) {
  for (int32_t t : tokens) h = mix(h, static_cast<uint32_t>(t));
  return mix(h, tokens.size());
}

}  // namespace

uint64_t chain_seed(std::string_view salt) {
  if (salt.empty()) return kChainSeed;
  uint64_t h = mix(kChainSeed, 0x5a17);
  for (unsigned char c : salt) h = mix(h, c);
  return mix(h, salt.size());
}

std::vector<uint64_t> block_hash_chain(std::span<const int32_t> tokens, int32_t block_size, uint64_t seed) {
  std::vector<uint64_t> out;
  if (block_size < 1) return out;
  uint64_t h = seed;
  for (size_t b = 0; (b + 1) * static_cast<size_t>(block_size) <= tokens.size(); ++b) {
    h = hash_tokens(h, tokens.subspan(b * static_cast<size_t>(block_size), static_cast<size_t>(block_size)));
    out.push_back(h);
  }
  return out;
}

uint64_t tail_hash(uint64_t chain, std::span<const int32_t> tail) { return hash_tokens(mix(chain, 0x7a11), tail); }

PrefixCache::PrefixCache(int32_t n_snapshots, int32_t page_size, PageAllocator& pages)
    : page_size_(std::max(1, page_size)), pages_(pages), snapshots_(std::max(0, n_snapshots)) {}

uint64_t PrefixCache::bucket_of(std::span<const int32_t> tokens, std::string_view salt) const {
  const size_t n_full = tokens.size() / static_cast<size_t>(page_size_);
  const uint64_t seed = chain_seed(salt);
  if (n_full == 0) return seed;
  return block_hash_chain(tokens.first(n_full * static_cast<size_t>(page_size_)), page_size_, seed).back();
}

std::optional<PrefixHit> PrefixCache::lookup(std::span<const int32_t> tokens, int32_t limit, std::string_view salt) {
  limit = std::min<int32_t>(limit, static_cast<int32_t>(tokens.size()));
  if (limit < 1 || by_bucket_.empty()) return std::nullopt;
  const uint64_t seed = chain_seed(salt);
  const std::vector<uint64_t> chain = block_hash_chain(tokens.first(static_cast<size_t>(limit)), page_size_, seed);
  int32_t best = -1;
  for (size_t depth = 0; depth <= chain.size(); ++depth) {
    const uint64_t bucket = depth == 0 ? seed : chain[depth - 1];
    auto [lo, hi] = by_bucket_.equal_range(bucket);
    for (auto it = lo; it != hi; ++it) {
      const Entry& e = entries_[static_cast<size_t>(it->second)];
      const auto p = static_cast<int32_t>(e.tokens.size());
      if (p > limit || (best >= 0 && p <= static_cast<int32_t>(entries_[static_cast<size_t>(best)].tokens.size()))) {
        continue;
      }
      // The salt is compared too: a seed collision must not share prefixes across salts.
      if (e.salt == salt && std::equal(e.tokens.begin(), e.tokens.end(), tokens.begin())) best = it->second;
    }
  }
  if (best < 0) return std::nullopt;
  Entry& e = entries_[static_cast<size_t>(best)];
  e.last_used = ++clock_;
  return PrefixHit{best, static_cast<int32_t>(e.tokens.size()), e.snapshot, e.pages};
}

int32_t PrefixCache::find_equal(std::span<const int32_t> tokens, std::string_view salt, uint64_t bucket,
                                uint64_t tail) const {
  auto [lo, hi] = by_bucket_.equal_range(bucket);
  for (auto it = lo; it != hi; ++it) {
    const Entry& e = entries_[static_cast<size_t>(it->second)];
    if (e.tail == tail && e.salt == salt && std::ranges::equal(e.tokens, tokens)) return it->second;
  }
  return -1;
}

std::optional<int32_t> PrefixCache::begin_insert(std::span<const int32_t> tokens, std::string_view salt) {
  if (tokens.empty() || snapshots_.n_total() == 0) return std::nullopt;
  const uint64_t bucket = bucket_of(tokens, salt);
  const size_t n_full = tokens.size() / static_cast<size_t>(page_size_) * static_cast<size_t>(page_size_);
  const uint64_t tail = tail_hash(bucket, tokens.subspan(n_full));
  if (const int32_t same = find_equal(tokens, salt, bucket, tail); same >= 0) {
    entries_[static_cast<size_t>(same)].last_used = ++clock_;
    return std::nullopt;
  }
  std::optional<int32_t> row = snapshots_.allocate();
  while (!row) {
    const int32_t victim = lru_victim();
    if (victim < 0) return std::nullopt;
    evict(victim);
    row = snapshots_.allocate();
  }
  return row;
}

Status PrefixCache::commit_insert(std::span<const int32_t> tokens, std::string_view salt, int32_t snapshot,
                                  std::span<const int32_t> pages) {
  const int32_t want = pages_for_tokens(static_cast<int32_t>(tokens.size()), page_size_);
  if (static_cast<int32_t>(pages.size()) < want) {
    (void)snapshots_.release(snapshot);
    return internal_error("prefix cache: an entry of " + std::to_string(tokens.size()) + " tokens needs " +
                          std::to_string(want) + " pages, got " + std::to_string(pages.size()));
  }
  for (int32_t i = 0; i < want; ++i) {
    if (Status s = pages_.retain(pages[static_cast<size_t>(i)]); !s.is_ok()) {
      for (int32_t j = 0; j < i; ++j) (void)pages_.release(pages[static_cast<size_t>(j)]);
      (void)snapshots_.release(snapshot);
      return s;
    }
  }
  int32_t id = 0;
  if (!free_entries_.empty()) {
    id = free_entries_.back();
    free_entries_.pop_back();
  } else {
    id = static_cast<int32_t>(entries_.size());
    entries_.emplace_back();
  }
  Entry& e = entries_[static_cast<size_t>(id)];
  e.live = true;
  e.tokens.assign(tokens.begin(), tokens.end());
  e.salt.assign(salt);
  e.pages.assign(pages.begin(), pages.begin() + want);
  e.bucket = bucket_of(tokens, salt);
  const size_t n_full = tokens.size() / static_cast<size_t>(page_size_) * static_cast<size_t>(page_size_);
  e.tail = tail_hash(e.bucket, tokens.subspan(n_full));
  e.snapshot = snapshot;
  e.last_used = ++clock_;
  e.pins = 0;
  for (int32_t p : e.pages) ++page_refs_[p];
  by_bucket_.emplace(e.bucket, id);
  return Status::ok();
}

void PrefixCache::abort_insert(int32_t snapshot) { (void)snapshots_.release(snapshot); }

void PrefixCache::pin(int32_t entry) { ++entries_[static_cast<size_t>(entry)].pins; }

void PrefixCache::unpin(int32_t entry) {
  Entry& e = entries_[static_cast<size_t>(entry)];
  if (e.pins > 0) --e.pins;
}

int32_t PrefixCache::lru_victim() const {
  int32_t victim = -1;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    if (!e.live || e.pins > 0) continue;
    if (victim < 0) {
      victim = static_cast<int32_t>(i);
      continue;
    }
    const Entry& v = entries_[static_cast<size_t>(victim)];
    if (e.last_used < v.last_used || (e.last_used == v.last_used && e.tokens.size() < v.tokens.size())) {
      victim = static_cast<int32_t>(i);
    }
  }
  return victim;
}

void PrefixCache::evict(int32_t entry) {
  Entry& e = entries_[static_cast<size_t>(entry)];
  auto [lo, hi] = by_bucket_.equal_range(e.bucket);
  for (auto it = lo; it != hi; ++it) {
    if (it->second == entry) {
      by_bucket_.erase(it);
      break;
    }
  }
  for (int32_t p : e.pages) {
    (void)pages_.release(p);
    if (auto it = page_refs_.find(p); it != page_refs_.end() && --it->second == 0) page_refs_.erase(it);
  }
  (void)snapshots_.release(e.snapshot);
  e = Entry{};
  free_entries_.push_back(entry);
  ++n_evictions_;
}

int32_t PrefixCache::reclaimable_pages() const {
  std::unordered_map<int32_t, int32_t> pinned;
  for (const Entry& e : entries_) {
    if (!e.live || e.pins == 0) continue;
    for (int32_t p : e.pages) pinned[p] = 1;
  }
  int32_t n = 0;
  for (const auto& [page, refs] : page_refs_) {
    if (pages_.refcount(page) == refs && !pinned.contains(page)) ++n;
  }
  return n;
}

bool PrefixCache::evict_for_pages(int32_t n_free_pages) {
  while (pages_.n_free() < n_free_pages) {
    const int32_t victim = lru_victim();
    if (victim < 0) return false;
    evict(victim);
  }
  return true;
}

void PrefixCache::clear() {
  for (int32_t victim = lru_victim(); victim >= 0; victim = lru_victim()) evict(victim);
}

PrefixCacheStats PrefixCache::stats() const {
  PrefixCacheStats s;
  for (const Entry& e : entries_) s.n_entries += e.live ? 1 : 0;
  s.n_snapshots_total = snapshots_.n_total();
  s.n_snapshots_used = snapshots_.n_total() - snapshots_.n_free();
  s.n_pages_held = static_cast<int32_t>(page_refs_.size());
  s.n_evictions = n_evictions_;
  return s;
}

}  // namespace voltserve
