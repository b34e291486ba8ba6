// Qwen35Model: the Qwen3.5/3.6/3.8 hybrid text model's forward pass (MODEL.md §2), written once against Backend:
// embedding, pre-norm decoder layers (Gated DeltaNet or gated full attention, then SwiGLU), final norm, lm_head.
// Tested against transformers' logits and greedy continuations in tests/golden/qwen35_golden_test.cpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "model/model_config.h"
#include "model/qwen35_weights.h"
#include "voltserve/status.h"

namespace voltserve {

// Sequence state of every layer: paged KV for the full-attention layers, conv + recurrent slots for the GDN ones.
struct Qwen35Cache {
  int32_t page_size = 16;
  int32_t n_pages = 0;
  int32_t n_slots = 0;
  std::vector<KvCacheLayer> kv;    // one per layer (empty tensors for GDN layers)
  std::vector<GdnStateLayer> gdn;  // one per layer (empty tensors for attention layers)
};

class Qwen35Model {
 public:
  // Reads config.json (+ generation_config.json) and the checkpoint of `model_dir` into `backend`'s memory.
  static Result<std::unique_ptr<Qwen35Model>> load(const std::filesystem::path& model_dir, Backend& backend);

  const ModelConfig& config() const { return config_; }
  Backend& backend() const { return *backend_; }

  Qwen35Cache alloc_cache(int32_t page_size, int32_t n_pages, int32_t n_slots) const;
  // Zeroes the conv and recurrent state of `slot` in every GDN layer.
  void reset_slot(Qwen35Cache& cache, int32_t slot) const;

  // One batched step. `tokens` holds every segment's tokens back to back (segment s covers rows
  // [segs[s].row0, segs[s].row0 + segs[s].n_tokens)); inputs are assumed validated by the caller (the runner).
  // `logit_rows` picks rows of `tokens` whose logits are returned: logits is resized to
  // [logit_rows.size(), vocab_size].
  Status forward(std::span<const int32_t> tokens, std::span<const SeqSegment> segs, Qwen35Cache& cache,
                 std::span<const int32_t> logit_rows, std::vector<float>& logits) const;

 private:
  Qwen35Model() = default;
  void attention_mixer(const Qwen35Layer& layer, size_t index, const Tensor& x, std::span<const SeqSegment> segs,
                       Qwen35Cache& cache, Tensor& out) const;
  void gdn_mixer(const Qwen35Layer& layer, size_t index, const Tensor& x, std::span<const SeqSegment> segs,
                 Qwen35Cache& cache, Tensor& out) const;

  ModelConfig config_;
  Backend* backend_ = nullptr;
  Qwen35Weights weights_;
  AttentionParams attn_params_;
  GdnParams gdn_params_;
};

}  // namespace voltserve
