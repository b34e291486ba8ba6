// `voltserve quantize --in DIR --out DIR [--format nvfp4|mixed|fp8] [--keep PATTERNS] [--quantize-lm-head]`:
// a BF16/F16/F32 Hugging Face folder to a ModelOpt-layout checkpoint (voltserve/quantize.h), progress on stderr.
// Tested by tests/model/quantize_ref_test.py (codes and scales against tools/quantize_ref.py, errors).
#include <CLI/CLI.hpp>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "voltserve/quantize.h"

namespace voltserve::cli {
namespace {

struct QuantizeArgs {
  std::string in, out, format = "nvfp4", max_shard = "5GB";
  std::vector<std::string> keep;
  bool quantize_lm_head = false, force = false, quiet = false;
  int threads = 0;
};

// "5GB", "500MB", "4GiB", "123" (bytes): HF's max_shard_size spellings (GB = 10^9, GiB = 2^30).
uint64_t parse_size(const std::string& text) {
  size_t end = 0;
  double v = 0;
  try {
    v = std::stod(text, &end);
  } catch (const std::exception&) {
    fail("quantize", "--max-shard-size \"" + text + "\" is not a size (e.g. 5GB, 500MB, 4GiB)", 2);
  }
  std::string unit = text.substr(end);
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double mul = 0;
  if (unit.empty() || unit == "B") mul = 1;
  else if (unit == "KB") mul = 1e3;
  else if (unit == "MB") mul = 1e6;
  else if (unit == "GB") mul = 1e9;
  else if (unit == "KIB") mul = 1024.0;
  else if (unit == "MIB") mul = 1024.0 * 1024;
  else if (unit == "GIB") mul = 1024.0 * 1024 * 1024;
  if (mul == 0 || !(v > 0)) fail("quantize", "--max-shard-size \"" + text + "\" is not a positive size (e.g. 5GB)", 2);
  return static_cast<uint64_t>(v * mul);
}

std::string gb(uint64_t bytes) {
  char buf[32];
  if (bytes >= 1'000'000'000) {
    std::snprintf(buf, sizeof(buf), "%.2f GB", static_cast<double>(bytes) / 1e9);
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f MB", static_cast<double>(bytes) / 1e6);
  }
  return buf;
}

void run_quantize(const QuantizeArgs& a) {
  QuantizeOptions opt;
  opt.in_dir = a.in;
  opt.out_dir = a.out;
  auto format = parse_quantize_format(a.format);
  if (!format.is_ok()) fail("quantize", format.status().message(), 2);
  opt.format = *format;
  for (const auto& list : a.keep) {  // repeatable, and each may be a comma-separated list
    size_t pos = 0;
    while (pos <= list.size()) {
      size_t end = list.find(',', pos);
      if (end == std::string::npos) end = list.size();
      std::string item = list.substr(pos, end - pos);
      if (!item.empty()) opt.keep.push_back(item);
      pos = end + 1;
    }
  }
  opt.quantize_lm_head = a.quantize_lm_head;
  opt.force = a.force;
  opt.max_shard_bytes = parse_size(a.max_shard);
  opt.threads = a.threads;
  const auto t0 = std::chrono::steady_clock::now();
  auto progress = [&](const QuantizeProgress& p) {
    if (a.quiet) return;
    const double pct =
        p.bytes_total ? 100.0 * static_cast<double>(p.bytes_done) / static_cast<double>(p.bytes_total) : 100.0;
    std::fprintf(stderr, "[%lld/%lld %5.1f%%] %s: %s\n", static_cast<long long>(p.index),
                 static_cast<long long>(p.total), pct, p.name.c_str(), p.action.c_str());
  };
  auto result = quantize_checkpoint(opt, progress);
  if (!result.is_ok()) fail("quantize", result.status().to_string(), 1);
  const auto& s = *result;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const auto& w : s.warnings) std::cerr << "voltserve quantize: warning: " << w << "\n";
  std::fprintf(stderr,
               "voltserve quantize: %s -> %s (%s): %lld tensors, %lld NVFP4, %lld FP8, %lld kept; %s -> %s in %lld "
               "shard(s), %.1f s; copied %zu file(s)\n",
               a.in.c_str(), a.out.c_str(), a.format.c_str(), static_cast<long long>(s.tensors_in),
               static_cast<long long>(s.quantized_nvfp4), static_cast<long long>(s.quantized_fp8),
               static_cast<long long>(s.kept), gb(s.bytes_in).c_str(), gb(s.bytes_out).c_str(),
               static_cast<long long>(s.shards), secs, s.copied_files.size());
}

}  // namespace

void register_quantize_command(CLI::App& app) {
  auto args = std::make_shared<QuantizeArgs>();
  auto* cmd = app.add_subcommand(
      "quantize", "Quantize a BF16/F16/F32 Hugging Face model folder to a ModelOpt checkpoint (NVFP4, mixed or FP8)");
  cmd->add_option("--in", args->in, "Source model folder (config.json + safetensors, sharded or not)")->required();
  cmd->add_option("--out", args->out, "Output folder (created; must be empty unless --force)")->required();
  cmd->add_option("--format", args->format,
                  "nvfp4: every decoder Linear NVFP4 (W4A16); mixed: FP8 attention + GDN projections, NVFP4 MLP and "
                  "lm_head; fp8: every decoder Linear FP8 per-tensor")
      ->capture_default_str();
  cmd->add_option("--keep", args->keep,
                  "Glob patterns (comma-separated or repeated) of tensor or module names to leave unquantized, "
                  "e.g. 'lm_head,*.layers.0.*'");
  cmd->add_flag("--quantize-lm-head", args->quantize_lm_head, "nvfp4/fp8: quantize lm_head too (mixed always does)");
  cmd->add_option("--max-shard-size", args->max_shard, "Largest shard (5GB, 500MB, 4GiB, bytes)")
      ->capture_default_str();
  cmd->add_option("--threads", args->threads, "Quantizer threads (0: up to 8)");
  cmd->add_flag("--force", args->force, "Write into a non-empty --out (its checkpoint files are replaced)");
  cmd->add_flag("--quiet", args->quiet, "No per-tensor progress lines");
  cmd->footer(
      "Stays as in the source: embeddings, norms, conv1d, in_proj_a/b, A_log, dt_bias, mtp.*, vision tensors, "
      "and lm_head (nvfp4/fp8 unless --quantize-lm-head). Weights only: no activation scales are written "
      "(no calibration). Tokenizer, chat template and generation config are copied.");
  cmd->callback([args] { run_quantize(*args); });
}

}  // namespace voltserve::cli
