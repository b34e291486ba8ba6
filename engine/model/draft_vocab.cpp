// The draft vocabulary (see draft_vocab.h).
#include "model/draft_vocab.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>
#include <string>

#include "common/dtype.h"

namespace voltserve {
namespace {

using nlohmann::json;

Result<json> read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return not_found(path.string() + ": cannot be read");
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalid_argument(path.string() + ": not valid JSON");
  return j;
}

// draft_vocab.json's ids in file order.
Result<std::vector<int32_t>> listed_ids(const std::filesystem::path& path, int32_t n_vocab_real) {
  VS_ASSIGN_OR_RETURN(json j, read_json(path));
  const json* arr = &j;
  if (j.is_object()) {
    if (!j.contains("token_ids")) return invalid_argument(path.string() + ": an object without \"token_ids\"");
    arr = &j["token_ids"];
  }
  if (!arr->is_array() || arr->empty()) {
    return invalid_argument(path.string() + ": expected a non-empty array of token ids, most frequent first");
  }
  std::vector<int32_t> ids;
  std::set<int32_t> seen;
  for (size_t i = 0; i < arr->size(); ++i) {
    const json& v = (*arr)[i];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= n_vocab_real) {
      return invalid_argument(path.string() + ": entry " + std::to_string(i) + " (" + v.dump() +
                              ") is not a token id in [0, " + std::to_string(n_vocab_real) + ")");
    }
    const auto id = static_cast<int32_t>(v.get<int64_t>());
    if (!seen.insert(id).second) {
      return invalid_argument(path.string() + ": token id " + std::to_string(id) + " is listed twice");
    }
    ids.push_back(id);
  }
  return ids;
}

// tokenizer.json's added tokens (special or not), when the file is there.
Result<std::vector<int32_t>> added_ids(const std::filesystem::path& path, int32_t n_vocab_real) {
  std::vector<int32_t> ids;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return ids;
  VS_ASSIGN_OR_RETURN(json j, read_json(path));
  if (!j.is_object() || !j.contains("added_tokens") || !j["added_tokens"].is_array()) return ids;
  for (const json& t : j["added_tokens"]) {
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer()) continue;
    const int64_t id = t["id"].get<int64_t>();
    if (id >= 0 && id < n_vocab_real) ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

}  // namespace

Result<std::vector<int32_t>> load_draft_vocab(const std::filesystem::path& model_dir, int32_t n, int32_t n_vocab_real) {
  if (n <= 0 || n >= n_vocab_real) return std::vector<int32_t>{};
  std::vector<int32_t> ids;
  const std::filesystem::path listed = model_dir / "draft_vocab.json";
  std::error_code ec;
  if (!model_dir.empty() && std::filesystem::exists(listed, ec)) {
    VS_ASSIGN_OR_RETURN(ids, listed_ids(listed, n_vocab_real));
    if (static_cast<int32_t>(ids.size()) > n) ids.resize(static_cast<size_t>(n));
  } else {
    std::vector<int32_t> added;
    if (!model_dir.empty()) {
      VS_ASSIGN_OR_RETURN(added, added_ids(model_dir / "tokenizer.json", n_vocab_real));
    }
    std::set<int32_t> chosen(added.begin(), added.end());
    for (int32_t id = 0; static_cast<int32_t>(chosen.size()) < n && id < n_vocab_real; ++id) chosen.insert(id);
    ids.assign(chosen.begin(), chosen.end());
    if (static_cast<int32_t>(ids.size()) > n) {  // more added tokens than n: keep them all, fewer low ids
      return invalid_argument("draft vocabulary of " + std::to_string(n) + " tokens is smaller than the " +
                              std::to_string(added.size()) + " added tokens of " +
                              (model_dir / "tokenizer.json").string());
    }
  }
  // Ascending, so that the draft's argmax breaks ties toward the lower id as the full vocabulary's does.
  std::sort(ids.begin(), ids.end());
  return ids;
}

Result<std::unique_ptr<QuantizedWeight>> gather_weight_rows(const kernels::HostWeightRef& w,
                                                            std::span<const int32_t> ids) {
  auto out = std::make_unique<QuantizedWeight>();
  kernels::HostWeightRef& r = out->ref;
  r = w;
  r.n = static_cast<int64_t>(ids.size());
  for (const int32_t id : ids) {
    if (id < 0 || id >= w.n) {
      return out_of_range("draft vocabulary: token id " + std::to_string(id) + " is outside the head's " +
                          std::to_string(w.n) + " rows");
    }
  }
  if (w.codes == nullptr) {  // synthetic: the same format and row count, drawn from a seed of its own
    r.synthetic_seed = w.synthetic_seed ^ 0x9e3779b97f4a7c15ull;
    r.channel_scales = nullptr;
    return out;
  }
  auto gather = [&](const uint8_t* src, size_t row_bytes, std::vector<uint8_t>& dst) {
    dst.resize(ids.size() * row_bytes);
    for (size_t i = 0; i < ids.size(); ++i) {
      std::memcpy(dst.data() + i * row_bytes, src + static_cast<size_t>(ids[i]) * row_bytes, row_bytes);
    }
  };
  const auto k = static_cast<size_t>(w.k);
  switch (w.format) {
    case WeightFormat::kNvfp4:
      gather(w.codes, k / 2, out->codes);
      gather(w.scales, k / 16, out->scales);
      break;
    case WeightFormat::kFp8:
      gather(w.codes, k, out->codes);
      break;
    case WeightFormat::kDense:
      gather(w.codes, k * dtype_bytes(w.dense_dtype), out->codes);
      break;
  }
  r.codes = out->codes.data();
  r.scales = out->scales.empty() ? nullptr : out->scales.data();
  if (w.channel_scales != nullptr) {
    out->channel_scales.resize(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) out->channel_scales[i] = w.channel_scales[ids[i]];
    r.channel_scales = out->channel_scales.data();
  }
  return out;
}

}  // namespace voltserve
