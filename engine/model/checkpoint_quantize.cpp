// quantize_checkpoint (voltserve/quantize.h): plan every output tensor from the source headers, then stream — read
// one tensor from the memory-mapped source, quantize it, append it to its shard, and drop its source pages — so the
// resident set stays near the largest single tensor, not the model. Tested in
// tests/model/checkpoint_quantize_test.cpp and tests/model/quantize_ref_test.py.
#include "voltserve/quantize.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/fp_formats.h"
#include "model/checkpoint.h"
#include "model/quantize_plan.h"
#include "model/safetensors_dtype.h"
#include "model/checkpoint_writer.h"
#include "model/weight_quantize.h"

namespace voltserve {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

constexpr float kE4m3Max = 448.0f;

struct SourcePlan {
  TensorView view;
  TensorAction action = TensorAction::kKeep;
  std::vector<PlannedTensor> outputs;
};

// The source's pages are clean file pages of a private read-only mapping: dropping them frees the memory, and a
// later read (there is none) would fault them back in from the file.
void release_pages(const TensorView& t) {
  if (t.data == nullptr || t.n_bytes == 0) return;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(t.data) & ~(page - 1);
  const auto end = reinterpret_cast<uintptr_t>(t.data) + t.n_bytes;
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

bool is_float_source(DType d) { return d == DType::kBF16 || d == DType::kF16 || d == DType::kF32; }

Status check_not_quantized(const fs::path& in, const ordered_json& config, const Checkpoint& ckpt) {
  if (fs::exists(in / "hf_quant_config.json")) {
    return invalid_argument((in / "hf_quant_config.json").string() +
                            " exists: the input is already quantized (voltserve quantize reads BF16/F16/F32 models)");
  }
  for (const ordered_json* c : {&config, config.contains("text_config") ? &config["text_config"] : nullptr}) {
    if (c != nullptr && c->is_object() && c->contains("quantization_config") &&
        !(*c)["quantization_config"].is_null()) {
      return invalid_argument((in / "config.json").string() +
                              ": has a quantization_config: the input is already quantized");
    }
  }
  for (const auto& name : ckpt.names()) {
    for (std::string_view suffix : {".weight_scale", ".weight_packed", ".weight_scale_inv", ".weight_scale_2"}) {
      if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
        return invalid_argument("tensor " + name + ": the input is already quantized");
      }
    }
  }
  return Status::ok();
}

// Rows [0, n) over `threads` threads (0: up to 8); body(r0, r1, t) handles rows [r0, r1) as thread t.
template <class Fn>
void parallel_rows(int64_t n, int threads, Fn body) {
  if (threads <= 0) {
    threads = static_cast<int>(std::min<unsigned>(8, std::max(1u, std::thread::hardware_concurrency())));
  }
  const int64_t per = (n + threads - 1) / threads;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads && t * per < n; ++t) {
    pool.emplace_back([=, &body] { body(t * per, std::min(n, (t + 1) * per), t); });
  }
  for (auto& th : pool) th.join();
}

// ModelOpt FP8 per-tensor: scale = amax / 448, code = e4m3(w / scale) (MODEL.md §5.2 FP8 layers).
void quantize_fp8_tensor(const kernels::HostWeightRef& w, int threads, std::vector<uint8_t>& codes, float& scale) {
  std::vector<float> amax(16, 0.0f);
  parallel_rows(w.n, threads, [&](int64_t r0, int64_t r1, int t) {
    std::vector<float> row(static_cast<size_t>(w.k));
    for (int64_t r = r0; r < r1; ++r) {
      kernels::dequantize_row_ref(w, r, row.data());
      for (float v : row) amax[static_cast<size_t>(t)] = std::max(amax[static_cast<size_t>(t)], std::fabs(v));
    }
  });
  const float m = *std::max_element(amax.begin(), amax.end());
  scale = m > 0.0f ? m / kE4m3Max : 1.0f;
  codes.resize(static_cast<size_t>(w.n * w.k));
  parallel_rows(w.n, threads, [&](int64_t r0, int64_t r1, int) {
    std::vector<float> row(static_cast<size_t>(w.k));
    for (int64_t r = r0; r < r1; ++r) {
      kernels::dequantize_row_ref(w, r, row.data());
      uint8_t* out = codes.data() + r * w.k;
      for (int64_t j = 0; j < w.k; ++j) out[j] = float_to_e4m3(row[static_cast<size_t>(j)] / scale);
    }
  });
}

