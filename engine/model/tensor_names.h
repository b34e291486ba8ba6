// Tensor-name conventions of Qwen3.5 checkpoints (MODEL.md §5.1): the text prefix ("model.language_model."
// in VLM exports, "model." in text-only ones), vision tensors (skipped), MTP tensors ("mtp.*").
// Tested in tests/model/tensor_names_test.cpp.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "voltserve/status.h"

namespace voltserve {

inline constexpr std::string_view kVlmTextPrefix = "model.language_model.";
inline constexpr std::string_view kTextOnlyPrefix = "model.";
inline constexpr std::string_view kMtpPrefix = "mtp.";
inline constexpr std::string_view kLmHeadModule = "lm_head";

// The prefix of the text model's tensors: kVlmTextPrefix if any name starts with it, otherwise kTextOnlyPrefix if
// `<prefix>embed_tokens.weight` exists; NotFound (listing a few names seen) if neither embedding is present.
Result<std::string> detect_text_prefix(std::span<const std::string> names);

// Vision-tower tensors ("model.visual.*", "visual.*", "*vision_tower*"): never loaded.
bool is_vision_tensor(std::string_view name);
// Multi-token-prediction head tensors ("mtp.*").
bool is_mtp_tensor(std::string_view name);

// "<prefix>layers.<i>.<suffix>", e.g. layer_module("model.", 3, "self_attn.q_proj") == "model.layers.3.self_attn.q_proj".
std::string layer_module(std::string_view prefix, int64_t layer, std::string_view suffix);

// Strips "model.language_model." or "model." (in that order) from a module or tensor name; other names unchanged.
std::string_view strip_text_prefix(std::string_view name);

}  // namespace voltserve
