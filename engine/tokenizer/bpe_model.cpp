// BPE merge loop and vocab/merge tables (see bpe_model.h).
#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <mutex>
#include <queue>

#include "tokenizer/byte_level.h"
#include "voltserve/utf8.h"

namespace voltserve::tokenizer {

Result<std::unique_ptr<BpeModel>> BpeModel::build(BpeSpec spec) {
  std::unique_ptr<BpeModel> m(new BpeModel());
  int32_t max_id = -1;
  for (const auto& [tok, id] : spec.vocab) {
    if (id < 0) return invalid_argument("model.vocab: token '" + tok + "' has negative id " + std::to_string(id));
    max_id = std::max(max_id, id);
  }
  if (max_id >= (1 << 30)) return invalid_argument("model.vocab: id " + std::to_string(max_id) + " is too large");
  m->id_to_token_.assign(static_cast<size_t>(max_id + 1), std::string());
  m->id_present_.assign(static_cast<size_t>(max_id + 1), 0);
  m->vocab_.reserve(spec.vocab.size());
  for (auto& [tok, id] : spec.vocab) {
    if (m->id_present_[id]) {
      return invalid_argument("model.vocab: id " + std::to_string(id) + " is used by both '" + m->id_to_token_[id] +
                              "' and '" + tok + "'");
    }
    if (!m->vocab_.emplace(tok, id).second) return invalid_argument("model.vocab: duplicate token '" + tok + "'");
    m->id_present_[id] = 1;
    m->id_to_token_[id] = std::move(tok);
  }

  for (int b = 0; b < 256; ++b) {
    std::string s;
    append_utf8(byte_level_char(static_cast<uint8_t>(b)), s);
    auto it = m->vocab_.find(s);
    m->byte_id_[b] = it == m->vocab_.end() ? -1 : it->second;
  }
  if (spec.unk_token) {
    auto it = m->vocab_.find(*spec.unk_token);
    if (it == m->vocab_.end()) return invalid_argument("model.unk_token '" + *spec.unk_token + "' is not in the vocab");
    m->unk_id_ = it->second;
  }
  m->fuse_unk_ = spec.fuse_unk;
  m->ignore_merges_ = spec.ignore_merges;
  if (m->ignore_merges_) {
    for (const auto& [tok, id] : m->vocab_) {
      if (auto bytes = byte_level_decode(tok)) m->vocab_bytes_.emplace(std::move(*bytes), id);
    }
  }

  size_t capacity = 16;
  while (capacity < spec.merges.size() * 2 + 16) capacity <<= 1;
  m->merge_table_.assign(capacity, MergeSlot{kEmptyKey, 0, 0});
  m->merge_mask_ = capacity - 1;
  m->merge_shift_ = 64 - std::countr_zero(capacity);
  m->n_merges_ = spec.merges.size();
  std::string joined;
  for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
    const auto& [a, b] = spec.merges[rank];
    auto ia = m->vocab_.find(a);
    auto ib = m->vocab_.find(b);
    joined.assign(a).append(b);
    auto ic = m->vocab_.find(joined);
    if (ia == m->vocab_.end() || ib == m->vocab_.end() || ic == m->vocab_.end()) {
      const std::string where = "model.merges[" + std::to_string(rank) + "] ('" + a + "' '" + b + "'): ";
      if (ia == m->vocab_.end()) return invalid_argument(where + "'" + a + "' is not in the vocab");
      if (ib == m->vocab_.end()) return invalid_argument(where + "'" + b + "' is not in the vocab");
      return invalid_argument(where + "the merged token '" + joined + "' is not in the vocab");
    }
    // A repeated pair takes its last rank, as HF's HashMap collect does.
    m->insert_merge(ia->second, ib->second, static_cast<int32_t>(rank), ic->second);
  }
  return m;
}

void BpeModel::insert_merge(int32_t left, int32_t right, int32_t rank, int32_t new_id) {
  const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  size_t i = (key * 0x9E3779B97F4A7C15ULL) >> merge_shift_;
  while (merge_table_[i].key != kEmptyKey && merge_table_[i].key != key) i = (i + 1) & merge_mask_;
  merge_table_[i] = MergeSlot{key, rank, new_id};
}