std::span<const uint8_t> bytes_of(const float& v) { return {reinterpret_cast<const uint8_t*>(&v), sizeof(float)}; }

}  // namespace

Result<QuantizeFormat> parse_quantize_format(const std::string& name) {
  if (name == "nvfp4") return QuantizeFormat::kNvfp4;
  if (name == "mixed") return QuantizeFormat::kMixed;
  if (name == "fp8") return QuantizeFormat::kFp8;
  return invalid_argument("--format \"" + name + "\" is not one of nvfp4, mixed, fp8");
}

const char* quantize_format_name(QuantizeFormat format) {
  switch (format) {
    case QuantizeFormat::kNvfp4: return "nvfp4";
    case QuantizeFormat::kMixed: return "mixed";
    case QuantizeFormat::kFp8: return "fp8";
  }
  return "?";
}

Result<QuantizeSummary> quantize_checkpoint(const QuantizeOptions& options,
                                            const std::function<void(const QuantizeProgress&)>& progress) {
  const fs::path in(options.in_dir), out(options.out_dir);
  std::error_code ec;
  if (options.in_dir.empty() || !fs::is_directory(in, ec)) {
    return not_found("--in " + options.in_dir + ": no such folder");
  }
  if (options.out_dir.empty()) return invalid_argument("--out is required");
  if (!fs::exists(in / "config.json", ec)) {
    return not_found((in / "config.json").string() + ": missing (not a HF model folder)");
  }
  VS_ASSIGN_OR_RETURN(std::string config_text, read_text_file(in / "config.json"));
  ordered_json config = ordered_json::parse(config_text, nullptr, false);
  if (config.is_discarded() || !config.is_object()) {
    return invalid_argument((in / "config.json").string() + ": not a valid JSON object");
  }
  VS_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::open(in));
  VS_RETURN_IF_ERROR(check_not_quantized(in, config, ckpt));
  VS_RETURN_IF_ERROR(prepare_checkpoint_folder(out, options.force, &in));

  QuantizeSummary summary;
  // Plan: one group of output tensors per source tensor, in the source's (sorted) order.
  std::vector<SourcePlan> sources;
  std::vector<ModuleQuant> modules;
  for (const auto& name : ckpt.names()) {
    SourcePlan sp;
    VS_ASSIGN_OR_RETURN(sp.view, ckpt.tensor(name));
    const auto& v = sp.view;
    sp.action = plan_tensor(name, v.shape.size(), options);
    if (sp.action != TensorAction::kKeep && !is_float_source(v.dtype)) {
      return invalid_argument("tensor " + name + " (" + v.file + "): dtype " + dtype_name(v.dtype) +
                              " cannot be quantized (BF16, F16 or F32 only)");
    }
    if (sp.action == TensorAction::kNvfp4 && v.shape[1] % 16 != 0) {
      summary.warnings.push_back("tensor " + name + ": K = " + std::to_string(v.shape[1]) +
                                 " is not a multiple of 16, kept unquantized");
      sp.action = TensorAction::kKeep;
    }
    const std::string module = quantizable_linear_module(name, v.shape.size());
    const std::string base = name.size() > 7 && name.ends_with(".weight") ? name.substr(0, name.size() - 7) : "";
    if (sp.action == TensorAction::kNvfp4) {
      const int64_t n = v.shape[0], k = v.shape[1];
      sp.outputs.push_back({name, "U8", {n, k / 2}, static_cast<uint64_t>(n * (k / 2))});
      sp.outputs.push_back({base + ".weight_scale", "F8_E4M3", {n, k / 16}, static_cast<uint64_t>(n * (k / 16))});
      sp.outputs.push_back({base + ".weight_scale_2", "F32", {}, 4});
      modules.push_back({module, sp.action});
    } else if (sp.action == TensorAction::kFp8) {
      const int64_t n = v.shape[0], k = v.shape[1];
      sp.outputs.push_back({name, "F8_E4M3", {n, k}, static_cast<uint64_t>(n * k)});
      sp.outputs.push_back({base + ".weight_scale", "F32", {}, 4});
      modules.push_back({module, sp.action});
    } else {
      sp.outputs.push_back({name, dtype_name(v.dtype), v.shape, v.n_bytes});
      // Linear-like kept weights (2-D or conv) are what exclude_modules lists; embeddings are never quantized.
      if (!base.empty() && v.shape.size() >= 2 && base.find("embed_tokens") == std::string::npos) {
        modules.push_back({base, TensorAction::kKeep});
      }
    }
    summary.bytes_in += v.n_bytes;
    sources.push_back(std::move(sp));
  }
  std::vector<std::vector<PlannedTensor>> groups;
  for (const auto& sp : sources) groups.push_back(sp.outputs);
  const std::vector<ShardPlan> shards = plan_shards(groups, std::max<uint64_t>(1, options.max_shard_bytes));

  // Stream: shards in order, each source tensor's outputs in plan order (plan_shards keeps a group in one shard).
  size_t next = 0;
  QuantizeProgress p;
  p.total = static_cast<int64_t>(sources.size());
  p.bytes_total = summary.bytes_in;
  for (const auto& shard : shards) {
    VS_ASSIGN_OR_RETURN(SafetensorsFileWriter writer, SafetensorsFileWriter::create(out / shard.file, shard));
    size_t in_shard = 0;
    while (in_shard < shard.tensors.size()) {
      SourcePlan& sp = sources[next++];
      const TensorView& v = sp.view;
      kernels::HostWeightRef ref;
      ref.format = WeightFormat::kDense;
      ref.dense_dtype = v.dtype;
      ref.codes = reinterpret_cast<const uint8_t*>(v.data);
      if (v.shape.size() == 2) {
        ref.n = v.shape[0];
        ref.k = v.shape[1];
      }
      if (sp.action == TensorAction::kNvfp4) {
        VS_ASSIGN_OR_RETURN(auto q, quantize_weight(ref, WeightFormat::kNvfp4, options.threads));
        VS_RETURN_IF_ERROR(writer.write(q->codes));
        VS_RETURN_IF_ERROR(writer.write(q->scales));
        VS_RETURN_IF_ERROR(writer.write(bytes_of(q->ref.global_scale)));
        summary.quantized_nvfp4 += 1;
        p.action = "NVFP4";
      } else if (sp.action == TensorAction::kFp8) {
        std::vector<uint8_t> codes;
        float scale = 1.0f;
        quantize_fp8_tensor(ref, std::min(options.threads, 16), codes, scale);
        VS_RETURN_IF_ERROR(writer.write(codes));
        VS_RETURN_IF_ERROR(writer.write(bytes_of(scale)));
        summary.quantized_fp8 += 1;
        p.action = "FP8";
      } else {
        // Copied in pieces so a large kept tensor (an embedding) is never held twice.
        constexpr size_t kChunk = 64u << 20;
        const auto* data = reinterpret_cast<const uint8_t*>(v.data);
        for (size_t off = 0; off < v.n_bytes; off += kChunk) {
          VS_RETURN_IF_ERROR(writer.write({data + off, std::min(kChunk, v.n_bytes - off)}));
        }
        summary.kept += 1;
        p.action = std::string("kept ") + dtype_name(v.dtype);
      }
      for (const auto& t : sp.outputs) summary.bytes_out += t.n_bytes;
      in_shard += sp.outputs.size();
      release_pages(v);
      p.index = static_cast<int64_t>(next);
      p.name = v.name;
      p.bytes_done += v.n_bytes;
      if (progress) progress(p);
    }
    VS_RETURN_IF_ERROR(writer.finish());
  }
  summary.tensors_in = static_cast<int64_t>(sources.size());
  summary.shards = static_cast<int64_t>(shards.size());
  if (shards.size() > 1) {
    VS_RETURN_IF_ERROR(write_text_file(out / "model.safetensors.index.json", shard_index_json(shards)));
  }

  const ordered_json hf = hf_quant_config_json(options.format, modules);
  VS_RETURN_IF_ERROR(write_text_file(out / "hf_quant_config.json", hf.dump(2) + "\n"));
  config["quantization_config"] = quantization_config_json(hf);
  VS_RETURN_IF_ERROR(write_text_file(out / "config.json", config.dump(2) + "\n"));

  // Everything else at the top level travels along: tokenizer, chat template, generation config, model card, ...
  for (const auto& e : fs::directory_iterator(in, ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || name == "config.json" || name.ends_with(".safetensors") ||
        name == "model.safetensors.index.json") {
      continue;
    }
    fs::copy_file(e.path(), out / name, fs::copy_options::overwrite_existing, ec);
    if (ec) return internal_error("copying " + e.path().string() + " to " + out.string() + ": " + ec.message());
    summary.copied_files.push_back(name);
  }
  std::sort(summary.copied_files.begin(), summary.copied_files.end());
  return summary;
}

}  // namespace voltserve
