// Resource bounds for parsing and rendering untrusted chat templates: nesting depth (stack), loop steps (time) and
// output size (memory). Exceeding one is a TemplateError, never a crash; the fuzz target relies on them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace voltserve::chat {

// Nesting of expressions and of blocks the parser accepts; real templates stay below 20.
inline constexpr int kMaxParseDepth = 96;
// Height of one expression tree (chains like `a.b.c` or `1+1+1` grow it without parser recursion).
inline constexpr int kMaxExprHeight = 256;
// Jinja's sandbox refuses range() longer than this (jinja2.sandbox.MAX_RANGE).
inline constexpr int64_t kMaxRange = 100000;

struct RenderLimits {
  size_t max_output_bytes = size_t{64} << 20;  // the rendered prompt and any string built on the way
  int64_t max_steps = 20'000'000;              // loop iterations + macro calls + filter items
  int max_call_depth = 64;                     // nested macro calls (recursion)
};

}  // namespace voltserve::chat
