// Parser from tokens to the syntax tree (ast.h), following jinja2/parser.py's grammar and operator precedence.
// Unknown tags, filters and tests are rejected here, with their line, as jinja2 rejects them when compiling.
#pragma once

#include <string_view>

#include "chat/template/ast.h"

namespace voltserve::chat {

// Throws TemplateError naming the line (and column) of the first problem.
Body parse_template(std::string_view source);

}  // namespace voltserve::chat
