// See constraint_compile.h.
#include "http/constraint_compile.h"

#include "openai/api_error.h"

namespace voltserve::http {

void compile_constraint(const ServerContext& ctx, openai::GenerationOptions& options) {
  options.constraint.reset();
  if (!options.structured) return;
  const std::string& param = options.structured->param;
  if (ctx.grammar == nullptr) {
    throw openai::ApiError(openai::ErrorCode::kUnsupported, "structured output is not available on this server", param);
  }
  Result<std::shared_ptr<const CompiledConstraint>> compiled = ctx.grammar->compile(options.structured->spec);
  if (!compiled.is_ok()) {
    throw openai::ApiError(openai::ErrorCode::kInvalidRequest,
                           "'" + param + "' cannot be used: " + compiled.status().message(), param);
  }
  options.constraint = std::move(compiled).value();
}

int32_t reasoning_end_token(const ServerContext& ctx) {
  if (ctx.tokenizer == nullptr) return -1;
  return ctx.tokenizer->token_id("</think>").value_or(-1);
}

}  // namespace voltserve::http
