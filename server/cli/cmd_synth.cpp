// `voltserve synth --config FILE --format nvfp4|mixed|bf16 --out DIR [--seed N] [--layers N] [--tokenizer DIR]`:
// a checkpoint of a config's real shapes with seeded random weights (voltserve/synth.h), progress on stderr.
// Tested by tests/model/synth_checkpoint_test.cpp (the library; the command by hand, see README "Synthetic checkpoints").
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "voltserve/synth.h"

namespace voltserve::cli {
namespace {

struct SynthArgs {
  std::string config, format, out, tokenizer;
  uint64_t seed = 1;
  int64_t layers = 0;
  int threads = 0;
  bool force = false, quiet = false;
};

void run_synth(const SynthArgs& a) {
  SynthOptions opt;
  auto format = parse_synth_format(a.format);
  if (!format.is_ok()) fail("synth", format.status().message(), 2);
  opt.format = *format;
  opt.config_file = a.config;
  opt.out_dir = a.out;
  opt.seed = a.seed;
  opt.layers = a.layers;
  opt.tokenizer_dir = a.tokenizer;
  opt.force = a.force;
  opt.threads = a.threads;
  const auto t0 = std::chrono::steady_clock::now();
  int last_pct = -1;
  auto progress = [&](const SynthProgress& p) {
    if (a.quiet) return;
    const int pct = p.bytes_total ? static_cast<int>(100 * p.bytes_done / p.bytes_total) : 100;
    if (pct == last_pct && p.index != p.total) return;  // one line per percent: a 27B has ~1,500 tensors
    last_pct = pct;
    std::fprintf(stderr, "[%lld/%lld %3d%%] %s\n", static_cast<long long>(p.index), static_cast<long long>(p.total),
                 pct, p.name.c_str());
  };
  auto result = synth_checkpoint(opt, progress);
  if (!result.is_ok()) fail("synth", result.status().to_string(), 1);
  const auto& s = *result;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr,
               "voltserve synth: %s -> %s (%s, seed %llu): %lld layers%s, %lld tensors, %.2f GB in %lld shard(s), "
               "%.1f s (%.0f MB/s)%s\n",
               a.config.c_str(), a.out.c_str(), a.format.c_str(), static_cast<unsigned long long>(a.seed),
               static_cast<long long>(s.layers), s.mtp ? " + MTP head" : "", static_cast<long long>(s.tensors),
               static_cast<double>(s.bytes) / 1e9, static_cast<long long>(s.shards), secs,
               secs > 0 ? static_cast<double>(s.bytes) / 1e6 / secs : 0.0,
               a.tokenizer.empty() ? "; no tokenizer (pass --tokenizer DIR to copy one)" : "");
}

}  // namespace

void register_synth_command(CLI::App& app) {
  auto args = std::make_shared<SynthArgs>();
  auto* cmd = app.add_subcommand(
      "synth", "Write a checkpoint of a config's real shapes with seeded random weights (NVFP4, mixed or BF16)");
  cmd->add_option("--config", args->config, "A config.json, e.g. config/models/qwen3.5-27b-nvfp4.json")->required();
  cmd->add_option("--format", args->format,
                  "nvfp4: decoder Linears NVFP4 (lm_head NVFP4 only where the config says so); mixed: FP8 attention "
                  "+ GDN projections, NVFP4 MLP and lm_head; bf16: no quantization")
      ->required();
  cmd->add_option("--out", args->out, "Output folder (created; must be empty unless --force)")->required();
  cmd->add_option("--seed", args->seed, "Weight seed (on the CPU backend, bench --config with the same --seed builds the same weights)")
      ->capture_default_str();
  cmd->add_option("--layers", args->layers, "Keep only the first N decoder layers (0: all)")->capture_default_str();
  cmd->add_option("--tokenizer", args->tokenizer,
                  "Folder whose tokenizer files (tokenizer.json, tokenizer_config.json, chat_template.jinja, ...) "
                  "are copied; without it the checkpoint has no tokenizer");
  cmd->add_option("--threads", args->threads, "Generator threads (0: up to 8)");
  cmd->add_flag("--force", args->force, "Write into a non-empty --out (its checkpoint files are replaced)");
  cmd->add_flag("--quiet", args->quiet, "No progress lines");
  cmd->footer(
      "Writes config.json (the given config, cut to --layers, with the format's quantization_config), "
      "hf_quant_config.json (nvfp4, mixed), model.safetensors or model-XXXXX-of-YYYYY.safetensors + index (shards "
      "under 5 GB), mtp.* when the config has an MTP head. The weights are those `voltserve bench --config` builds "
      "in memory on the CPU backend (codes and scales bit for bit; dense values rounded to BF16). No tokenizer "
      "unless --tokenizer.");
  cmd->callback([args] { run_synth(*args); });
}

}  // namespace voltserve::cli
