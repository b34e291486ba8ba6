// The step-graph bookkeeping of device backends (engine/backend/step_graphs.h): which steps are graph-sized, the
// context bucket, the op fingerprint, and when the cache says eager / capture / replay. The CUDA side (graphs
// giving the same tokens as eager launches) is tests/golden/cuda_model_test.cpp ([gpu]).
#include <catch2/catch_test_macros.hpp>

#include <cstdint>
#include <set>
#include <vector>

#include "backend/step_graphs.h"

namespace voltserve {
namespace {

StepBatch decode_batch(int n_seqs, int32_t n_past) {
  StepBatch b;
  for (int i = 0; i < n_seqs; ++i) {
    kernels::SeqDesc s;
    s.row0 = i;
    s.n_tokens = 1;
    s.n_past = n_past;
    s.slot = i;
    b.seqs.push_back(s);
    b.tokens.push_back(100 + i);
    OutputRow o;
    o.row = i;
    o.flags = kOutSample;
    b.outputs.push_back(o);
  }
  return b;
}

TEST_CASE("context buckets are powers of two from 256 and never below the context", "[unit]") {
  CHECK(context_bucket(1) == 256);
  CHECK(context_bucket(256) == 256);
  CHECK(context_bucket(257) == 512);
  CHECK(context_bucket(1024) == 1024);
  CHECK(context_bucket(1025) == 2048);
  CHECK(context_bucket(40000) == 65536);
  for (int32_t c = 1; c < 70000; c += 997) {
    const int32_t b = context_bucket(c);
    CHECK(b >= c);
    CHECK(b < 2 * std::max(c, 256));
  }
}

TEST_CASE("a step's graph shape: decode-sized steps only, and everything launches depend on", "[unit]") {
  const StepBatch b = decode_batch(3, 100);
  const auto shape = step_graph_shape(b, 256);
  REQUIRE(shape.has_value());
  // The same step later in the sequence (same bucket): the same shape; metadata the kernels read from device
  // buffers (tokens, positions, slots, sampling parameters) is not part of it.
  StepBatch later = decode_batch(3, 180);
  later.tokens = {7, 8, 9};
  later.outputs[1].sampling.temperature = 0.5f;
  CHECK(step_graph_shape(later, 256) == shape);
  CHECK(step_graph_shape(b, 512) != shape);                // another bucket
  CHECK(step_graph_shape(decode_batch(2, 100), 256) != shape);  // another batch size
  StepBatch logits = b;
  logits.outputs[0].flags |= kOutLogits;  // host copies of the logits row: another graph
  CHECK(step_graph_shape(logits, 256) != shape);
  StepBatch fewer = b;
  fewer.outputs.pop_back();
  CHECK(step_graph_shape(fewer, 256) != shape);
  // A prefill chunk runs eagerly.
  StepBatch prefill;
  kernels::SeqDesc s;
  s.n_tokens = kMaxGraphTokens + 1;
  prefill.seqs.push_back(s);
  prefill.tokens.assign(static_cast<size_t>(kMaxGraphTokens + 1), 1);
  CHECK_FALSE(step_graph_shape(prefill, 256).has_value());
  // Speculative work has graphs too: a verify item (checkpoints, drafts), an MTP pass (no state slot), acceptance
  // rows (their flags are part of the shape). Only hidden-state rows (tests) run eagerly.
  StepBatch verify = b;
  verify.seqs[0].ckpt = 0;
  verify.seqs[0].n_draft = 2;
  CHECK(step_graph_shape(verify, 256) == shape);  // the kernels read checkpoints and drafts from device metadata
  StepBatch mtp = b;
  mtp.seqs[2].slot = -1;
  CHECK(step_graph_shape(mtp, 256) == shape);
  StepBatch accept = b;
  accept.outputs[0].flags |= kOutAccept;
  REQUIRE(step_graph_shape(accept, 256).has_value());
  CHECK(step_graph_shape(accept, 256) != shape);
  StepBatch hidden = b;
  hidden.outputs[0].flags |= kOutHidden;
  CHECK_FALSE(step_graph_shape(hidden, 256).has_value());
  CHECK_FALSE(step_graph_shape(StepBatch{}, 256).has_value());
  // A step with token masks (structured output) has a graph of its own per number of masks (the hand-off copies
  // that many words); which rows they constrain does not change it (the sampling parameters carry that).
  StepBatch masked = b;
  masked.mask_words = 2;
  masked.outputs[1].sampling.mask_row = 0;
  masked.masks.assign(2, 0xffffffffu);
  REQUIRE(step_graph_shape(masked, 256).has_value());
  CHECK(step_graph_shape(masked, 256) != shape);
  StepBatch other_row = masked;
  other_row.outputs[1].sampling.mask_row = -1;
  other_row.outputs[0].sampling.mask_row = 0;
  CHECK(step_graph_shape(other_row, 256) == step_graph_shape(masked, 256));
  StepBatch two_masks = masked;
  two_masks.outputs[0].sampling.mask_row = 1;
  two_masks.masks.assign(4, 0xffffffffu);
  CHECK(step_graph_shape(two_masks, 256) != step_graph_shape(masked, 256));
}

TEST_CASE("the fingerprint tells op sequences apart by pointer, shape, order and value", "[unit]") {
  float buf[64] = {};
  const Tensor t{buf, DType::kF32, 2, 8, 8};
  auto fp = [](auto&&... parts) {
    StepFingerprint f;
    (f.add(parts), ...);
    return f.value();
  };
  CHECK(fp(t) == fp(t));
  CHECK(fp(t) != fp(t.first_rows(1)));
  CHECK(fp(t) != fp(t.columns(1, 4)));
  CHECK(fp(t) != fp(Tensor{buf + 8, DType::kF32, 2, 8, 8}));
  CHECK(fp(t) != fp(Tensor{buf, DType::kF16, 2, 8, 8}));
  CHECK(fp(uint64_t{1}, uint64_t{2}) != fp(uint64_t{2}, uint64_t{1}));
  StepFingerprint f;
  const uint64_t empty = f.value();
  f.add(uint64_t{0});
  CHECK(f.value() != empty);
  f.reset();
  CHECK(f.value() == empty);
  // One word changed anywhere in a step-long sequence (a pointer, a row count, a bit of a float), or a word added:
  // every variant hashes apart from the others.
  std::vector<uint64_t> base(2000);
  for (size_t i = 0; i < base.size(); ++i) base[i] = 0x7f0000001000ull + 64 * i;
  auto hash = [](const std::vector<uint64_t>& words) {
    StepFingerprint h;
    for (uint64_t w : words) h.add(w);
    return h.value();
  };
  std::set<uint64_t> seen{hash(base)};
  for (size_t at = 0; at < base.size(); at += 7) {
    for (uint64_t flip : {uint64_t{1}, uint64_t{1} << 31, uint64_t{1} << 63, uint64_t{64}}) {
      std::vector<uint64_t> v = base;
      v[at] ^= flip;
      CHECK(seen.insert(hash(v)).second);
    }
  }
  base.push_back(0);
  CHECK(seen.insert(hash(base)).second);
}

TEST_CASE("the graph cache: eager at first sight, captured at the second, replayed after", "[unit]") {
  StepGraphCache cache(2);
  const std::vector<int64_t> s1{1, 1, 1, 256, 1, 0, 1}, s2{2, 2, 1, 256, 2, 0, 1, 1, 1};
  int destroyed = 0;
  auto graph = [&destroyed] { return std::shared_ptr<void>(new int(0), [&destroyed](void* p) {
                                delete static_cast<int*>(p);
                                ++destroyed;
                              }); };
  CHECK(cache.after_probe(s1, 42) == StepGraphCache::Next::kEager);
  CHECK(cache.after_probe(s1, 42) == StepGraphCache::Next::kCapture);
  CHECK(cache.graph(s1, 42) == nullptr);
  cache.store(s1, 42, graph());
  CHECK(cache.graph(s1, 42) != nullptr);
  CHECK(cache.after_probe(s1, 42) == StepGraphCache::Next::kReplay);
  CHECK(cache.after_probe(s1, 42) == StepGraphCache::Next::kReplay);
  CHECK(cache.replays() == 2);
  CHECK(cache.captures() == 1);
  // Another op sequence of the same shape (e.g. another model's pass) is a step of its own.
  CHECK(cache.after_probe(s1, 43) == StepGraphCache::Next::kEager);
  CHECK(cache.graph(s1, 43) == nullptr);
  // A failed capture turns the shape off.
  CHECK_FALSE(cache.disabled(s2));
  cache.disable(s2);
  CHECK(cache.disabled(s2));
  CHECK_FALSE(cache.disabled(s1));
  // Bounded: storing past max_graphs empties the cache (destroying the graphs) first.
  cache.store(s2, 1, graph());
  CHECK(cache.n_graphs() == 2);
  cache.store(s2, 2, graph());
  CHECK(destroyed == 2);
  CHECK(cache.n_graphs() == 1);
  CHECK(cache.graph(s1, 42) == nullptr);
  cache.clear();
  CHECK(destroyed == 3);
  CHECK(cache.n_graphs() == 0);
}

}  // namespace
}  // namespace voltserve
