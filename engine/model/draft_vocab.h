// The draft vocabulary of speculative decoding: the MTP head drafts over N token ids instead of the whole
// vocabulary, through an lm_head restricted to those rows. On a 248k-token vocabulary the full BF16 head is ~2.5 GB
// read per draft step (~0.6 ms on an H200); 32k rows are an eighth of that. The target model still verifies against
// the whole vocabulary, so output is unchanged; a token outside the list can only be drafted never (the draft
// after it is then always rejected), which costs acceptance, not correctness.
//
// Which ids: `draft_vocab.json` beside the model — a JSON array of token ids, most frequent first (or an object
// with such a "token_ids" array), made offline by tools/draft_vocab.py from a corpus — and its first N are taken.
// Without that file the list is derived: every added/special token of tokenizer.json (the chat template's
// <|im_end|>, <think>, <tool_call> ...), then the lowest ids (a byte-level BPE vocabulary numbers its tokens in merge
// order, which follows their frequency in the tokenizer's training corpus). Tested in
// tests/model/draft_vocab_test.cpp; the drafting with it in tests/golden/speculative_test.cpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "linear/linear_ref.h"
#include "model/weight_quantize.h"
#include "voltserve/status.h"

namespace voltserve {

// The draft vocabulary of `n` ids (ascending; every id < n_vocab_real) for the model in `model_dir` (empty: a
// synthetic model, the lowest ids). Empty result: n covers the whole vocabulary (draft over all of it). Errors name
// the file and what is wrong with it.
Result<std::vector<int32_t>> load_draft_vocab(const std::filesystem::path& model_dir, int32_t n, int32_t n_vocab_real);

// Rows `ids` of `w` (any stored format: NVFP4 codes and block scales, FP8 codes and row scales, dense values), as
// a weight of ids.size() rows that owns its data. A synthetic weight (codes == nullptr) stays synthetic, n rows.
Result<std::unique_ptr<QuantizedWeight>> gather_weight_rows(const kernels::HostWeightRef& w,
                                                            std::span<const int32_t> ids);

}  // namespace voltserve
