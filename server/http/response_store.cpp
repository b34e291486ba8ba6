// See response_store.h. An entry's size is the length of its JSON text: close to what it holds, cheap to know.
#include "http/response_store.h"

namespace voltserve::http {

void ResponseStore::configure(size_t max_entries, size_t max_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  max_entries_ = max_entries;
  max_bytes_ = max_bytes;
  evict_locked();
}

bool ResponseStore::put(const std::string& id, StoredResponse entry) {
  size_t bytes = openai::dump_json(entry.response).size() + openai::dump_json(entry.conversation).size() + id.size();
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = index_.find(id); it != index_.end()) {
    bytes_ -= it->second->bytes;
    lru_.erase(it->second);
    index_.erase(it);
  }
  if (max_entries_ == 0 || bytes > max_bytes_) return false;
  lru_.push_front(Entry{id, std::move(entry), bytes});
  index_[id] = lru_.begin();
  bytes_ += bytes;
  evict_locked();
  return true;
}

std::optional<StoredResponse> ResponseStore::get(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(id);
  if (it == index_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->value;
}

bool ResponseStore::erase(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(id);
  if (it == index_.end()) return false;
  bytes_ -= it->second->bytes;
  lru_.erase(it->second);
  index_.erase(it);
  return true;
}

size_t ResponseStore::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

size_t ResponseStore::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

void ResponseStore::evict_locked() {
  while (!lru_.empty() && (lru_.size() > max_entries_ || bytes_ > max_bytes_)) {
    bytes_ -= lru_.back().bytes;
    index_.erase(lru_.back().id);
    lru_.pop_back();
  }
}

}  // namespace voltserve::http
