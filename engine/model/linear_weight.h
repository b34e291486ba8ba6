// LinearWeight: one Linear layer's weight in its checkpoint format (dense BF16/F16/F32, NVFP4 from ModelOpt or
// compressed-tensors, FP8 E4M3 per-tensor or per-channel; MODEL.md §5), decided per module from the quant config
// PLUS the tensors present. host_ref() hands it to a backend and to the one reference (kernels/linear/linear_ref.h)
// as raw arrays. Tested in tests/model/linear_weight_test.cpp (hand-computed codes and scales, round trips, errors).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/weight_format.h"
#include "linear/linear_ref.h"
#include "model/checkpoint.h"
#include "model/model_config.h"
#include "voltserve/status.h"

namespace voltserve {

enum class WeightSource { kPlain, kModelOpt, kCompressedTensors };

struct LinearWeight {
  std::string module;                 // e.g. "model.layers.0.mlp.gate_proj"
  WeightFormat format = WeightFormat::kDense;
  WeightSource source = WeightSource::kPlain;
  int64_t n = 0;                      // output features (rows)
  int64_t k = 0;                      // input features
  // dense: [n, k] BF16/F16/F32
  // nvfp4: [n, k/2] U8, two E2M1 codes per byte, even k in the low nibble (bits 0-3), odd k in the high nibble
  // fp8:   [n, k] F8E4M3
  TensorView weight;
  // nvfp4: [n, ceil(k/16)] F8E4M3, one scale per 16 consecutive k of a row, row-major, not swizzled
  // fp8:   F32 (or BF16/F16) scalar / [1] (per-tensor) or [n] / [n, 1] (per-channel)
  // dense: empty (data == nullptr)
  TensorView scale;
  // nvfp4: the per-tensor multiplier: ModelOpt weight_scale_2, or 1 / weight_global_scale for compressed-tensors
  // (which stores the inverse). 1 for the other formats.
  float global_scale = 1.0f;
  bool per_channel = false;           // fp8: scale has n entries
  std::vector<float> fp8_scales;      // fp8: `scale` as fp32, 1 (per-tensor) or n (per-channel) values
  // Activation scale as a multiplier (ModelOpt input_scale, or 1 / compressed-tensors input_global_scale) when the
  // checkpoint quantizes activations (W4A4 / W8A8). linear_ref() does not quantize activations (weight-only
  // semantics: the reference is x times the dequantized weight), so this is informational for backends.
  std::optional<float> input_scale;
  int64_t group_size() const { return 16; }
  int64_t n_groups() const { return (k + 15) / 16; }
  // The weight as raw arrays in checkpoint order; points into the checkpoint's mapping and into fp8_scales, so it
  // is valid while both live.
  kernels::HostWeightRef host_ref() const;
};

// Loads Linear `module` (its tensors are `<module>.weight`, `.weight_scale`, ...) with the expected shape [n, k].
// Decision (never by name alone):
//   <module>.weight_packed (U8) + weight_scale (F8E4M3) + weight_global_scale (F32)  -> NVFP4, compressed-tensors
//   <module>.weight (U8) + weight_scale (F8E4M3) + weight_scale_2 (F32)               -> NVFP4, ModelOpt
//   <module>.weight (F8E4M3) + weight_scale (F32/BF16/F16, 1 or n values)               -> FP8
//   <module>.weight (BF16/F16/F32), no scales                                           -> dense
// and the result must agree with config.quantization.expected(module). The one tolerated disagreement is a config
// that expects a quantized layer where the checkpoint holds a plain float weight and no scales (ModelOpt exports
// leave e.g. mtp.fc BF16 but unlisted in exclude_modules; vLLM forces those unquantized too).
// Every other combination is an InvalidArgument naming the module, what the config says and which tensors exist.
Result<LinearWeight> load_linear(const Checkpoint& checkpoint, const ModelConfig& config, const std::string& module,
                                 int64_t n, int64_t k);
// Same with an explicit QuantConfig (tests, tools).
Result<LinearWeight> load_linear(const Checkpoint& checkpoint, const QuantConfig& quant, const std::string& module,
                                 int64_t n, int64_t k);

// The whole weight as [n, k] fp32, exactly (kernels::dequantize_row_ref over host_ref()).
std::vector<float> dequantize(const LinearWeight& weight);

}  // namespace voltserve
