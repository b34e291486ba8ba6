// Which steps a device backend replays as captured graphs, and when it captures them (CUDA-free bookkeeping; the
// CUDA backend holds the graphs). A step is replayed only when both its shape (token, sequence and output rows,
// output flags, the context bucket, whether it shifts by accepted runs) and the fingerprint of its op sequence (every op with the pointers, shapes and
// parameters it was called with) equal those of the captured step, so a graph never runs a different forward.
// Tested by tests/model/step_graphs_test.cpp; the CUDA side by tests/golden/cuda_model_test.cpp ([gpu]).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "backend/backend.h"

namespace voltserve {

// Steps with more token rows than this run eagerly (prefill chunks): their launches are long enough that the
// per-launch cost does not matter, and each shape would be a graph of its own.
inline constexpr int32_t kMaxGraphTokens = 64;

// The attention kernels' grid covers max_context positions; rounding it up to a power of two (at least 256) lets
// one graph serve every step of a sequence between two powers of two. Splits are a function of each sequence's own
// context (attention_math.h), so the rounding changes no result, only how many blocks find nothing to do.
int32_t context_bucket(int32_t max_context);

// What the ops of a step were called with, hashed a 64-bit word at a time (MurmurHash3's x64 block round: each
// round is a bijection of the word for a given state, so sequences that differ only in their last word never
// collide), two multiplies a word where byte-wise FNV-1a took eight: the probe of a 27B step hashes thousands.
class StepFingerprint {
 public:
  void reset() { h_ = kSeed; }
  void add(uint64_t v) {
    v *= kC1;
    v = rotl(v, 31);
    v *= kC2;
    h_ ^= v;
    h_ = rotl(h_, 27) * 5 + 0x52dce729u;
  }
  void add(const void* p) { add(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p))); }
  void add(const Tensor& t) {
    add(t.data);
    add(static_cast<uint64_t>(t.dtype));
    add(static_cast<uint64_t>(t.rows));
    add(static_cast<uint64_t>(t.cols));
    add(static_cast<uint64_t>(t.stride));
  }
  uint64_t value() const { return h_; }

 private:
  static constexpr uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
  static constexpr uint64_t kSeed = 1469598103934665603ull;
  static constexpr uint64_t kC1 = 0x87c37b91114253d5ull;
  static constexpr uint64_t kC2 = 0x4cf5ad432745937full;
  uint64_t h_ = kSeed;
};

// The shape of a step as a graph sees it, or nullopt when the step runs eagerly: more than kMaxGraphTokens rows,
// or rows asking for hidden states (tests only). Verify items and the MTP head's passes are graph-sized; a backend
// appends what it decides per row itself (the CUDA backend: which rows' logits come down for acceptance).
// `bucket` is context_bucket() of the step's longest context.
std::optional<std::vector<int64_t>> step_graph_shape(const StepBatch& batch, int32_t bucket);

// Per shape and fingerprint: how often the step was seen and, once captured, its graph (owned through a
// type-erased handle whose deleter frees the device graph). A step is captured the second time it is seen: the
// first eager run has grown every buffer the step needs, so capturing allocates nothing.
class StepGraphCache {
 public:
  enum class Next { kEager, kCapture, kReplay };

  explicit StepGraphCache(size_t max_graphs = 256) : max_graphs_(max_graphs) {}

  // After a probe of the step (its ops seen on the host, nothing launched): replay its graph, or run it again
  // eagerly (first sight) or captured (second sight).
  Next after_probe(const std::vector<int64_t>& shape, uint64_t fingerprint);
  // The graph of (shape, fingerprint), or null.
  void* graph(const std::vector<int64_t>& shape, uint64_t fingerprint) const;
  // Keeps a captured graph. Past max_graphs the cache is emptied first (every graph is destroyed).
  void store(const std::vector<int64_t>& shape, uint64_t fingerprint, std::shared_ptr<void> graph);
  // A shape whose capture failed runs eagerly from now on.
  void disable(const std::vector<int64_t>& shape) { disabled_.insert(shape); }
  bool disabled(const std::vector<int64_t>& shape) const { return disabled_.count(shape) != 0; }
  // Destroys every graph (the buffers they point at changed).
  void clear() { entries_.clear(); }

  size_t n_graphs() const;
  int64_t replays() const { return replays_; }
  int64_t captures() const { return captures_; }

 private:
  struct Entry {
    int32_t seen = 0;
    std::shared_ptr<void> graph;
  };
  using Key = std::pair<std::vector<int64_t>, uint64_t>;
  size_t max_graphs_;
  std::map<Key, Entry> entries_;
  std::set<std::vector<int64_t>> disabled_;
  int64_t replays_ = 0;
  int64_t captures_ = 0;
};

}  // namespace voltserve
