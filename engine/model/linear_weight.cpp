// Linear weights in their checkpoint formats: the per-module format decision, exact dequantization and the
// reference matmul (MODEL.md §5.2, §5.3).
#include "model/linear_weight.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/fp_formats.h"

namespace voltserve {
namespace {

bool is_float_dtype(DType d) { return d == DType::kBF16 || d == DType::kF16 || d == DType::kF32; }
bool expects_nvfp4(LayerQuant q) { return q == LayerQuant::kNvfp4 || q == LayerQuant::kW4A16Nvfp4; }
bool expects_fp8(LayerQuant q) { return q == LayerQuant::kFp8 || q == LayerQuant::kFp8PerChannel; }

// A scalar-like F32 tensor (0-d or any shape) -> its values.
Result<float> scalar_value(const TensorView& t, const std::string& what, bool take_max) {
  if (t.dtype != DType::kF32 && t.dtype != DType::kBF16 && t.dtype != DType::kF16) {
    return invalid_argument(t.file + ": tensor '" + t.name + "' (" + what + ") has dtype " + dtype_name(t.dtype) +
                            ", expected F32");
  }
  if (t.numel() < 1 || (!take_max && t.numel() != 1)) {
    return invalid_argument(t.file + ": tensor '" + t.name + "' (" + what + ") has shape " +
                            shape_to_string(t.shape) + ", expected a scalar");
  }
  VS_ASSIGN_OR_RETURN(std::vector<float> v, to_f32(t));
  float m = v[0];
  for (float x : v) m = std::max(m, x);
  if (!std::isfinite(m) || m <= 0.0f) {
    return invalid_argument(t.file + ": tensor '" + t.name + "' (" + what + ") is " + std::to_string(m) +
                            ", expected a positive finite scale");
  }
  return m;
}

std::string present_list(const Checkpoint& ckpt, const std::string& module) {
  std::string s;
  for (const char* suffix : {".weight", ".weight_packed", ".weight_scale", ".weight_scale_2", ".weight_global_scale",
                             ".input_scale", ".input_global_scale"}) {
    const std::string name = module + suffix;
    if (auto t = ckpt.tensor(name); t.is_ok()) {
      if (!s.empty()) s += ", ";
      s += std::string(suffix + 1) + " " + dtype_name(t->dtype) + shape_to_string(t->shape);
    }
  }
  return s.empty() ? "none" : s;
}

Status mismatch(const Checkpoint& ckpt, const std::string& module, LayerQuant expected, const std::string& found,
                const QuantConfig& quant) {
  return invalid_argument("linear '" + module + "': the checkpoint holds " + found + " but " +
                          (quant.source.empty() ? std::string("the config") : quant.source) + " says " +
                          layer_quant_name(expected) + " (tensors present: " + present_list(ckpt, module) + ")");
}

Result<LinearWeight> load_nvfp4(const Checkpoint& ckpt, const QuantConfig& quant, const std::string& module,
                                int64_t n, int64_t k, bool compressed_tensors) {
  const LayerQuant expected = quant.expected(module);
  const char* found = compressed_tensors ? "compressed-tensors NVFP4 (weight_packed)" : "ModelOpt NVFP4";
  if (!expects_nvfp4(expected)) return mismatch(ckpt, module, expected, found, quant);
  if (compressed_tensors && quant.method != QuantMethod::kCompressedTensors) {
    return mismatch(ckpt, module, expected, std::string(found) + " under a " + quant_method_name(quant.method) +
                    " config", quant);
  }
  if (k % 2 != 0) return invalid_argument("linear '" + module + "': NVFP4 needs an even k, got " + std::to_string(k));
  LinearWeight w;
  w.module = module;
  w.format = WeightFormat::kNvfp4;
  w.source = compressed_tensors ? WeightSource::kCompressedTensors : WeightSource::kModelOpt;
  w.n = n;
  w.k = k;
  const std::string weight_name = module + (compressed_tensors ? ".weight_packed" : ".weight");
  VS_ASSIGN_OR_RETURN(w.weight, ckpt.tensor(weight_name, DType::kU8, {n, k / 2}));
  if (!ckpt.contains(module + ".weight_scale")) {
    return invalid_argument("linear '" + module + "': NVFP4 codes without " + module + ".weight_scale");
  }
  VS_ASSIGN_OR_RETURN(w.scale, ckpt.tensor(module + ".weight_scale", DType::kF8E4M3, {n, (k + 15) / 16}));
  if (compressed_tensors) {
    const std::string gname = module + ".weight_global_scale";
    if (!ckpt.contains(gname)) return invalid_argument("linear '" + module + "': weight_packed without " + gname);
    VS_ASSIGN_OR_RETURN(TensorView g, ckpt.tensor(gname));
    VS_ASSIGN_OR_RETURN(float inv, scalar_value(g, "weight_global_scale", /*take_max=*/false));
    w.global_scale = 1.0f / inv;  // compressed-tensors stores the divisor
    if (ckpt.contains(module + ".input_global_scale")) {
      VS_ASSIGN_OR_RETURN(TensorView is, ckpt.tensor(module + ".input_global_scale"));
      VS_ASSIGN_OR_RETURN(float inv_in, scalar_value(is, "input_global_scale", false));
      w.input_scale = 1.0f / inv_in;
    }
    if (ckpt.contains(module + ".weight_scale_2")) {
      return invalid_argument("linear '" + module + "': has both weight_global_scale (compressed-tensors) and "
                              "weight_scale_2 (ModelOpt)");
    }
  } else {
    const std::string sname = module + ".weight_scale_2";
    if (!ckpt.contains(sname)) {
      return invalid_argument("linear '" + module + "': U8 NVFP4 weight and weight_scale but no " + sname);
    }
    VS_ASSIGN_OR_RETURN(TensorView s2, ckpt.tensor(sname));
    VS_ASSIGN_OR_RETURN(w.global_scale, scalar_value(s2, "weight_scale_2", /*take_max=*/true));
    if (ckpt.contains(module + ".input_scale")) {
      VS_ASSIGN_OR_RETURN(TensorView is, ckpt.tensor(module + ".input_scale"));
      VS_ASSIGN_OR_RETURN(float in_scale, scalar_value(is, "input_scale", true));
      w.input_scale = in_scale;
    }
  }
  return w;
}

Result<LinearWeight> load_fp8(const Checkpoint& ckpt, const QuantConfig& quant, const std::string& module,
                              int64_t n, int64_t k, const TensorView& weight) {
  const LayerQuant expected = quant.expected(module);
  if (!expects_fp8(expected)) return mismatch(ckpt, module, expected, "FP8 E4M3", quant);
  LinearWeight w;
  w.module = module;
  w.format = WeightFormat::kFp8;
  w.source = quant.method == QuantMethod::kCompressedTensors ? WeightSource::kCompressedTensors : WeightSource::kModelOpt;
  w.n = n;
  w.k = k;
  VS_ASSIGN_OR_RETURN(w.weight, ckpt.tensor(weight.name, DType::kF8E4M3, {n, k}));
  const std::string sname = module + ".weight_scale";
  if (!ckpt.contains(sname)) return invalid_argument("linear '" + module + "': FP8 weight without " + sname);
  VS_ASSIGN_OR_RETURN(w.scale, ckpt.tensor(sname));
  if (!is_float_dtype(w.scale.dtype)) {
    return invalid_argument(w.scale.file + ": tensor '" + sname + "' has dtype " + dtype_name(w.scale.dtype) +
                            ", expected F32 (or BF16/F16)");
  }
  if (ckpt.contains(module + ".weight_scale_2")) {
    return invalid_argument("linear '" + module + "': FP8 weight with an NVFP4 weight_scale_2");
  }
  const int64_t count = w.scale.numel();
  const bool per_tensor_shape = w.scale.shape.empty() || (w.scale.shape.size() == 1 && w.scale.shape[0] == 1);
  const bool per_channel_shape = (w.scale.shape.size() == 1 && w.scale.shape[0] == n) ||
                                 (w.scale.shape.size() == 2 && w.scale.shape[0] == n && w.scale.shape[1] == 1);
  if (expected == LayerQuant::kFp8 && !per_tensor_shape) {
    return invalid_argument(w.scale.file + ": tensor '" + sname + "' has shape " + shape_to_string(w.scale.shape) +
                            " but " + quant.source + " says per-tensor FP8 (expected a scalar)");
  }
  if (expected == LayerQuant::kFp8PerChannel && !per_channel_shape && !(n == 1 && per_tensor_shape)) {
    return invalid_argument(w.scale.file + ": tensor '" + sname + "' has shape " + shape_to_string(w.scale.shape) +
                            " but " + quant.source + " says per-channel FP8 (expected [" + std::to_string(n) + "])");
  }
  w.per_channel = count == n && expected == LayerQuant::kFp8PerChannel;
  VS_ASSIGN_OR_RETURN(std::vector<float> scales, to_f32(w.scale));
  if (!w.per_channel) scales.resize(1);  // a [1] or scalar tensor; n == 1 per-tensor shapes keep their one value
  for (float s : scales) {
    if (!std::isfinite(s) || s <= 0.0f) {
      return invalid_argument(w.scale.file + ": tensor '" + sname + "' holds " + std::to_string(s) +
                              ", expected positive finite scales");
    }
  }
  w.fp8_scales = std::move(scales);
  if (ckpt.contains(module + ".input_scale")) {
    VS_ASSIGN_OR_RETURN(TensorView is, ckpt.tensor(module + ".input_scale"));
    VS_ASSIGN_OR_RETURN(float v, scalar_value(is, "input_scale", true));
    w.input_scale = v;
  }
  return w;
}

}  // namespace

Result<LinearWeight> load_linear(const Checkpoint& ckpt, const ModelConfig& config, const std::string& module,
                                 int64_t n, int64_t k) {
  return load_linear(ckpt, config.quantization, module, n, k);
}

Result<LinearWeight> load_linear(const Checkpoint& ckpt, const QuantConfig& quant, const std::string& module,
                                 int64_t n, int64_t k) {
  if (n <= 0 || k <= 0) {
    return invalid_argument("linear '" + module + "': bad expected shape [" + std::to_string(n) + ", " +
                            std::to_string(k) + "]");
  }
  const bool has_weight = ckpt.contains(module + ".weight");
  const bool has_packed = ckpt.contains(module + ".weight_packed");
  if (has_weight && has_packed) {
    return invalid_argument("linear '" + module + "': has both weight and weight_packed");
  }
  if (has_packed) return load_nvfp4(ckpt, quant, module, n, k, /*compressed_tensors=*/true);
  if (!has_weight) {
    return not_found("linear '" + module + "': tensor '" + module + ".weight' not found in the checkpoint at " +
                     ckpt.dir().string());
  }
  VS_ASSIGN_OR_RETURN(TensorView weight, ckpt.tensor(module + ".weight"));
  const bool has_scale = ckpt.contains(module + ".weight_scale");
  const bool has_scale_2 = ckpt.contains(module + ".weight_scale_2");
  const bool has_global = ckpt.contains(module + ".weight_global_scale");
  if (weight.dtype == DType::kU8) {
    if (has_global) {
      return invalid_argument("linear '" + module + "': U8 'weight' with compressed-tensors weight_global_scale "
                              "(compressed-tensors names its codes weight_packed)");
    }
    return load_nvfp4(ckpt, quant, module, n, k, /*compressed_tensors=*/false);
  }
  if (weight.dtype == DType::kF8E4M3) return load_fp8(ckpt, quant, module, n, k, weight);
  if (!is_float_dtype(weight.dtype)) {
    return invalid_argument(weight.file + ": tensor '" + weight.name + "' has dtype " + dtype_name(weight.dtype) +
                            ", expected BF16/F16/F32, U8 (NVFP4) or F8_E4M3 (FP8)");
  }
  if (has_scale || has_scale_2 || has_global) {
    return invalid_argument("linear '" + module + "': " + dtype_name(weight.dtype) +
                            " weight with quantization scales (tensors present: " + present_list(ckpt, module) + ")");
  }
  // A plain float weight without scales is unambiguous even where the config expects a quantized layer: ModelOpt
  // leaves modules such as mtp.fc in BF16 without listing them in exclude_modules (vLLM forces them unquantized).
  LinearWeight w;
  w.module = module;
  w.format = WeightFormat::kDense;
  w.source = WeightSource::kPlain;
  w.n = n;
  w.k = k;
  VS_ASSIGN_OR_RETURN(w.weight, ckpt.tensor(weight.name, weight.dtype, {n, k}));
  return w;
}

kernels::HostWeightRef LinearWeight::host_ref() const {
  kernels::HostWeightRef r;
  r.format = format;
  r.n = n;
  r.k = k;
  r.codes = reinterpret_cast<const uint8_t*>(weight.data);
  switch (format) {
    case WeightFormat::kDense:
      r.dense_dtype = weight.dtype;
      break;
    case WeightFormat::kNvfp4:
      r.scales = reinterpret_cast<const uint8_t*>(scale.data);
      r.global_scale = global_scale;
      break;
    case WeightFormat::kFp8:
      if (per_channel) {
        r.channel_scales = fp8_scales.data();
      } else {
        r.tensor_scale = fp8_scales.empty() ? 1.0f : fp8_scales[0];
      }
      break;
  }
  return r;
}

std::vector<float> dequantize(const LinearWeight& w) {
  std::vector<float> out(static_cast<size_t>(w.n * w.k));
  const kernels::HostWeightRef ref = w.host_ref();
  for (int64_t r = 0; r < w.n; ++r) kernels::dequantize_row_ref(ref, r, out.data() + r * w.k);
  return out;
}

}  // namespace voltserve
