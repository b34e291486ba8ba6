// libFuzzer target: config.json + quantization config parsing on arbitrary text (must return a Status, never
// throw or crash). The input is split at the first NUL: config.json text, then hf_quant_config.json text.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "model/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t split = all.find('\0');
  const std::string_view config = all.substr(0, split);
  const std::string_view hf_quant = split == std::string_view::npos ? std::string_view() : all.substr(split + 1);
  auto result = voltserve::parse_model_config(config, "", hf_quant, {});
  if (result.is_ok()) {
    // Exercise the per-module matcher on whatever patterns were accepted.
    (void)result->quantization.expected("model.layers.0.mlp.gate_proj");
    (void)result->quantization.expected("lm_head");
  }
  return 0;
}
