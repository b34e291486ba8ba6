// See completion_request.h. `echo`, `suffix` and `best_of` > 1 are known but unsupported: 400 naming them.
#include "openai/completion_request.h"

#include <fmt/format.h>

#include "openai/api_error.h"
#include "openai/fields.h"

namespace voltserve::openai {

namespace {

std::vector<int32_t> read_ids(const Json& array, const std::string& param, const RequestLimits& limits) {
  if (array.empty()) fail_invalid(param, fmt::format("'{}' must not be empty", param));
  int64_t hi = limits.vocab_size > 0 ? limits.vocab_size - 1 : INT32_MAX;
  std::vector<int32_t> ids;
  ids.reserve(array.size());
  for (size_t i = 0; i < array.size(); ++i) {
    const Json& v = array[i];
    if (!v.is_number()) {
      fail_invalid(param, fmt::format("'{}' must hold only token ids, got {} at {}", param, json_type_name(v), i));
    }
    ids.push_back(static_cast<int32_t>(integer_value(v, index_path(param, i), 0, hi)));
  }
  return ids;
}

}  // namespace

CompletionRequest parse_completion_request(const Json& body, const RequestLimits& limits) {
  if (!body.is_object()) throw ApiError(ErrorCode::kInvalidJson, "request body must be a JSON object");
  CompletionRequest out;
  read_generation_options(body, limits, /*chat=*/false, out.options);

  const Json* prompt = find_field(body, "prompt");
  if (!prompt) fail_invalid("prompt", "'prompt' is required");
  if (prompt->is_string()) {
    if (prompt->get_ref<const std::string&>().empty()) fail_invalid("prompt", "'prompt' must not be empty");
    out.prompts.push_back({prompt->get<std::string>(), {}});
  } else if (prompt->is_array()) {
    if (prompt->empty()) fail_invalid("prompt", "'prompt' must not be empty");
    const Json& first = (*prompt)[0];
    if (first.is_number()) {
      out.prompts.push_back({std::nullopt, read_ids(*prompt, "prompt", limits)});
    } else {
      if (static_cast<int64_t>(prompt->size()) > limits.max_prompts) {
        fail_unsupported("prompt", fmt::format("'prompt' may hold at most {} prompts", limits.max_prompts));
      }
      for (size_t i = 0; i < prompt->size(); ++i) {
        const Json& p = (*prompt)[i];
        std::string param = index_path("prompt", i);
        if (p.is_string()) {
          if (p.get_ref<const std::string&>().empty()) fail_invalid(param, fmt::format("'{}' must not be empty", param));
          out.prompts.push_back({p.get<std::string>(), {}});
        } else if (p.is_array()) {
          out.prompts.push_back({std::nullopt, read_ids(p, param, limits)});
        } else {
          fail_invalid(param, fmt::format("'{}' must be a string or an array of token ids, got {}", param, json_type_name(p)));
        }
      }
    }
  } else {
    fail_invalid("prompt", fmt::format("'prompt' must be a string, an array of strings or token ids, got {}",
                                       json_type_name(*prompt)));
  }
  int64_t n_choices = static_cast<int64_t>(out.prompts.size()) * out.options.n;
  if (n_choices > limits.max_n) {
    fail_unsupported("n", fmt::format("prompts x n = {} choices; this server allows at most {}", n_choices, limits.max_n));
  }

  if (read_bool(body, "echo", "echo").value_or(false)) fail_unsupported("echo", "'echo' is not supported");
  if (std::optional<std::string> suffix = read_string(body, "suffix", "suffix"); suffix && !suffix->empty()) {
    fail_unsupported("suffix", "'suffix' (fill-in-the-middle) is not supported");
  }
  if (std::optional<int64_t> best_of = read_integer(body, "best_of", "best_of", 1, 128); best_of && *best_of > 1) {
    fail_unsupported("best_of", "'best_of' > 1 is not supported");
  }
  return out;
}

}  // namespace voltserve::openai
