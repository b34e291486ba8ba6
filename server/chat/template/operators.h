// Python's binary operators and `in` on template values (int overflow is an error: no big integers here).
#pragma once

#include <string>

#include "chat/template/value.h"

namespace voltserve::chat {

class Renderer;

// op: "+", "-", "*", "/", "//", "%", "**", "~".
Value binary_op(Renderer& r, const std::string& op, const Value& a, const Value& b);
Value negate(const Value& v);
Value unary_plus(const Value& v);
// `item in container`.
bool contains(const Value& container, const Value& item);
// Raises jinja2's UndefinedError for an operation on an undefined value.
[[noreturn]] void throw_undefined(const Value& v);

}  // namespace voltserve::chat
