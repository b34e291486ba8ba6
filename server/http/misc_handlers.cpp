// See misc_handlers.h. /tokenize and /detokenize use vLLM's shapes (OPENAI.md §2.3).
#include "http/misc_handlers.h"

#include <fmt/format.h>

#include "chat/chat_prompt.h"
#include "openai/api_error.h"
#include "openai/chat_request.h"
#include "openai/fields.h"
#include "openai/responses.h"

namespace voltserve::http {

namespace {

using openai::ApiError;
using openai::ErrorCode;
using openai::Json;

void send_json(httplib::Response& res, const Json& body, int status = 200) {
  res.status = status;
  res.set_content(openai::dump_json(body), "application/json");
}

std::string render(ServerContext& ctx, const Json& body) {
  if (!ctx.chat_template) throw ApiError(ErrorCode::kUnsupported, "this model has no chat template", "messages");
  openai::RequestLimits limits = ctx.limits;
  openai::ChatRequest request = openai::parse_chat_request(body, limits);
  try {
    return chat::render_chat_prompt(*ctx.chat_template, request.template_body, ctx.bos_token,
                                    ctx.eos_token, true);
  } catch (const chat::ChatRequestError& e) {
    throw ApiError(ErrorCode::kInvalidRequest, e.what(), "messages");
  } catch (const chat::TemplateError& e) {
    throw ApiError(ErrorCode::kInvalidRequest, std::string("the chat template rejected the request: ") + e.what(),
                   "messages");
  }
}

}  // namespace

void handle_models(ServerContext& ctx, httplib::Response& res) {
  Json list;
  list["object"] = "list";
  list["data"] = Json::array({openai::model_object(ctx.model_name, ctx.created, ctx.model_info.context_length)});
  send_json(res, list);
}

void handle_model(ServerContext& ctx, const std::string& id, httplib::Response& res) {
  if (id != ctx.model_name) {
    throw ApiError(ErrorCode::kModelNotFound, fmt::format("The model '{}' does not exist", id), "model");
  }
  send_json(res, openai::model_object(ctx.model_name, ctx.created, ctx.model_info.context_length));
}

void handle_health(ServerContext& ctx, httplib::Response& res) {
  ServerPhase phase = ctx.phase.load();
  if (phase == ServerPhase::kLoading) throw ApiError(ErrorCode::kUnavailable, "the model is loading");
  if (phase == ServerPhase::kDraining) throw ApiError(ErrorCode::kUnavailable, "the server is shutting down");
  if (ctx.engine && !ctx.engine->stats().healthy) {
    throw ApiError(ErrorCode::kUnavailable, "the engine is unhealthy after a fatal error");
  }
  send_json(res, {{"status", "ok"}});
}

void handle_metrics(ServerContext& ctx, httplib::Response& res) {
  std::string text;
  if (ctx.engine) {
    EngineStats stats = ctx.engine->stats();
    text = ctx.metrics.render(&stats, ctx.model_name);
  } else {
    text = ctx.metrics.render(nullptr, ctx.model_name);
  }
  res.set_content(text, "text/plain; version=0.0.4");
}

void handle_tokenize(ServerContext& ctx, const std::string& body_text, httplib::Response& res) {
  Json body = openai::parse_json_object_body(body_text);
  std::string text;
  std::string param = "prompt";
  if (openai::find_field(body, "messages")) {
    text = render(ctx, body);
    param = "messages";
  } else {
    std::optional<std::string> prompt = openai::read_string(body, "prompt", "prompt");
    if (!prompt) throw ApiError(ErrorCode::kInvalidRequest, "'prompt' (a string) or 'messages' is required", "prompt");
    text = *prompt;
  }
  bool special = openai::read_bool(body, "parse_special", "parse_special").value_or(true);
  Result<std::vector<int32_t>> ids = ctx.tokenizer->encode(text, special);
  if (!ids.is_ok()) throw ApiError(ErrorCode::kInvalidRequest, ids.status().message(), param);
  Json out;
  out["count"] = ids->size();
  out["max_model_len"] = ctx.model_info.context_length;
  out["tokens"] = *ids;
  send_json(res, out);
}

void handle_detokenize(ServerContext& ctx, const std::string& body_text, httplib::Response& res) {
  Json body = openai::parse_json_object_body(body_text);
  const Json* tokens = openai::find_field(body, "tokens");
  if (!tokens || !tokens->is_array()) {
    throw ApiError(ErrorCode::kInvalidRequest, "'tokens' must be an array of token ids", "tokens");
  }
  std::vector<int32_t> ids;
  for (size_t i = 0; i < tokens->size(); ++i) {
    ids.push_back(static_cast<int32_t>(
        openai::integer_value((*tokens)[i], openai::index_path("tokens", i), 0, ctx.tokenizer->vocab_size() - 1)));
  }
  bool skip = openai::read_bool(body, "skip_special_tokens", "skip_special_tokens").value_or(false);
  send_json(res, {{"prompt", ctx.tokenizer->decode(ids, skip)}});
}

void handle_apply_template(ServerContext& ctx, const std::string& body_text, httplib::Response& res) {
  send_json(res, {{"prompt", render(ctx, openai::parse_json_object_body(body_text))}});
}

}  // namespace voltserve::http
