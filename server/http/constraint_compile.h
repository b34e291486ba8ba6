// Compiles a request's structured output (openai::StructuredOutput) for the served model through the engine's
// grammar module, once per request (every choice shares it), and says where reasoning ends so that the constraint
// starts after </think>. Tested by tests/e2e/test_structured_output.py.
#pragma once

#include "http/server_context.h"
#include "openai/generation_options.h"

namespace voltserve::http {

// Fills options.constraint from options.structured (nothing when unset). Throws ApiError 400 naming the field that
// asked for it when the schema / regex / grammar is malformed or unsupported.
void compile_constraint(const ServerContext& ctx, openai::GenerationOptions& options);

// The token that ends a reasoning block ("</think>"), -1 when the vocabulary has none.
int32_t reasoning_end_token(const ServerContext& ctx);

}  // namespace voltserve::http
