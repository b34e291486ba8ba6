// open_model_source (see model_source.h).
#include "model/model_source.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace voltserve {

Result<std::unique_ptr<ModelSource>> open_model_source(const ModelOptions& options) {
  auto src = std::make_unique<ModelSource>();
  std::error_code ec;
  if (!options.synthetic_config.empty()) {
    const std::filesystem::path file(options.synthetic_config);
    if (!std::filesystem::is_regular_file(file, ec)) return not_found("model config " + file.string() + " does not exist");
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    VS_ASSIGN_OR_RETURN(src->config, parse_model_config(text.str(), "", "", {}));
    src->weights = std::make_unique<SyntheticWeights>(src->config, options.synthetic_seed, file.string());
    src->name = file.stem().string();
    src->label = file.string() + " (synthetic weights)";
    src->synthetic = true;
    return src;
  }
  const std::filesystem::path dir(options.model_dir);
  if (!std::filesystem::is_directory(dir, ec)) {
    return not_found("model folder " + dir.string() + " does not exist or is not a directory");
  }
  VS_ASSIGN_OR_RETURN(src->config, load_model_config(dir));
  VS_ASSIGN_OR_RETURN(Checkpoint checkpoint, Checkpoint::open(dir));
  src->checkpoint = std::make_unique<Checkpoint>(std::move(checkpoint));
  src->weights = std::make_unique<CheckpointWeights>(*src->checkpoint, src->config);
  src->name = dir.lexically_normal().filename().string();
  if (src->name.empty()) src->name = dir.lexically_normal().parent_path().filename().string();
  src->label = dir.string();
  return src;
}

int32_t default_context(const ModelConfig& config) {
  int64_t context = std::min<int64_t>(8192, config.max_position_embeddings);
  if (context <= 0) context = 8192;
  return static_cast<int32_t>(context);
}

}  // namespace voltserve
