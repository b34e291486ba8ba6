// The pieces of synth_checkpoint (voltserve/synth.h): the config as written (cut to --layers, quantization config of
// the format), the tensor plan (names, dtypes and shapes in the loader's order, each with the synthetic generator of
// SyntheticWeights so the files hold the weights `bench --config` builds), and the byte generator of one tensor.
// Tested in tests/model/synth_checkpoint_test.cpp.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/checkpoint_writer.h"
#include "model/model_config.h"
#include "voltserve/status.h"
#include "voltserve/synth.h"

namespace voltserve {

struct SynthConfig {
  nlohmann::ordered_json config;     // config.json as written
  nlohmann::ordered_json hf_quant;   // hf_quant_config.json; null for bf16
  ModelConfig model;                 // what the loader will read from the two
};

// `config_text` (a config.json; `what` names it in errors) cut to `layers` decoder layers (0: all) with the
// quantization config of `format`: the config's own when it already names that format (the real exports' files,
// e.g. an NVFP4 lm_head), otherwise the one `voltserve quantize` writes for that format.
Result<SynthConfig> synth_config(const std::string& config_text, const std::string& what, SynthFormat format,
                                 int64_t layers);

enum class SynthFill { kNvfp4Codes, kNvfp4Scales, kFp8Codes, kDense, kScalar, kValues };

struct SynthTensor {
  PlannedTensor planned;        // name, dtype (U8, F8_E4M3, BF16, F32), shape, bytes
  SynthFill fill = SynthFill::kDense;
  uint64_t seed = 0;            // kNvfp4Codes / kNvfp4Scales / kFp8Codes / kDense
  float scalar = 0.0f;          // kScalar
  std::vector<float> values;    // kValues (small parameters, drawn at plan time)
};

// Every tensor of the text model (and mtp.* when mtp_num_hidden_layers > 0) in the loader's order, one group per
// Linear (weight, scales) or parameter. Seeds follow SyntheticWeights exactly: `seed` for the text model, seed + 1
// for the MTP head (Qwen35Runner::load_drafter).
std::vector<std::vector<SynthTensor>> plan_synth_tensors(const ModelConfig& config, uint64_t seed);

// Bytes [offset, offset + out.size()) of `t` (offset and size multiples of the dtype's element size).
void fill_synth_bytes(const SynthTensor& t, uint64_t offset, std::span<uint8_t> out);

// Round to nearest even (NaN stays NaN).
uint16_t float_to_bf16(float v);

}  // namespace voltserve
