// The bounded in-memory store behind `store: true` on /v1/responses: GET/DELETE /v1/responses/{id} and
// previous_response_id. Each entry keeps the Response object and the conversation it ended (chat messages, the
// next turn's history). Bounded by entries and bytes; the least recently used entry is evicted first. Thread-safe.
// Tested by tests/server/response_store_test.cpp.
#pragma once

#include <cstddef>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "openai/json_body.h"

namespace voltserve::http {

struct StoredResponse {
  openai::Json response;      // the Response object as it was answered
  openai::Json conversation;  // chat messages: the history plus this response's input and output
};

class ResponseStore {
 public:
  ResponseStore() = default;
  // 0 entries or 0 bytes: nothing is stored.
  void configure(size_t max_entries, size_t max_bytes);

  // Stores (or replaces) `id`, then evicts the least recently used entries beyond the bounds. An entry larger than
  // the byte bound on its own is not kept; returns false then.
  bool put(const std::string& id, StoredResponse entry);
  // A copy of the entry (and marks it recently used), or nullopt.
  std::optional<StoredResponse> get(const std::string& id);
  bool erase(const std::string& id);

  size_t size() const;
  size_t bytes() const;

 private:
  struct Entry {
    std::string id;
    StoredResponse value;
    size_t bytes = 0;
  };
  void evict_locked();

  mutable std::mutex mu_;
  size_t max_entries_ = 1024;
  size_t max_bytes_ = size_t{256} << 20;
  size_t bytes_ = 0;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
};

}  // namespace voltserve::http
