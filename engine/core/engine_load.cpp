// Engine::load: the public way in — a model folder and serving limits to a running engine (the Qwen3.5 runner on
// the backend ModelOptions::backend names).
#include "core/engine_impl.h"
#include "model/qwen35_runner.h"

namespace voltserve {

Result<std::unique_ptr<Engine>> Engine::load(const ModelOptions& model, const EngineConfig& config) {
  RunnerOptions options;
  options.model = model;
  if (options.model.n_slots <= 0) options.model.n_slots = config.max_running;
  options.max_step_tokens = config.max_tokens_per_step;
  options.max_draft_tokens = config.max_speculative_k;
  VS_ASSIGN_OR_RETURN(std::unique_ptr<ModelRunner> runner, load_model_runner(options));
  return create(std::move(runner), config);
}

}  // namespace voltserve
