// `voltserve generate --model DIR (--ids 1,2,3 | --prompt TEXT) [--max-tokens N] [--temperature T] [--top-p P]
// [--top-k K] [--min-p P] [--seed S] [--chat] [--json]` (DESIGN.md §2): one request through the Engine (the same
// path as the server), streamed until an eos id or N tokens; reports prefill and decode tokens/s. --ids needs no
// tokenizer. Tested by tests/golden/cli_model_test.cpp (greedy ids equal the transformers continuation).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "http/serve_settings.h"
#include "voltserve/tokenizer.h"
#include "voltserve/engine.h"
#if __has_include("chat/chat_prompt.h")
#include "chat/chat_prompt.h"
#define VOLTSERVE_HAVE_CHAT_PROMPT 1
#endif

namespace voltserve::cli {
namespace {

struct GenerateArgs {
  std::string model;
  std::string tokenizer;  // defaults to the model folder
  std::string ids;
  std::string prompt;
  int32_t max_tokens = 64;
  float temperature = 0.0f;
  float top_p = 1.0f;
  int32_t top_k = 0;
  float min_p = 0.0f;
  std::optional<uint64_t> seed;
  bool chat = false;
  bool json = false;
  bool ignore_eos = false;
  std::string backend = "auto";
  std::string kernel_family = "auto";
  std::string lm_head = "keep";
  int32_t draft_vocab = 0;
  std::string mtp_format = "nvfp4";
  std::string kv_cache_dtype = "auto";
  int32_t threads = 0;
  std::string speculative_k = "auto";  // N (0 off) or auto: MTP drafts per round where the model has an MTP head
};

// Drafts per round at most when --speculative-k is auto.
constexpr int32_t kAutoMaxSpeculativeK = 8;

// Prompt tokens per engine step (the CPU reference is slow on large steps; a GPU is fast on them).
constexpr int32_t kPrefillChunk = 512;

[[noreturn]] void fail(const std::string& message, int code) { cli::fail("generate", message, code); }

std::vector<int32_t> parse_ids(const std::string& text) { return cli::parse_token_ids("generate", text); }

std::string render_chat(const Tokenizer& tok, const std::string& prompt) {
#ifdef VOLTSERVE_HAVE_CHAT_PROMPT
  if (tok.chat_template().empty()) {
    fail("--chat: the tokenizer has no chat template (tokenizer_config.json chat_template or chat_template.jinja)",
         2);
  }
  try {
    const auto tmpl = chat::ChatTemplate::parse(tok.chat_template());
    nlohmann::ordered_json request;
    request["messages"] = nlohmann::ordered_json::array({{{"role", "user"}, {"content", prompt}}});
    return render_chat_prompt(tmpl, request, tok.bos_token(), tok.eos_token(), true);
  } catch (const std::exception& e) {
    fail(std::string("--chat: rendering the chat template failed: ") + e.what(), 1);
  }
#else
  (void)tok;
  (void)prompt;
  fail("--chat is not available in this build yet (the chat-template renderer is missing)", 2);
#endif
}

void run_generate(GenerateArgs a) {
  if (a.ids.empty() == a.prompt.empty()) fail("give exactly one of --ids or --prompt", 2);
  if (a.chat && a.prompt.empty()) fail("--chat needs --prompt (the user message)", 2);
  if (a.max_tokens < 1) fail("--max-tokens must be >= 1", 2);
  if (!(a.temperature >= 0.0f)) fail("--temperature must be >= 0", 2);
  if (!(a.top_p > 0.0f && a.top_p <= 1.0f)) fail("--top-p must be in (0, 1]", 2);
  if (!(a.min_p >= 0.0f && a.min_p <= 1.0f)) fail("--min-p must be in [0, 1]", 2);
  if (a.top_k < -1) fail("--top-k must be >= 0 (0 or -1: off)", 2);
  int32_t spec_k = kSpeculativeAuto;
  if (a.speculative_k != "auto") {
    size_t used = 0;
    try {
      spec_k = std::stoi(a.speculative_k, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != a.speculative_k.size() || spec_k < 0 || spec_k > kMaxSpeculativeK) {
      fail("--speculative-k must be auto or an integer in [0, " + std::to_string(kMaxSpeculativeK) + "], got '" +
               a.speculative_k + "'",
           2);
    }
  }
  if (a.model.empty()) a.model = http::default_model_dir().string();
  if (!std::filesystem::is_directory(a.model)) fail("model folder " + a.model + " does not exist", 1);

  // The tokenizer is optional in --ids mode (the folder may have none), required for --prompt.
  const std::filesystem::path tok_dir(a.tokenizer.empty() ? a.model : a.tokenizer);
  std::optional<Tokenizer> tok;
  const bool need_tokenizer = !a.prompt.empty();
  if (need_tokenizer || std::filesystem::exists(tok_dir / "tokenizer.json")) {
    auto loaded = Tokenizer::load(tok_dir);
    if (loaded.is_ok()) {
      tok = std::move(loaded).value();
    } else if (need_tokenizer) {
      fail("--prompt needs a tokenizer: " + loaded.status().to_string(), 1);
    } else {
      std::cerr << "voltserve generate: note: tokenizer not loaded (" << loaded.status().to_string()
                << "); printing ids only\n";
    }
  }

  std::vector<int32_t> prompt_ids;
  if (!a.ids.empty()) {
    prompt_ids = parse_ids(a.ids);
  } else {
    const std::string text = a.chat ? render_chat(*tok, a.prompt) : a.prompt;
    auto enc = tok->encode(text, /*parse_special=*/true);
    if (!enc.is_ok()) fail("tokenizing the prompt failed: " + enc.status().to_string(), 1);
    prompt_ids = std::move(enc).value();
    if (prompt_ids.empty()) fail("the prompt tokenizes to no tokens", 2);
  }

  ModelOptions model;
  model.model_dir = a.model;
  model.backend = a.backend;
  model.kernel_family = a.kernel_family;
  model.lm_head = a.lm_head;
  model.draft_vocab = a.draft_vocab;
  model.mtp_format = a.mtp_format;
  model.kv_cache_dtype = a.kv_cache_dtype;
  model.n_threads = a.threads;
  model.n_slots = 1;
  model.max_context = static_cast<int32_t>(prompt_ids.size()) + a.max_tokens;
  if (tok) model.n_vocab_real = tok->vocab_size();  // padding rows past the tokenizer are never sampled
  EngineConfig config;
  config.max_running = 1;
  config.max_waiting = 1;
  // The whole prompt in one step when it is short; long prompts in chunks of kPrefillChunk.
  config.prefill_chunk = std::clamp(static_cast<int32_t>(prompt_ids.size()), 1, kPrefillChunk);
  config.max_tokens_per_step = config.prefill_chunk;
  config.max_speculative_k = spec_k == kSpeculativeAuto ? kAutoMaxSpeculativeK : spec_k;
  config.speculative_k = spec_k;
  std::unique_ptr<Engine> engine = load_engine("generate", model, config);

  Request request;
  request.id = "generate";
  request.prompt_ids = prompt_ids;
  request.max_new_tokens = a.max_tokens;
  request.sampling.temperature = a.temperature;
  request.sampling.top_p = a.top_p;
  request.sampling.top_k = a.top_k;
  request.sampling.min_p = a.min_p;
  request.sampling.seed = a.seed;
  request.ignore_eos = a.ignore_eos;
  request.stop_token_ids = engine->model_info().eos_token_ids;

  std::optional<IncrementalDecoder> stream;
  if (tok && !a.json) stream.emplace(*tok, /*skip_special=*/false);
  std::vector<int32_t> generated;
  using Clock = std::chrono::steady_clock;
  EventQueue events;
  const auto t_submit = Clock::now();
  Result<RequestId> id = engine->submit(request, events.sink());
  if (!id.is_ok()) {
    fail(id.status().message(), id.status().code() == StatusCode::kInvalidArgument ||
                                        id.status().code() == StatusCode::kOutOfRange
                                    ? 2
                                    : 1);
  }
  Clock::time_point t_first{}, t_last{};
  Event final_event;
  while (true) {
    auto [ev, at] = events.pop();
    if (!ev.token_ids.empty()) {
      if (generated.empty()) t_first = at;
      t_last = at;
    }
    for (size_t i = 0; i < ev.token_ids.size(); ++i) {
      const int32_t next = ev.token_ids[i];
      generated.push_back(next);
      // The eos token that ends the text is not printed.
      const bool stop = ev.finished && ev.finish_reason == FinishReason::kStop && i + 1 == ev.token_ids.size();
      if (!a.json) {
        if (stream) {
          if (!stop) std::cout << stream->push(next) << std::flush;
        } else {
          std::cout << (generated.size() > 1 ? " " : "") << next << std::flush;
        }
      }
    }
    if (ev.finished) {
      final_event = std::move(ev);
      break;
    }
  }
  if (final_event.finish_reason == FinishReason::kError) fail(final_event.error.to_string(), 1);
  const std::string finish_reason = final_event.finish_reason == FinishReason::kStop ? "stop" : "length";

  // Prefill: submit to the first token (the prompt's forward and one sample); decode: the tokens after it.
  const double prefill_s = std::chrono::duration<double>(t_first - t_submit).count();
  const double decode_s = std::chrono::duration<double>(t_last - t_first).count();
  const auto n_decode = static_cast<int32_t>(generated.size()) - 1;
  const double prefill_tps = prefill_s > 0 ? static_cast<double>(prompt_ids.size()) / prefill_s : 0.0;
  const double decode_tps = decode_s > 0 && n_decode > 0 ? static_cast<double>(n_decode) / decode_s : 0.0;
  if (a.json) {
    std::vector<int32_t> text_ids = generated;
    if (finish_reason == "stop") text_ids.pop_back();  // the eos token ends the text; it is not part of it
    nlohmann::ordered_json out;
    out["ids"] = generated;
    out["text"] = tok ? tok->decode(text_ids, /*skip_special=*/false) : std::string();
    out["tokens_per_second"] = decode_tps;
    out["prefill_tokens_per_second"] = prefill_tps;
    out["decode_tokens_per_second"] = decode_tps;
    out["prompt_tokens"] = prompt_ids.size();
    out["completion_tokens"] = generated.size();
    out["finish_reason"] = finish_reason;
    out["backend"] = engine->model_info().backend;
    // Speculative decoding: drafts the MTP head proposed and the target accepted (0 and 0 without speculation).
    out["drafted"] = final_event.n_tokens_drafted;
    out["accepted"] = final_event.n_tokens_accepted;
    out["drafted_per_position"] = final_event.drafted_per_position;
    out["accepted_per_position"] = final_event.accepted_per_position;
    std::cout << out.dump() << "\n";
  } else {
    if (stream) std::cout << stream->flush();
    std::cout << "\n";
    std::cerr << "prefill: " << prompt_ids.size() << " tokens, " << prefill_tps << " tokens/s; decode: "
              << std::max(n_decode, 0) << " tokens, " << decode_tps << " tokens/s; finish: " << finish_reason
              << "; backend: " << engine->model_info().backend;
    if (final_event.n_tokens_drafted > 0) {
      std::cerr << "; speculative: " << final_event.n_tokens_accepted << " of " << final_event.n_tokens_drafted
                << " drafts accepted";
    }
    std::cerr << "\n";
  }
}

}  // namespace

void register_generate_command(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "Generate tokens from a prompt (or token ids) with a local model");
  cmd->add_option("--model", args->model,
                  "Hugging Face model folder (config.json + safetensors; default: the bundled demo model, models/demo)");
  cmd->add_option("--tokenizer", args->tokenizer, "Tokenizer folder (default: the model folder)");
  cmd->add_option("--ids", args->ids, "Prompt as token ids, e.g. 1,2,3 (needs no tokenizer)");
  cmd->add_option("--prompt", args->prompt, "Prompt text (tokenized with the model's tokenizer)");
  cmd->add_option("--max-tokens", args->max_tokens, "Most tokens to generate (default 64)");
  cmd->add_option("--temperature", args->temperature, "Sampling temperature; 0 = greedy (default 0)");
  cmd->add_option("--top-p", args->top_p, "Nucleus sampling mass in (0, 1] (default 1)");
  cmd->add_option("--top-k", args->top_k, "Keep the k most likely tokens; 0 = off (default 0)");
  cmd->add_option("--min-p", args->min_p, "Drop tokens with p < min_p * p_max (default 0)");
  cmd->add_option("--seed", args->seed, "Random seed (default: random)");
  cmd->add_flag("--chat", args->chat, "Render --prompt as a user message through the model's chat template");
  cmd->add_flag("--json", args->json,
                "Print {\"ids\", \"text\", \"tokens_per_second\", ...} instead of streaming text");
  cmd->add_flag("--ignore-eos", args->ignore_eos, "Do not stop at the eos ids of config/generation_config");
  cmd->add_option("--backend", args->backend, "Compute backend: cpu, cuda or auto (default: cuda when a GPU is visible)");
  cmd->add_option("--draft-vocab", args->draft_vocab, "Speculative decoding: the MTP head drafts over the N most frequent tokens only (draft_vocab.json beside the model lists them, else the tokenizer's added tokens and the lowest ids); output is unchanged. 0 (default): the whole vocabulary")
      ->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--mtp-format", args->mtp_format, "Speculative decoding: the MTP layer's weights nvfp4 (default: quantized at load with the draft lm_head, cheaper drafts; output is unchanged) or keep (as stored)")
      ->check(CLI::IsMember({"keep", "nvfp4"}));
  cmd->add_option("--lm-head", args->lm_head, "keep (as the checkpoint stores it), fp8 or nvfp4 (quantized at load)")
      ->check(CLI::IsMember({"keep", "fp8", "nvfp4"}));
  cmd->add_option("--kv-cache-dtype", args->kv_cache_dtype, "KV pages: auto (fp8 when the checkpoint's "
                  "kv_cache_quant_algo is FP8, else fp16 on a GPU / fp32 on the CPU), fp16, bf16 (CPU "
                  "backend only) or fp8 (e4m3: half the bytes of fp16, twice the pages)")
      ->check(CLI::IsMember({"auto", "fp16", "bf16", "fp8"}));
  cmd->add_option("--kernel-family", args->kernel_family, "CUDA weight kernels: sm70, sm80 or auto (default: by the GPU)")
      ->check(CLI::IsMember({"auto", "sm70", "sm80"}));
  cmd->add_option("--threads", args->threads, "CPU threads (0: automatic)");
  cmd->add_option("--speculative-k", args->speculative_k,
                  "MTP speculative decoding: drafts per round N (0 = off) or auto (default; per round from the "
                  "acceptance so far); only where the model has an MTP head and the backend verifies drafts");
  cmd->callback([args] { run_generate(*args); });
}

}  // namespace voltserve::cli
