// Random identifiers: chatcmpl-/cmpl- response ids, call_ tool-call ids, request ids for logs.
#pragma once

#include <string>
#include <string_view>

namespace voltserve::openai {

// `prefix` + `n_hex` random lowercase hex digits (thread-safe).
std::string random_id(std::string_view prefix, int n_hex);

}  // namespace voltserve::openai
