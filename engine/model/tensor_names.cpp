// Tensor-name conventions of Qwen3.5 checkpoints.
#include "model/tensor_names.h"

#include <algorithm>

namespace voltserve {
namespace {
bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
}  // namespace

Result<std::string> detect_text_prefix(std::span<const std::string> names) {
  const std::string vlm_embed = std::string(kVlmTextPrefix) + "embed_tokens.weight";
  const std::string text_embed = std::string(kTextOnlyPrefix) + "embed_tokens.weight";
  bool has_vlm = false;
  bool has_text_embed = false;
  for (const auto& n : names) {
    if (starts_with(n, kVlmTextPrefix)) has_vlm = true;
    if (n == text_embed) has_text_embed = true;
  }
  if (has_vlm) return std::string(kVlmTextPrefix);
  if (has_text_embed) return std::string(kTextOnlyPrefix);
  std::string seen;
  for (size_t i = 0; i < names.size() && i < 5; ++i) seen += (i ? ", " : "") + names[i];
  return not_found("no text-model embedding in the checkpoint (looked for '" + vlm_embed + "' and '" + text_embed +
                   "'; " + std::to_string(names.size()) + " tensors, e.g. " + (seen.empty() ? "none" : seen) + ")");
}

bool is_vision_tensor(std::string_view name) {
  return starts_with(name, "model.visual.") || starts_with(name, "visual.") ||
         name.find("vision_tower") != std::string_view::npos;
}

bool is_mtp_tensor(std::string_view name) { return starts_with(name, kMtpPrefix); }

std::string layer_module(std::string_view prefix, int64_t layer, std::string_view suffix) {
  std::string s(prefix);
  s += "layers.";
  s += std::to_string(layer);
  s += '.';
  s += suffix;
  return s;
}

std::string_view strip_text_prefix(std::string_view name) {
  if (starts_with(name, kVlmTextPrefix)) return name.substr(kVlmTextPrefix.size());
  if (starts_with(name, kTextOnlyPrefix)) return name.substr(kTextOnlyPrefix.size());
  return name;
}

}  // namespace voltserve
