// The BPE model of a byte-level tokenizer.json: vocab, merges by rank, and the merge loop that turns one
// pre-token (raw bytes) into ids, with a bounded cache of recent pieces. Same results as HF `tokenizers`
// models::bpe (lowest rank first, leftmost first among equals); tested by tests/tokenizer/test_bpe_model.cpp and
// the differential tests.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "voltserve/status.h"

namespace voltserve::tokenizer {

struct BpeSpec {
  std::vector<std::pair<std::string, int32_t>> vocab;      // byte-level token string -> id
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
  std::optional<std::string> unk_token;
  bool fuse_unk = false;
  bool ignore_merges = false;
};

class BpeModel {
 public:
  // Validates the spec (unique ids, merge parts and results in the vocab) with errors naming the bad entry.
  static Result<std::unique_ptr<BpeModel>> build(BpeSpec spec);

  // Appends the ids of one pre-token given as raw bytes (not the ByteLevel form).
  void encode_word(std::string_view bytes, std::vector<int32_t>& out) const;

  std::optional<int32_t> token_id(std::string_view token) const;  // byte-level token string
  // Byte-level token string of an id, nullptr when the id is not in the vocab.
  const std::string* token(int32_t id) const;
  int32_t max_id() const { return static_cast<int32_t>(id_to_token_.size()) - 1; }
  size_t n_merges() const { return n_merges_; }

  static constexpr size_t kCacheCapacity = 1 << 16;  // pieces; when full it is emptied, so it follows new text
  static constexpr size_t kCacheMaxPieceBytes = 128;
  static constexpr size_t kSmallWord = 64;  // symbols; longer words use the heap-based merge loop

 private:
  BpeModel() = default;

  struct MergeSlot {
    uint64_t key;  // (left id << 32) | right id; kEmptyKey when unused
    int32_t rank;
    int32_t new_id;
  };
  static constexpr uint64_t kEmptyKey = ~0ULL;

  const MergeSlot* find_merge(int32_t left, int32_t right) const {
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
    size_t i = (key * 0x9E3779B97F4A7C15ULL) >> merge_shift_;
    while (true) {
      const MergeSlot& s = merge_table_[i];
      if (s.key == key) return &s;
      if (s.key == kEmptyKey) return nullptr;
      i = (i + 1) & merge_mask_;
    }
  }
  void insert_merge(int32_t left, int32_t right, int32_t rank, int32_t new_id);
  void merge_small(std::vector<int32_t>& symbols) const;
  void merge_large(std::vector<int32_t>& symbols) const;
  void initial_symbols(std::string_view bytes, std::vector<int32_t>& symbols) const;

  std::unordered_map<std::string, int32_t> vocab_;  // byte-level string -> id
  std::unordered_map<std::string, int32_t> vocab_bytes_;  // raw bytes -> id (ignore_merges only)
  std::vector<std::string> id_to_token_;             // "" for ids not in the vocab
  std::vector<uint8_t> id_present_;
  int32_t byte_id_[256];
  int32_t unk_id_ = -1;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  size_t n_merges_ = 0;
  std::vector<MergeSlot> merge_table_;
  size_t merge_mask_ = 0;
  int merge_shift_ = 64;

  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  mutable std::shared_mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace voltserve::tokenizer
