// Step-graph bookkeeping (step_graphs.h). Tested by tests/model/step_graphs_test.cpp.
#include "backend/step_graphs.h"

#include <algorithm>

namespace voltserve {

int32_t context_bucket(int32_t max_context) {
  int64_t b = 256;
  while (b < max_context) b *= 2;
  return static_cast<int32_t>(std::min<int64_t>(b, int64_t{1} << 30));
}

std::optional<std::vector<int64_t>> step_graph_shape(const StepBatch& batch, int32_t bucket) {
  if (batch.n_tokens() == 0 || batch.n_tokens() > kMaxGraphTokens) return std::nullopt;
  int32_t max_seq_tokens = 0;
  // Verify items and MTP passes are graph-sized like any step: what they differ in (checkpoint sets, draft
  // counts, slot -1) the kernels read from the step's device metadata.
  for (const kernels::SeqDesc& s : batch.seqs) max_seq_tokens = std::max(max_seq_tokens, s.n_tokens);
  for (const OutputRow& o : batch.outputs) {
    if (o.flags & kOutHidden) return std::nullopt;  // a test-only download of hidden rows
  }
  // Token masks are part of the shape by their number: the graph's hand-off copies that many words (which rows
  // they belong to is in the sampling parameters, uploaded every step).
  std::vector<int64_t> shape{batch.n_tokens(), static_cast<int64_t>(batch.seqs.size()), max_seq_tokens, bucket,
                             static_cast<int64_t>(batch.outputs.size()), static_cast<int64_t>(batch.masks.size())};
  for (const OutputRow& o : batch.outputs) {
    shape.push_back(o.row);
    shape.push_back(o.flags);
  }
  shape.push_back(has_shifts(batch) ? 1 : 0);  // the shift kernel is in the graph
  return shape;
}

StepGraphCache::Next StepGraphCache::after_probe(const std::vector<int64_t>& shape, uint64_t fingerprint) {
  if (entries_.size() >= 4 * max_graphs_) entries_.clear();  // shapes seen once and never again
  Entry& e = entries_[{shape, fingerprint}];
  if (e.graph != nullptr) {
    ++replays_;
    return Next::kReplay;
  }
  ++e.seen;
  return e.seen >= 2 ? Next::kCapture : Next::kEager;
}

void* StepGraphCache::graph(const std::vector<int64_t>& shape, uint64_t fingerprint) const {
  const auto it = entries_.find({shape, fingerprint});
  return it == entries_.end() ? nullptr : it->second.graph.get();
}

void StepGraphCache::store(const std::vector<int64_t>& shape, uint64_t fingerprint, std::shared_ptr<void> graph) {
  if (n_graphs() >= max_graphs_) entries_.clear();
  Entry& e = entries_[{shape, fingerprint}];
  e.graph = std::move(graph);
  ++captures_;
}

size_t StepGraphCache::n_graphs() const {
  return static_cast<size_t>(
      std::count_if(entries_.begin(), entries_.end(), [](const auto& kv) { return kv.second.graph != nullptr; }));
}

}  // namespace voltserve
