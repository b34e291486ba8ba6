// Sub-commands of the `voltserve` binary. Each lives in its own cmd_<name>.cpp and registers itself on the app.
// A command reports failure by throwing CLI::RuntimeError(exit_code) after printing a clear message to stderr.
#pragma once

namespace CLI {
class App;
}

namespace voltserve::cli {

void register_serve_command(CLI::App& app);       // cmd_serve.cpp    (server issue)
void register_generate_command(CLI::App& app);    // cmd_generate.cpp (engine core)
void register_logits_command(CLI::App& app);      // cmd_logits.cpp   (engine core)
void register_tokenize_command(CLI::App& app);    // cmd_tokenize.cpp (tokenizer): tokenize + detokenize
void register_render_command(CLI::App& app);      // cmd_render.cpp   (chat templates)
void register_bench_command(CLI::App& app);       // cmd_bench.cpp    (kernels / benchmarks)
void register_bench_prefix_cache(CLI::App& bench);  // cmd_bench_prefix_cache.cpp: `bench prefix-cache`
void register_plan_command(CLI::App& app);        // cmd_plan.cpp     (the memory plan)
void register_quantize_command(CLI::App& app);    // cmd_quantize.cpp (checkpoint quantizer)
void register_synth_command(CLI::App& app);       // cmd_synth.cpp    (synthetic checkpoints)

}  // namespace voltserve::cli