std::optional<int32_t> BpeModel::token_id(std::string_view token) const {
  auto it = vocab_.find(std::string(token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || !id_present_[id]) return nullptr;
  return &id_to_token_[id];
}

void BpeModel::initial_symbols(std::string_view bytes, std::vector<int32_t>& symbols) const {
  symbols.clear();
  bool last_unk = false;
  for (char c : bytes) {
    const int32_t id = byte_id_[static_cast<uint8_t>(c)];
    if (id >= 0) {
      symbols.push_back(id);
      last_unk = false;
    } else if (unk_id_ >= 0) {
      // A byte without a vocab entry becomes unk (fused with a preceding unk if asked); without unk it is
      // dropped, as HF does.
      if (!(fuse_unk_ && last_unk)) symbols.push_back(unk_id_);
      last_unk = true;
    }
  }
}

// O(n^2) in the word length but allocation-free and cache-friendly: the right choice for ordinary words.
// ranks[i] is the rank of the pair (symbols[i], symbols[i+1]), INT32_MAX when they do not merge.
void BpeModel::merge_small(std::vector<int32_t>& symbols) const {
  constexpr int32_t kNoMerge = INT32_MAX;
  size_t n = symbols.size();
  int32_t ranks[kSmallWord];
  int32_t new_ids[kSmallWord];
  auto score = [&](size_t i) {
    const MergeSlot* s = find_merge(symbols[i], symbols[i + 1]);
    ranks[i] = s ? s->rank : kNoMerge;
    new_ids[i] = s ? s->new_id : -1;
  };
  for (size_t i = 0; i + 1 < n; ++i) score(i);
  while (n > 1) {
    size_t best = 0;
    int32_t best_rank = kNoMerge;
    for (size_t i = 0; i + 1 < n; ++i) {
      if (ranks[i] < best_rank) {
        best_rank = ranks[i];
        best = i;
      }
    }
    if (best_rank == kNoMerge) break;
    symbols[best] = new_ids[best];
    // Remove symbol best+1 and the pair entry best+1.
    for (size_t i = best + 1; i + 1 < n; ++i) symbols[i] = symbols[i + 1];
    for (size_t i = best + 1; i + 2 < n; ++i) {
      ranks[i] = ranks[i + 1];
      new_ids[i] = new_ids[i + 1];
    }
    --n;
    if (best > 0) score(best - 1);
    if (best + 1 < n) score(best);
  }
  symbols.resize(n);
}

// Long words: a heap of candidate merges over a linked list of symbols, O(n log n). Entries go stale when a
// neighbour merges; they are checked on pop, as in HF's word.rs.
void BpeModel::merge_large(std::vector<int32_t>& symbols) const {
  const size_t n = symbols.size();
  struct Entry {
    int32_t rank;
    uint32_t pos;
    int32_t new_id;
    bool operator>(const Entry& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  thread_local std::vector<int32_t> prev, next;
  thread_local std::vector<uint8_t> alive;
  thread_local std::vector<Entry> heap_storage;
  prev.resize(n);
  next.resize(n);
  alive.assign(n, 1);
  heap_storage.clear();
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap(std::greater<>(), std::move(heap_storage));
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
  }
  auto push = [&](int32_t pos) {
    if (pos < 0 || next[pos] < 0) return;
    if (const MergeSlot* s = find_merge(symbols[pos], symbols[next[pos]])) {
      heap.push(Entry{s->rank, static_cast<uint32_t>(pos), s->new_id});
    }
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int32_t>(i));
  while (!heap.empty()) {
    const Entry top = heap.top();
    heap.pop();
    const auto pos = static_cast<int32_t>(top.pos);
    if (!alive[pos] || next[pos] < 0) continue;
    const int32_t right = next[pos];
    const MergeSlot* s = find_merge(symbols[pos], symbols[right]);
    if (s == nullptr || s->new_id != top.new_id || s->rank != top.rank) continue;  // stale
    symbols[pos] = top.new_id;
    alive[right] = 0;
    next[pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = pos;
    push(prev[pos]);
    push(pos);
  }
  size_t w = 0;
  for (int32_t i = 0; i >= 0; i = next[i]) symbols[w++] = symbols[i];
  symbols.resize(w);
}

void BpeModel::encode_word(std::string_view bytes, std::vector<int32_t>& out) const {
  if (bytes.empty()) return;
  if (bytes.size() == 1) {
    const int32_t id = byte_id_[static_cast<uint8_t>(bytes[0])];
    if (id >= 0) {
      out.push_back(id);
    } else if (unk_id_ >= 0) {
      out.push_back(unk_id_);
    }
    return;
  }
  if (ignore_merges_) {
    auto it = vocab_bytes_.find(std::string(bytes));
    if (it != vocab_bytes_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const bool cacheable = bytes.size() <= kCacheMaxPieceBytes;
  if (cacheable) {
    std::shared_lock lock(cache_mutex_);
    auto it = cache_.find(bytes);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  thread_local std::vector<int32_t> symbols;
  initial_symbols(bytes, symbols);
  if (symbols.size() <= kSmallWord) {
    merge_small(symbols);
  } else {
    merge_large(symbols);
  }
  out.insert(out.end(), symbols.begin(), symbols.end());
  if (cacheable) {
    std::unique_lock lock(cache_mutex_, std::try_to_lock);
    if (lock.owns_lock()) {
      if (cache_.size() >= kCacheCapacity) cache_.clear();
      cache_.emplace(std::string(bytes), symbols);
    }
  }
}

}  // namespace voltserve::tokenizer
