// PrefixCache: the index of reusable prefixes on a hybrid model — attention KV pages shared by reference count and
// Gated DeltaNet state snapshots at exact token positions, found by a block hash chain. Host-side bookkeeping only
// (the copies are Backend ops). Tested in tests/scheduler/prefix_cache_test.cpp and, in the engine, on a fixture
// model in tests/golden/prefix_cache_test.cpp.
//
// Design (issue 25)
// -----------------
// What is cached. A prefix of length p is reusable when two things exist: the attention KV of positions [0, p) and
// the GDN (conv + recurrent) state after exactly p tokens. KV is paged (page_size tokens a page), so positions can be
// shared page by page; the GDN state is not: it exists only where it was materialised, and cannot be rewound. So an
// entry is (tokens [0, p), the KV pages covering them, one state snapshot taken at p). p is any position — there is
// no alignment of prompts to blocks (vLLM inflates its block to the state size and misses every shorter prompt).
//
// Where snapshots are taken (EngineImpl): at the positions a later request resumes from — prompt end minus one (an
// identical prompt, n > 1 siblings, retries and preempted sequences must still compute the last prompt token to get
// the logits of the first generated one, so a snapshot at the prompt end could skip nothing more; the prefill stops
// there for one step), the caller's resume hint (Request::n_prompt_resume: the chat server passes where the
// generation prompt starts, since Qwen3.5's templates re-render an earlier turn without its <think> block), every
// `snapshot_interval` tokens of a long prefill (a shared system prompt or document followed by different
// questions), and the end of a finished request's committed text (the next turn of a completion or an agent's tool
// loop resends prompt + reply). Snapshots come from committed state only: prefill chunks are; verify items never
// stop at a snapshot, and a speculating sequence that finishes inside a verify run it has not committed takes no
// end-of-text snapshot (its live state holds the drafts after the stop).
//
// Salts. Request::cache_salt seeds the chain (chain_seed) and is kept in the entry and compared, so requests with
// different salts never share a prefix (vLLM's cache_salt: one tenant cannot time another's prompts).
//
// How a lookup works. Block b's hash chains the previous one: h_b = H(h_{b-1}, tokens of block b), h_{-1} = seed.
// Entries are bucketed by the chain hash of their full blocks (floor(p / page_size) of them); a lookup walks the
// request's chain block by block and, at each depth, checks that bucket's entries, whose partial tail must match the
// request's next tokens. Every candidate is then compared token for token, so a hash collision costs a comparison,
// never a wrong hit. The longest entry with p <= limit (n_target - 1) wins.
//
// How a hit is used (EngineImpl::step). A waiting sequence looks up once per step before planning and pins its hit
// (pinned entries are never evicted). The scheduler sees the sequence as n_computed = p with floor(p / page_size)
// pages already held, so it plans, budgets and pages only the rest. On admission the sequence retains the entry's
// full pages (refcount + 1: shared, never written again — every writer writes at positions >= its own n_computed),
// copies the partial last page into a fresh one (Backend::copy_kv_page: it will write positions >= p there), and
// copies the snapshot into its state slot (Backend::load_state). Greedy output is the same as without the cache up
// to the rounding of prefilling fewer rows (exact on the CPU backend for the fixtures).
//
// Memory. Snapshots live in backend memory next to the state slots: n_snapshots rows per GDN layer
// (CacheGeometry::n_snapshots, ModelOptions::n_prefix_snapshots; the memory plan's line "prefix snapshots" on device
// backends — a 27B snapshot is about 150 MB in fp32). Cached pages come out of the ordinary KV pool: a page held only
// by the cache counts as free for the scheduler (reclaimable_pages), and the engine evicts LRU entries the moment it
// needs the pages (evict_for_pages), before a request would be queued or preempted for the cache's sake.
//
// Eviction. LRU by last use (insert or hit); pinned entries are skipped. A hit touches only the entry it used — the
// deepest prefix of the request — so a conversation's shallower snapshots (interval stops, earlier turns) age out
// before its latest prefix does: the cache keeps deep, recently used prefixes. (Ties, entries of the same use, go
// to the shallower one first.) Evicting drops the entry's page references (pages shared with
// running sequences stay theirs) and frees its snapshot row.
//
// Preemption. A preempted sequence gives back its pages and slot as before; its own snapshots stay in the cache, so
// its recompute is a lookup that usually skips all but the tail. What a preemption frees, for the scheduler
// (SchedSeq::n_pages_freeable), counts the pages the sequence shares only with the cache: they become cache-only,
// hence evictable. Pins never cost a running sequence: when a step's plan would leave one without tokens or preempt
// someone while waiting sequences hold pinned hits, EngineImpl plans the step again without them.
//
// Speculation. Speculating sequences look up and insert like any other. The MTP head's KV is paged over the same
// page ids (the partial page is copied with it); only its pair at p - 1 (h_{p-1} with token p) may be another
// request's, which can cost a draft, never output (drafts are verified).
//
// n > 1. Siblings share the prompt: EngineImpl holds the later ones (SchedSeq::hold) until the first has reached
// its prompt-end snapshot, so the prompt is computed once.
//
// Not yet: host offload and bf16 snapshots.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cache/id_pool.h"
#include "voltserve/status.h"

