// safetensors header parsing and validation. Format: u64 little-endian header length N, N bytes of JSON
// {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {...}}, then the data area.
#include "model/safetensors.h"

#include <algorithm>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

namespace voltserve {
namespace {

// Real headers are a few MB at most (the 27B's largest shard lists ~1000 tensors); the reference implementation
// refuses anything above 100 MB.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;
// Tensor entries are objects holding arrays: depth 3. Anything deeper is not a safetensors header, and refusing it
// before parsing keeps a hostile file from costing deep recursion.
constexpr int kMaxJsonDepth = 8;

std::string prefix(std::string_view file_label) { return std::string(file_label) + ": "; }

bool nesting_too_deep(std::string_view text) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > kMaxJsonDepth) return true;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return false;
}

// A non-negative integer that fits in int64 (JSON numbers may be negative, fractional or huge).
bool as_index(const nlohmann::json& v, uint64_t& out) {
  if (v.is_number_unsigned()) {
    out = v.get<uint64_t>();
  } else if (v.is_number_integer()) {
    const int64_t s = v.get<int64_t>();
    if (s < 0) return false;
    out = static_cast<uint64_t>(s);
  } else {
    return false;
  }
  return out <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
}

std::string dump(const nlohmann::json& v) {
  return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

Result<SafetensorsHeader> parse_safetensors_header(std::span<const std::byte> file, std::string_view file_label) {
  const std::string where = prefix(file_label);
  if (file.size() < 8) {
    return data_loss(where + "truncated: " + std::to_string(file.size()) +
                     " bytes, shorter than the 8-byte safetensors header length");
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<uint8_t>(file[static_cast<size_t>(i)]);
  if (header_len > file.size() - 8) {
    return data_loss(where + "truncated or not safetensors: header length " + std::to_string(header_len) +
                     " exceeds the " + std::to_string(file.size() - 8) + " bytes after the length field");
  }
  if (header_len > kMaxHeaderBytes) {
    return data_loss(where + "header length " + std::to_string(header_len) + " is larger than the 100 MB limit");
  }
  const std::string_view text(reinterpret_cast<const char*>(file.data() + 8), static_cast<size_t>(header_len));
  if (nesting_too_deep(text)) return data_loss(where + "header JSON nests deeper than a safetensors header can");
  const nlohmann::json header = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) return data_loss(where + "header is not valid JSON");
  if (!header.is_object()) return data_loss(where + "header is not a JSON object");

  SafetensorsHeader out;
  out.data_offset = 8 + header_len;
  const uint64_t data_size = file.size() - out.data_offset;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string what = where + "tensor '" + name + "': ";
    if (name.empty()) return data_loss(where + "a tensor has an empty name");
    if (!entry.is_object()) return data_loss(what + "entry is not a JSON object");
    const auto dtype_it = entry.find("dtype");
    const auto shape_it = entry.find("shape");
    const auto offsets_it = entry.find("data_offsets");
    if (dtype_it == entry.end() || !dtype_it->is_string()) return data_loss(what + "missing or non-string \"dtype\"");
    if (shape_it == entry.end() || !shape_it->is_array()) return data_loss(what + "missing or non-array \"shape\"");
    if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2) {
      return data_loss(what + "\"data_offsets\" must be an array [begin, end]");
    }
    SafetensorsEntry t;
    t.name = name;
    t.dtype_name = dtype_it->get<std::string>();
    t.dtype = parse_dtype(t.dtype_name);
    uint64_t numel = 1;
    bool numel_overflow = false;
    for (const auto& dim : *shape_it) {
      uint64_t d = 0;
      if (!as_index(dim, d)) return data_loss(what + "shape " + dump(*shape_it) + " has a negative or non-integer dimension");
      t.shape.push_back(static_cast<int64_t>(d));
      if (__builtin_mul_overflow(numel, d, &numel)) numel_overflow = true;
    }
    if (numel_overflow) return data_loss(what + "shape " + dump(*shape_it) + " overflows the element count");
    if (!as_index((*offsets_it)[0], t.begin) || !as_index((*offsets_it)[1], t.end)) {
      return data_loss(what + "data_offsets " + dump(*offsets_it) + " are not non-negative integers");
    }
    if (t.begin > t.end) {
      return data_loss(what + "data_offsets " + dump(*offsets_it) + " has begin > end");
    }
    if (t.end > data_size) {
      return data_loss(what + "data_offsets " + dump(*offsets_it) + " end beyond the data area of " +
                       std::to_string(data_size) + " bytes (file truncated or header lies)");
    }
    if (const auto elem = safetensors_dtype_size(t.dtype_name)) {
      uint64_t n_bytes = 0;
      if (__builtin_mul_overflow(numel, static_cast<uint64_t>(*elem), &n_bytes)) {
        return data_loss(what + "shape " + dump(*shape_it) + " overflows the byte count");
      }
      if (n_bytes != t.end - t.begin) {
        return data_loss(what + "data_offsets " + dump(*offsets_it) + " span " + std::to_string(t.end - t.begin) +
                         " bytes but shape " + dump(*shape_it) + " of " + t.dtype_name + " needs " +
                         std::to_string(n_bytes));
      }
    } else if (t.dtype) {
      return internal_error(what + "dtype without a size");  // unreachable: every DType has a size
    }
    out.tensors.push_back(std::move(t));
  }

  // No two tensors may share bytes (a header that lies about offsets often makes them overlap).
  std::vector<const SafetensorsEntry*> by_offset;
  by_offset.reserve(out.tensors.size());
  for (const auto& t : out.tensors) {
    if (t.end > t.begin) by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const SafetensorsEntry* a, const SafetensorsEntry* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    if (by_offset[i]->begin < by_offset[i - 1]->end) {
      return data_loss(where + "tensors '" + by_offset[i - 1]->name + "' and '" + by_offset[i]->name +
                       "' overlap (data_offsets [" + std::to_string(by_offset[i - 1]->begin) + ", " +
                       std::to_string(by_offset[i - 1]->end) + "] and [" + std::to_string(by_offset[i]->begin) +
                       ", " + std::to_string(by_offset[i]->end) + "])");
    }
  }
  return out;
}

}  // namespace voltserve
