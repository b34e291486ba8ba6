// The KV cache's element type from --kv-cache-dtype (ModelOptions::kv_cache_dtype): auto = fp8 when the checkpoint
// asks for it (hf_quant_config kv_cache_quant_algo "FP8"), else the backend's activation dtype (CPU fp32, CUDA fp16);
// fp16, bf16 (CPU backend only: the CUDA kernels read fp16 or e4m3) and fp8 (e4m3, per-layer scales). Tested in
// tests/model/kv_cache_dtype_test.cpp.
#pragma once

#include <string>
#include <string_view>

#include "common/dtype.h"
#include "model/model_config.h"
#include "voltserve/status.h"

namespace voltserve {

// InvalidArgument naming --kv-cache-dtype for anything but "", auto, fp16, bf16, fp8.
Result<DType> resolve_kv_cache_dtype(std::string_view option, const ModelConfig& config, DType activation);
// "fp16", "bf16", "fp8", "fp32" (what `voltserve plan` and the start-up log print).
std::string kv_cache_dtype_name(DType dtype);

}  // namespace voltserve