namespace voltserve {

// The chain's seed (h_{-1}): a fixed constant, or one mixed from a non-empty cache salt, so requests with different
// salts land in different buckets at every depth (and entries compare their salt too).
uint64_t chain_seed(std::string_view salt);
// The chain hash of each full block of `tokens`: out[b] covers tokens [0, (b + 1) * block_size).
std::vector<uint64_t> block_hash_chain(std::span<const int32_t> tokens, int32_t block_size,
                                       uint64_t seed = chain_seed({}));
// The hash of a partial tail (tokens after the last full block), seeded by the chain hash before it.
uint64_t tail_hash(uint64_t chain, std::span<const int32_t> tail);

struct PrefixHit {
  int32_t entry = -1;     // PrefixCache entry id
  int32_t n_tokens = 0;   // p: the prefix length the hit covers
  int32_t snapshot = -1;  // the snapshot row holding the GDN state after p tokens
  std::span<const int32_t> pages;  // the pages covering [0, p), pages_for_tokens(p) of them; valid until the next
                                   // insert or eviction (copy them to keep them)
};

struct PrefixCacheStats {
  int32_t n_entries = 0;
  int32_t n_snapshots_used = 0;
  int32_t n_snapshots_total = 0;
  int32_t n_pages_held = 0;  // distinct pages the cache holds a reference on
  uint64_t n_evictions = 0;
};

class PrefixCache {
 public:
  // n_snapshots snapshot rows, pages of page_size tokens from `pages` (the engine's KV pool).
  PrefixCache(int32_t n_snapshots, int32_t page_size, PageAllocator& pages);
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // The longest entry of the same salt that is a prefix of `tokens` with 1 <= p <= limit; nullopt when there is
  // none. Counts as a use (LRU) when found.
  std::optional<PrefixHit> lookup(std::span<const int32_t> tokens, int32_t limit, std::string_view salt = {});

  // A snapshot row for a new entry over `tokens` ([0, p)): nullopt when an equal entry exists already (it is
  // touched instead) or when no row is free and nothing can be evicted. The caller copies the state into the row,
  // then calls commit_insert.
  std::optional<int32_t> begin_insert(std::span<const int32_t> tokens, std::string_view salt = {});
  // Records the entry: `pages` (pages_for_tokens(p) of them) each retained once by the cache.
  Status commit_insert(std::span<const int32_t> tokens, std::string_view salt, int32_t snapshot,
                       std::span<const int32_t> pages);
  // Gives back a row begin_insert handed out that will not be used (the state copy failed).
  void abort_insert(int32_t snapshot);

  // Pinned entries are not evicted (a waiting sequence's pending hit); pins nest.
  void pin(int32_t entry);
  void unpin(int32_t entry);

  // Pages only the cache holds (the pool would get them back by evicting), outside pinned entries.
  int32_t reclaimable_pages() const;
  // The references the cache holds on `page` (0: none).
  int32_t page_refs(int32_t page) const {
    const auto it = page_refs_.find(page);
    return it == page_refs_.end() ? 0 : it->second;
  }
  // Evicts LRU entries until the pool has n_free_pages free pages or nothing evictable is left; true on success.
  bool evict_for_pages(int32_t n_free_pages);
  // Evicts every unpinned entry (the pools return to full when idle, and tests).
  void clear();

  PrefixCacheStats stats() const;
  int32_t page_size() const { return page_size_; }

 private:
  struct Entry {
    bool live = false;
    std::vector<int32_t> tokens;
    std::string salt;  // Request::cache_salt ("" for none)
    std::vector<int32_t> pages;
    uint64_t bucket = 0;  // chain hash of the full blocks
    uint64_t tail = 0;    // tail_hash of the partial block
    int32_t snapshot = -1;
    uint64_t last_used = 0;
    int32_t pins = 0;
  };
  // The least recently used unpinned entry (shallower first on ties), -1 when none.
  int32_t lru_victim() const;
  void evict(int32_t entry);
  int32_t find_equal(std::span<const int32_t> tokens, std::string_view salt, uint64_t bucket, uint64_t tail) const;
  uint64_t bucket_of(std::span<const int32_t> tokens, std::string_view salt) const;

  int32_t page_size_;
  PageAllocator& pages_;
  IdPool snapshots_;
  std::vector<Entry> entries_;
  std::vector<int32_t> free_entries_;
  std::unordered_multimap<uint64_t, int32_t> by_bucket_;
  std::unordered_map<int32_t, int32_t> page_refs_;  // page -> references the cache holds on it
  uint64_t clock_ = 0;
  uint64_t n_evictions_ = 0;
};

}  // namespace voltserve
