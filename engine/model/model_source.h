// ModelSource: a model's config and where its weights come from (a Hugging Face folder's checkpoint, or synthetic
// weights of a config's real shapes), opened once so that the memory plan (engine/plan) and the load read the same
// source. Tested through tests/plan/memory_plan_test.cpp and tests/golden.
#pragma once

#include <memory>
#include <string>

#include "model/checkpoint.h"
#include "model/model_config.h"
#include "model/weight_provider.h"
#include "voltserve/model_info.h"
#include "voltserve/status.h"

namespace voltserve {

struct ModelSource {
  ModelConfig config;
  std::unique_ptr<Checkpoint> checkpoint;   // null for synthetic weights
  std::unique_ptr<WeightProvider> weights;  // reads *checkpoint (or makes synthetic weights) for `config`
  std::string name;                         // the folder's name, or the config file's stem
  std::string label;                        // the folder, or "<config> (synthetic weights)"
  bool synthetic = false;
};

// ModelOptions::model_dir, or ::synthetic_config with ::synthetic_seed. Errors name the folder or file.
Result<std::unique_ptr<ModelSource>> open_model_source(const ModelOptions& options);

// Positions per sequence when ModelOptions::max_context is 0: the model's, at most 8192.
int32_t default_context(const ModelConfig& config);

}  // namespace voltserve
