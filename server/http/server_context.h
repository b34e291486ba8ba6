// Everything a route handler needs: the engine, tokenizer, chat template, model facts, limits, metrics and the
// server's phase (loading / ready / draining / faulted). Owned by HttpServer; handlers get a reference.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "chat/template/chat_template.h"
#include "voltserve/tokenizer.h"
#include "http/metrics.h"
#include "http/response_store.h"
#include "http/serve_options.h"
#include "openai/request_limits.h"
#include "voltserve/engine.h"
#include "voltserve/grammar.h"
#include "voltserve/model_info.h"

namespace voltserve::http {

enum class ServerPhase { kLoading, kReady, kDraining };

struct ServerContext {
  ServeOptions options;
  ServerMetrics metrics;
  ResponseStore responses;       // /v1/responses with store: true (bounded by options.response_store_*)
  std::atomic<ServerPhase> phase{ServerPhase::kLoading};
  std::atomic<int> n_active{0};  // requests inside a generation route (drain waits for 0)

  // Set once before phase becomes kReady, then read-only.
  Engine* engine = nullptr;
  const Tokenizer* tokenizer = nullptr;
  GrammarCompiler* grammar = nullptr;  // structured output; nullptr: requests asking for it answer 400
  const chat::ChatTemplate* chat_template = nullptr;  // nullptr: the model has none (chat routes answer 400)
  std::string bos_token;                              // the template's special tokens ("" when none)
  std::string eos_token;
  bool template_uses_xml_tools = true;                // Qwen3.5+ <function=...> vs Qwen3 JSON tool calls
  ModelInfo model_info;
  openai::RequestLimits limits;
  std::string model_name;
  std::string system_fingerprint;
  int64_t created = 0;
};

}  // namespace voltserve::http
