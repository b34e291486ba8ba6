// Lexer for Jinja templates with the settings transformers uses (trim_blocks, lstrip_blocks, `{%- -%}` control,
// newline normalisation, one trailing newline dropped); mirrors jinja2/lexer.py rule by rule.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace voltserve::chat {

enum class TokenType {
  kData,        // literal template text (after whitespace control)
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,      // value already unescaped
  kInteger,
  kFloat,
  kOperator,    // value holds the operator text: "+", "//", "==", "(", ...
  kEof,
};

struct Token {
  TokenType type;
  std::string value;
  int line = 1;
  int column = 1;
};

// Throws TemplateError (with the line) on malformed input: unclosed tags, bad strings, unexpected characters.
std::vector<Token> tokenize(std::string_view source);

}  // namespace voltserve::chat
