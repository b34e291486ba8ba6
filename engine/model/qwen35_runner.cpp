// Qwen35Runner: step validation and the SeqStep -> SeqSegment mapping; the math is in Qwen35Model.
#include "model/qwen35_runner.h"

#include <algorithm>
#include <set>

namespace voltserve {

Result<std::unique_ptr<Qwen35Runner>> Qwen35Runner::load(const std::filesystem::path& model_dir,
                                                         const RunnerOptions& options) {
  if (options.backend != "cpu" && options.backend != "auto") {
    return unimplemented("backend '" + options.backend + "' is not available (this build has: cpu)");
  }
  if (options.page_size <= 0 || options.n_slots <= 0 || options.max_context < 0 || options.n_pages < 0) {
    return invalid_argument("runner options: page_size and n_slots must be > 0, max_context and n_pages >= 0");
  }
  std::unique_ptr<Qwen35Runner> r(new Qwen35Runner());
  CpuBackendOptions cpu;
  cpu.n_threads = options.n_threads;
  cpu.gdn_mode = options.gdn_mode;
  r->backend_ = make_cpu_backend(cpu);
  VS_ASSIGN_OR_RETURN(r->model_, Qwen35Model::load(model_dir, *r->backend_));
  const ModelConfig& c = r->model_->config();

  int64_t context = options.max_context > 0 ? options.max_context : std::min<int64_t>(8192, c.max_position_embeddings);
  if (context <= 0) context = 8192;
  const int32_t pages_per_seq = static_cast<int32_t>((context + options.page_size - 1) / options.page_size);
  r->geometry_.page_size = options.page_size;
  r->geometry_.n_slots = options.n_slots;
  r->geometry_.n_pages = options.n_pages > 0 ? options.n_pages : pages_per_seq * options.n_slots;
  r->cache_ = r->model_->alloc_cache(r->geometry_.page_size, r->geometry_.n_pages, r->geometry_.n_slots);

  r->info_.name = std::filesystem::path(model_dir).lexically_normal().filename().string();
  if (r->info_.name.empty()) r->info_.name = std::filesystem::path(model_dir).parent_path().filename().string();
  r->info_.vocab_size = static_cast<int32_t>(c.vocab_size);
  r->info_.n_vocab_real = static_cast<int32_t>(c.vocab_size);
  if (options.n_vocab_real > 0 && options.n_vocab_real < r->info_.n_vocab_real) {
    r->info_.n_vocab_real = options.n_vocab_real;
  }
  r->info_.context_length = static_cast<int32_t>(context);
  r->info_.eos_token_ids = c.eos_token_ids;
  return r;
}

Status Qwen35Runner::reset_slot(int32_t slot) {
  if (slot < 0 || slot >= geometry_.n_slots) {
    return out_of_range("slot " + std::to_string(slot) + " is outside [0, " + std::to_string(geometry_.n_slots) +
                        ")");
  }
  model_->reset_slot(cache_, slot);
  return Status::ok();
}

Status Qwen35Runner::build_segments(std::span<const SeqStep> steps, std::vector<int32_t>& tokens,
                                    std::vector<SeqSegment>& segs) const {
  std::set<int32_t> slots;
  for (size_t i = 0; i < steps.size(); ++i) {
    const SeqStep& s = steps[i];
    const std::string where = "step " + std::to_string(i) + ": ";
    if (s.tokens.empty()) return invalid_argument(where + "has no tokens");
    if (s.slot < 0 || s.slot >= geometry_.n_slots) {
      return out_of_range(where + "slot " + std::to_string(s.slot) + " is outside [0, " +
                          std::to_string(geometry_.n_slots) + ")");
    }
    if (!slots.insert(s.slot).second) {
      return invalid_argument(where + "slot " + std::to_string(s.slot) + " appears in two steps");
    }
    if (s.n_past < 0) return invalid_argument(where + "n_past is negative");
    const int64_t end = static_cast<int64_t>(s.n_past) + static_cast<int64_t>(s.tokens.size());
    if (end > info_.context_length) {
      return out_of_range(where + "positions up to " + std::to_string(end) + " exceed the context length " +
                          std::to_string(info_.context_length));
    }
    const int64_t pages_needed = (end + geometry_.page_size - 1) / geometry_.page_size;
    if (static_cast<int64_t>(s.page_table.size()) < pages_needed) {
      return invalid_argument(where + "page_table has " + std::to_string(s.page_table.size()) +
                              " pages, positions [0, " + std::to_string(end) + ") need " +
                              std::to_string(pages_needed));
    }
    for (int64_t p = 0; p < pages_needed; ++p) {
      const int32_t page = s.page_table[static_cast<size_t>(p)];
      if (page < 0 || page >= geometry_.n_pages) {
        return out_of_range(where + "page " + std::to_string(page) + " is outside [0, " +
                            std::to_string(geometry_.n_pages) + ")");
      }
    }
    for (int32_t t : s.tokens) {
      if (t < 0 || t >= info_.vocab_size) {
        return invalid_argument(where + "token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                                std::to_string(info_.vocab_size) + ")");
      }
    }
    SeqSegment seg;
    seg.row0 = static_cast<int32_t>(tokens.size());
    seg.n_tokens = static_cast<int32_t>(s.tokens.size());
    seg.n_past = s.n_past;
    seg.slot = s.slot;
    seg.page_table = s.page_table;
    segs.push_back(seg);
    tokens.insert(tokens.end(), s.tokens.begin(), s.tokens.end());
  }
  return Status::ok();
}

Status Qwen35Runner::forward(std::span<const SeqStep> steps, std::vector<float>& logits) {
  std::vector<int32_t> rows;
  int32_t row = 0;
  for (const SeqStep& s : steps) {
    row += static_cast<int32_t>(s.tokens.size());
    if (s.need_logits) rows.push_back(row - 1);
  }
  return forward_rows(steps, rows, logits);
}

Status Qwen35Runner::forward_rows(std::span<const SeqStep> steps, std::span<const int32_t> rows,
                                  std::vector<float>& logits) {
  std::vector<int32_t> tokens;
  std::vector<SeqSegment> segs;
  VS_RETURN_IF_ERROR(build_segments(steps, tokens, segs));
  for (int32_t r : rows) {
    if (r < 0 || r >= static_cast<int32_t>(tokens.size())) {
      return out_of_range("logit row " + std::to_string(r) + " is outside the step's " +
                          std::to_string(tokens.size()) + " tokens");
    }
  }
  if (tokens.empty()) {
    logits.clear();
    return Status::ok();
  }
  return model_->forward(tokens, segs, cache_, rows, logits);
}

Result<std::unique_ptr<ModelRunner>> load_model_runner(const std::filesystem::path& model_dir,
                                                       const RunnerOptions& options) {
  VS_ASSIGN_OR_RETURN(auto runner, Qwen35Runner::load(model_dir, options));
  return std::unique_ptr<ModelRunner>(std::move(runner));
}

}  // namespace voltserve
