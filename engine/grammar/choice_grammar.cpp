// See choice_grammar.h.
#include "grammar/choice_grammar.h"

#include <cstdio>

namespace voltserve {

std::string ebnf_literal(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);  // UTF-8 bytes pass through: the grammar is UTF-8 text
    }
  }
  return out + "\"";
}

std::string choice_grammar(const std::vector<std::string>& choices) {
  std::string g = "root ::= ";
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i > 0) g += " | ";
    g += ebnf_literal(choices[i]);
  }
  return g + "\n";
}

}  // namespace voltserve
