// `voltserve serve`: loads the model (default: the bundled demo model, models/demo), starts the engine
// and the OpenAI-compatible HTTP server; SIGTERM/SIGINT drain (new requests 503, in-flight ones finish) and exit.
// Settings: built-in defaults < --config FILE < CLI flags (config/README.md). Tested by tests/e2e/.
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/commands.h"

#ifdef VOLTSERVE_HAVE_HTTP

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include <spdlog/spdlog.h>

#include "chat/chat_prompt.h"
#include "chat/template/chat_template.h"
#include "http/http_server.h"
#include "http/serve_settings.h"
#include "http/server_context.h"
#include "http/server_log.h"
#include "voltserve/tokenizer.h"
#include "voltserve/engine.h"

namespace voltserve::cli {

namespace {

[[noreturn]] void fail(const std::string& message) {
  std::cerr << "voltserve serve: " << message << "\n";
  throw CLI::RuntimeError(2);
}

void run_serve(http::ServeSettings s) {
  namespace fs = std::filesystem;
  spdlog::level::level_enum level = spdlog::level::from_str(s.log_level);
  if (level == spdlog::level::off && s.log_level != "off") fail("--log-level must be trace, debug, info, warn, error or off");
  spdlog::set_level(level);
  auto& log = http::server_log();

  // Signals are taken by one thread with sigwait: block them before any other thread exists.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  fs::path model_dir = s.model.empty() ? http::default_model_dir() : fs::path(s.model);
  fs::path tokenizer_dir = s.tokenizer.empty() ? model_dir : fs::path(s.tokenizer);
  if (!fs::exists(model_dir / "config.json")) {
    fail("no model at " + model_dir.string() + " (expected a Hugging Face folder with config.json; see --model)");
  }

  http::ServerContext ctx;
  ctx.options = s.http;
  ctx.model_name = !s.http.served_model_name.empty() ? s.http.served_model_name
                                                     : fs::absolute(model_dir).lexically_normal().filename().string();
  if (ctx.model_name.empty()) ctx.model_name = fs::absolute(model_dir).parent_path().filename().string();
  ctx.created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  ctx.system_fingerprint = "fp_voltserve_0.1.0";
  ctx.options.http_threads = s.http.http_threads > 0 ? s.http.http_threads : s.max_running + s.max_waiting + 16;
  ctx.responses.configure(s.http.response_store_entries, s.http.response_store_bytes);

  http::HttpServer server(ctx);
  Result<int> port = server.bind();
  if (!port.is_ok()) fail(port.status().message());
  // Listen while loading so /health can say 503 "loading".
  std::thread http_thread([&server] { server.serve(); });
  auto stop_http = [&] {
    server.stop();
    if (http_thread.joinable()) http_thread.join();
  };
  log.info("listening on http://{}:{} (loading {})", s.http.host, *port, model_dir.string());

  Result<Tokenizer> tokenizer = Tokenizer::load(tokenizer_dir);
  if (!tokenizer.is_ok()) {
    stop_http();
    fail("cannot load the tokenizer from " + tokenizer_dir.string() + ": " + tokenizer.status().to_string());
  }
  std::optional<chat::ChatTemplate> chat_template;
  std::string template_source;
  try {
    chat::ModelChatTemplate found = chat::load_model_chat_template(model_dir);
    template_source = found.source;
    ctx.bos_token = found.bos_token;
    ctx.eos_token = found.eos_token;
    chat_template.emplace(chat::ChatTemplate::parse(found.source));
  } catch (const std::exception& e) {
    log.warn("no usable chat template ({}); /v1/chat/completions will answer 400", e.what());
  }

  ModelOptions model_options;
  model_options.model_dir = model_dir.string();
  model_options.backend = s.backend;
  model_options.kernel_family = s.kernel_family;
  model_options.n_threads = s.threads;
  model_options.max_context = s.context;
  model_options.n_pages = s.kv_pages;
  model_options.lm_head = s.lm_head;
  model_options.draft_vocab = s.draft_vocab;
  model_options.mtp_format = s.mtp_format;
  model_options.kv_cache_dtype = s.kv_cache_dtype;
  model_options.n_slots = s.max_running;
  model_options.n_vocab_real = tokenizer->vocab_size();
  model_options.n_prefix_snapshots = s.prefix_cache ? s.prefix_cache_snapshots : 0;
  EngineConfig engine_config;
  engine_config.max_running = s.max_running;
  engine_config.max_waiting = s.max_waiting;
  engine_config.max_tokens_per_step = s.max_tokens_per_step;
  engine_config.prefill_chunk = s.prefill_chunk;
  engine_config.max_speculative_k = s.max_speculative_k;
  engine_config.speculative_k = std::min(s.speculative_k, s.max_speculative_k);
  engine_config.prefix_snapshot_interval = s.prefix_snapshot_interval;
  engine_config.prefix_cache = s.prefix_cache;
  Result<std::unique_ptr<Engine>> engine = Engine::load(model_options, engine_config);
  if (!engine.is_ok()) {
    stop_http();
    fail("cannot load the model from " + model_dir.string() + ": " + engine.status().to_string());
  }
  ctx.model_info = (*engine)->model_info();
  // Structured output: the grammar engine over this vocabulary; a constraint ends at the tokens that end a
  // generation (make_engine_request's stop ids).
  std::vector<int32_t> grammar_stops = ctx.model_info.eos_token_ids;
  if (auto eos = tokenizer->token_id(tokenizer->eos_token())) grammar_stops.push_back(*eos);
  Result<std::unique_ptr<GrammarCompiler>> grammar =
      GrammarCompiler::create(*tokenizer, ctx.model_info.vocab_size, grammar_stops);
  if (grammar.is_ok()) {
    ctx.grammar = grammar->get();
  } else {
    log.warn("structured output is off: {}", grammar.status().to_string());
  }

  ctx.tokenizer = &*tokenizer;
  ctx.chat_template = chat_template ? &*chat_template : nullptr;
  ctx.template_uses_xml_tools = template_source.find("<function=") != std::string::npos ||
                                template_source.find("<tool_call>") == std::string::npos;
  ctx.limits.model_names = {ctx.model_name};
  ctx.limits.vocab_size = ctx.model_info.n_vocab_real > 0 ? ctx.model_info.n_vocab_real : tokenizer->vocab_size();
  ctx.limits.context_length = ctx.model_info.context_length;
  ctx.limits.max_n = s.max_n;
  ctx.limits.max_speculative_k = (*engine)->stats().max_speculative_k;
  ctx.engine = engine->get();
  ctx.phase = http::ServerPhase::kReady;
  log.info("ready: model '{}' (context {}, vocab {}), max_running {}, max_waiting {}, http threads {}", ctx.model_name,
           ctx.model_info.context_length, ctx.limits.vocab_size, s.max_running, s.max_waiting, ctx.options.http_threads);
  log.info("connections: at most {} ({} per address), header timeout {} s, body {} s, keep-alive {} s, write {} s",
           ctx.options.max_connections,
           ctx.options.max_connections_per_address > 0 ? std::to_string(ctx.options.max_connections_per_address) : "any",
           ctx.options.header_timeout_s, ctx.options.body_timeout_s, ctx.options.keep_alive_timeout_s,
           ctx.options.write_timeout_s);

  std::atomic<bool> signalled{false};
  pthread_t main_thread = pthread_self();
  (void)main_thread;
  std::thread signal_thread([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    if (ctx.phase.load() != http::ServerPhase::kReady) return;  // woken by shutdown below
    signalled = true;
    log.info("signal {}: draining (new requests get 503; {} in flight finish)", sig, ctx.n_active.load());
    ctx.phase = http::ServerPhase::kDraining;
    ctx.engine->drain();
    ctx.engine->wait_idle();
    auto bound = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (ctx.n_active.load() > 0 && std::chrono::steady_clock::now() < bound) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    server.stop();
  });

  if (http_thread.joinable()) http_thread.join();
  if (!signalled) {
    ctx.phase = http::ServerPhase::kDraining;
    pthread_kill(signal_thread.native_handle(), SIGTERM);
  }
  signal_thread.join();
  ctx.engine = nullptr;
  log.info("stopped");
}

}  // namespace

void register_serve_command(CLI::App& app) {
  auto settings = std::make_shared<http::ServeSettings>();
  auto config_file = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("serve", "Serve a model over the OpenAI-compatible HTTP API");
  http::ServeSettings& s = *settings;
  cmd->add_option("--config", *config_file, "JSON settings file (config/README.md); CLI flags override it");
  auto* o_model = cmd->add_option("--model", s.model, "Hugging Face model folder (default: the bundled demo model, models/demo)");
  auto* o_tok = cmd->add_option("--tokenizer", s.tokenizer, "Tokenizer folder (default: the model folder)");
  auto* o_host = cmd->add_option("--host", s.http.host, "Address to listen on (default 127.0.0.1)");
  auto* o_port = cmd->add_option("--port", s.http.port, "Port (default 8080; 0 picks a free one)")->check(CLI::Range(0, 65535));
  auto* o_keys = cmd->add_option("--api-key", s.http.api_keys, "Require 'Authorization: Bearer KEY' (repeatable)");
  auto* o_cors = cmd->add_option("--cors-origin", s.http.cors_origins, "Allowed CORS origin, or * (repeatable)");
  auto* o_body = cmd->add_option("--max-body-bytes", s.http.max_body_bytes, "Largest request body (default 16 MiB)")
                     ->check(CLI::Range(size_t{1024}, size_t{1} << 34));
  auto* o_timeout = cmd->add_option("--request-timeout", s.http.request_timeout_s, "Seconds before a request is cancelled (0 = none)")
                        ->check(CLI::NonNegativeNumber);
  auto* o_keepalive = cmd->add_option("--keepalive-interval", s.http.keepalive_interval_s,
                                      "Seconds between SSE keep-alive comments while no token arrives")
                          ->check(CLI::PositiveNumber);
  auto* o_name = cmd->add_option("--served-model-name", s.http.served_model_name, "Model id in the API (default: folder name)");
  auto* o_backend = cmd->add_option("--backend", s.backend, "cpu, cuda or auto (default auto: cuda when a GPU is visible, else cpu)");
  auto* o_family = cmd->add_option("--kernel-family", s.kernel_family,
                                   "CUDA weight kernels: sm70 (Volta instructions), sm80 (Ampere+) or auto (by the GPU)")
                       ->check(CLI::IsMember({"auto", "sm70", "sm80"}));
  auto* o_level = cmd->add_option("--log-level", s.log_level, "trace, debug, info, warn, error, off");
  auto* o_threads = cmd->add_option("--threads", s.threads, "CPU backend threads (0 = automatic)")->check(CLI::Range(0, 1024));
  auto* o_running = cmd->add_option("--max-running", s.max_running, "Sequences decoded together (default 16)")->check(CLI::Range(1, 4096));
  auto* o_waiting = cmd->add_option("--max-waiting", s.max_waiting, "Waiting-queue bound; beyond it 429 (default 64)")->check(CLI::Range(0, 1 << 20));
  auto* o_context = cmd->add_option("--context", s.context, "Context length per sequence (0 = the model's)")->check(CLI::Range(0, 1 << 24));
  auto* o_pages = cmd->add_option("--kv-pages", s.kv_pages, "KV pages of 16 tokens (0 = as many as fit: the GPU's memory "
                                  "plan; max-running full contexts on the CPU)")->check(CLI::Range(0, 1 << 26));
  auto* o_head = cmd->add_option("--lm-head", s.lm_head, "keep (as the checkpoint stores it), fp8 or nvfp4: a BF16 "
                                 "lm_head quantized at load (a smaller decode step)")
                     ->check(CLI::IsMember({"keep", "fp8", "nvfp4"}));
  auto* o_kv_dtype = cmd->add_option("--kv-cache-dtype", s.kv_cache_dtype, "KV pages: auto (fp8 when the checkpoint's "
                                     "kv_cache_quant_algo is FP8, else fp16 on a GPU / fp32 on the CPU), fp16, bf16 "
                                     "(CPU backend only) or fp8 (e4m3: half the bytes of fp16, twice the pages)")
                         ->check(CLI::IsMember({"auto", "fp16", "bf16", "fp8"}));
  auto* o_max_n = cmd->add_option("--max-n", s.max_n, "Largest n (choices per request, default 8)")->check(CLI::Range(1, 128));
  auto* o_http_threads = cmd->add_option("--http-threads", s.http.http_threads,
                                         "HTTP worker threads; each generation holds one (0 = running + waiting + 16)");
  auto spec_k = std::make_shared<std::string>();
  auto* o_spec = cmd->add_option("--speculative-k", *spec_k,
                                 "Drafts per round for requests without speculative_k: N (0 = off) or auto "
                                 "(default auto; needs a model with an MTP head)")
                     ->check([](const std::string& v) {
                       int32_t k = 0;
                       return http::parse_speculative_k(v, k) ? std::string() : std::string("N in [0, 31] or auto");
                     });
  auto* o_max_spec = cmd->add_option("--max-speculative-k", s.max_speculative_k,
                                     "Most drafts per round any request may use (default 8; 0: no speculation)")
                         ->check(CLI::Range(0, 31));
  auto* o_draft_vocab = cmd->add_option("--draft-vocab", s.draft_vocab, "Speculative decoding: the MTP head drafts over the N most frequent tokens only (draft_vocab.json beside the model lists them, else the tokenizer's added tokens and the lowest ids); output is unchanged. 0 (default): the whole vocabulary")
                            ->check(CLI::Range(0, 1 << 24));
  auto* o_mtp_format = cmd->add_option("--mtp-format", s.mtp_format, "Speculative decoding: the MTP layer's weights nvfp4 (default: quantized at load with the draft lm_head, cheaper drafts; output is unchanged) or keep (as stored)")
                           ->check(CLI::IsMember({"keep", "nvfp4"}));
  auto* o_prefix = cmd->add_option("--prefix-cache-snapshots", s.prefix_cache_snapshots,
                                   "Prefix cache: GDN state snapshots kept (default 8; 0 = off; each holds one "
                                   "sequence's recurrent state, ~151 MB on a 27B, on the memory plan's line)")
                       ->check(CLI::Range(0, 1 << 16));
  auto no_prefix = std::make_shared<bool>(false);
  auto* o_no_prefix = cmd->add_flag("--no-prefix-cache", *no_prefix,
                                    "Turn the prefix cache off (no snapshots, no lookups; config key prefix_cache: "
                                    "false)");
  auto* o_prefix_interval = cmd->add_option("--prefix-snapshot-interval", s.prefix_snapshot_interval,
                                            "Prefix cache: snapshot a long prefill every N tokens (default 512; 0 = "
                                            "only at prompt and request ends)")
                                ->check(CLI::Range(0, 1 << 24));
  auto* o_header_timeout = cmd->add_option("--header-timeout", s.http.header_timeout_s,
                                           "Seconds for a client to send a whole request header (default 10; then 408)")
                               ->check(CLI::PositiveNumber);
  auto* o_body_timeout = cmd->add_option("--body-timeout", s.http.body_timeout_s,
                                         "Seconds for the request body once the header is in (default 60; then 408)")
                             ->check(CLI::PositiveNumber);
  auto* o_idle_timeout = cmd->add_option("--keep-alive-timeout", s.http.keep_alive_timeout_s,
                                         "Seconds an idle keep-alive connection stays open (default 60)")
                             ->check(CLI::PositiveNumber);
  auto* o_write_timeout = cmd->add_option("--write-timeout", s.http.write_timeout_s,
                                          "Seconds a response write may block; then the client counts as gone (default 30)")
                              ->check(CLI::PositiveNumber);
  auto* o_max_conn = cmd->add_option("--max-connections", s.http.max_connections,
                                     "Open connections in all (default 4096, bounded by the open-file limit)")
                         ->check(CLI::Range(16, 1 << 20));
  auto* o_per_addr = cmd->add_option("--max-connections-per-address", s.http.max_connections_per_address,
                                     "Open connections per client address; beyond it 429 (default 0 = no limit)")
                         ->check(CLI::Range(0, 1 << 20));
  auto store_mib = std::make_shared<size_t>(s.http.response_store_bytes >> 20);
  auto* o_store = cmd->add_option("--response-store-entries", s.http.response_store_entries,
                                  "Responses kept for GET /v1/responses/{id} and previous_response_id (default 1024; 0 = none)")
                      ->check(CLI::Range(size_t{0}, size_t{1} << 30));
  auto* o_store_mib = cmd->add_option("--response-store-mib", *store_mib, "Memory bound of that store in MiB (default 256)")
                          ->check(CLI::Range(size_t{0}, size_t{1} << 30));

  cmd->callback([settings, config_file, o_model, o_tok, o_host, o_port, o_keys, o_cors, o_body, o_timeout, o_keepalive,
                  o_name, o_backend, o_family, o_level, o_threads, o_running, o_waiting, o_context, o_pages, o_head,
                  o_kv_dtype, o_max_n, o_http_threads, o_header_timeout, o_body_timeout, o_idle_timeout,
                  o_write_timeout, o_max_conn, o_per_addr, o_store, o_store_mib, store_mib, spec_k, o_spec, o_max_spec, o_draft_vocab, o_mtp_format,
                  o_prefix, o_prefix_interval, o_no_prefix, no_prefix] {
    // Defaults < config file < flags: start from defaults, apply the file, then re-apply the flags given.
    http::ServeSettings merged;
    if (!config_file->empty()) {
      Status st = http::apply_config_file(*config_file, merged);
      if (!st.is_ok()) fail(st.message());
    }
    const http::ServeSettings& f = *settings;
    if (o_model->count()) merged.model = f.model;
    if (o_tok->count()) merged.tokenizer = f.tokenizer;
    if (o_host->count()) merged.http.host = f.http.host;
    if (o_port->count()) merged.http.port = f.http.port;
    if (o_keys->count()) merged.http.api_keys = f.http.api_keys;
    if (o_cors->count()) merged.http.cors_origins = f.http.cors_origins;
    if (o_body->count()) merged.http.max_body_bytes = f.http.max_body_bytes;
    if (o_timeout->count()) merged.http.request_timeout_s = f.http.request_timeout_s;
    if (o_keepalive->count()) merged.http.keepalive_interval_s = f.http.keepalive_interval_s;
    if (o_name->count()) merged.http.served_model_name = f.http.served_model_name;
    if (o_backend->count()) merged.backend = f.backend;
    if (o_family->count()) merged.kernel_family = f.kernel_family;
    if (o_level->count()) merged.log_level = f.log_level;
    if (o_threads->count()) merged.threads = f.threads;
    if (o_running->count()) merged.max_running = f.max_running;
    if (o_waiting->count()) merged.max_waiting = f.max_waiting;
    if (o_context->count()) merged.context = f.context;
    if (o_pages->count()) merged.kv_pages = f.kv_pages;
    if (o_head->count()) merged.lm_head = f.lm_head;
    if (o_kv_dtype->count()) merged.kv_cache_dtype = f.kv_cache_dtype;
    if (o_max_n->count()) merged.max_n = f.max_n;
    if (o_http_threads->count()) merged.http.http_threads = f.http.http_threads;
    if (o_spec->count()) http::parse_speculative_k(*spec_k, merged.speculative_k);
    if (o_max_spec->count()) merged.max_speculative_k = f.max_speculative_k;
    if (o_draft_vocab->count()) merged.draft_vocab = f.draft_vocab;
    if (o_mtp_format->count()) merged.mtp_format = f.mtp_format;
    if (o_prefix->count()) merged.prefix_cache_snapshots = f.prefix_cache_snapshots;
    if (o_prefix_interval->count()) merged.prefix_snapshot_interval = f.prefix_snapshot_interval;
    if (o_no_prefix->count() && *no_prefix) merged.prefix_cache = false;
    if (o_header_timeout->count()) merged.http.header_timeout_s = f.http.header_timeout_s;
    if (o_body_timeout->count()) merged.http.body_timeout_s = f.http.body_timeout_s;
    if (o_idle_timeout->count()) merged.http.keep_alive_timeout_s = f.http.keep_alive_timeout_s;
    if (o_write_timeout->count()) merged.http.write_timeout_s = f.http.write_timeout_s;
    if (o_max_conn->count()) merged.http.max_connections = f.http.max_connections;
    if (o_per_addr->count()) merged.http.max_connections_per_address = f.http.max_connections_per_address;
    if (o_store->count()) merged.http.response_store_entries = f.http.response_store_entries;
    if (o_store_mib->count()) merged.http.response_store_bytes = *store_mib << 20;
    run_serve(std::move(merged));
  });
}

}  // namespace voltserve::cli

#else  // the HTTP layer is not built (its dependencies are missing from this tree)

namespace voltserve::cli {

void register_serve_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("serve", "Serve a model over the OpenAI-compatible HTTP API (not built)");
  cmd->callback([] {
    std::cerr << "voltserve serve: this build has no HTTP layer (server/http was skipped at configure time)\n";
    throw CLI::RuntimeError(2);
  });
}

}  // namespace voltserve::cli

#endif
