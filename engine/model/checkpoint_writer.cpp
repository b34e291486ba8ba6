// Streaming safetensors shard writer (see checkpoint_writer.h).
#include "model/checkpoint_writer.h"

#include <cstdio>
#include <sstream>
#include <memory>

#include <nlohmann/json.hpp>

namespace voltserve {

std::vector<ShardPlan> plan_shards(const std::vector<std::vector<PlannedTensor>>& groups, uint64_t max_shard_bytes) {
  std::vector<ShardPlan> shards;
  for (const auto& group : groups) {
    uint64_t bytes = 0;
    for (const auto& t : group) bytes += t.n_bytes;
    if (shards.empty() || (!shards.back().tensors.empty() && shards.back().data_bytes + bytes > max_shard_bytes)) {
      shards.emplace_back();
    }
    auto& s = shards.back();
    s.tensors.insert(s.tensors.end(), group.begin(), group.end());
    s.data_bytes += bytes;
  }
  if (shards.empty()) shards.emplace_back();
  const size_t n = shards.size();
  for (size_t i = 0; i < n; ++i) {
    if (n == 1) {
      shards[i].file = "model.safetensors";
    } else {
      char name[64];
      std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", i + 1, n);
      shards[i].file = name;
    }
  }
  return shards;
}

std::string shard_index_json(const std::vector<ShardPlan>& shards) {
  nlohmann::ordered_json index;
  uint64_t total = 0;
  nlohmann::ordered_json map = nlohmann::ordered_json::object();
  for (const auto& s : shards) {
    total += s.data_bytes;
    for (const auto& t : s.tensors) map[t.name] = s.file;
  }
  index["metadata"] = {{"total_size", total}};
  index["weight_map"] = map;
  return index.dump(2) + "\n";
}

Result<SafetensorsFileWriter> SafetensorsFileWriter::create(const std::filesystem::path& path, const ShardPlan& plan) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const auto& t : plan.tensors) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.n_bytes}}};
    offset += t.n_bytes;
  }
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text += ' ';  // the data area starts 8-aligned, as the reference writer does
  SafetensorsFileWriter w;
  w.path_ = path;
  w.expected_ = offset;
  w.out_ = std::make_unique<std::ofstream>(path, std::ios::binary | std::ios::trunc);
  if (!*w.out_) return internal_error(path.string() + ": cannot create the file");
  char len[8];
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  w.out_->write(len, 8);
  w.out_->write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!*w.out_) return internal_error(path.string() + ": write failed (disk full?)");
  return w;
}

Status SafetensorsFileWriter::write(std::span<const uint8_t> bytes) {
  if (written_ + bytes.size() > expected_) {
    return invalid_argument(path_.string() + ": more tensor data than planned (" + std::to_string(expected_) +
                            " bytes)");
  }
  out_->write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!*out_) return internal_error(path_.string() + ": write failed (disk full?)");
  written_ += bytes.size();
  return Status::ok();
}

Status SafetensorsFileWriter::finish() {
  if (written_ != expected_) {
    return internal_error(path_.string() + ": " + std::to_string(written_) + " of " + std::to_string(expected_) +
                          " planned data bytes written");
  }
  out_->flush();
  out_->close();
  if (out_->fail()) return internal_error(path_.string() + ": write failed on close (disk full?)");
  return Status::ok();
}

Status prepare_checkpoint_folder(const std::filesystem::path& out, bool force, const std::filesystem::path* source) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(out, ec)) {
    fs::create_directories(out, ec);
    if (ec) return internal_error("--out " + out.string() + ": cannot create: " + ec.message());
    return Status::ok();
  }
  if (!fs::is_directory(out, ec)) return invalid_argument("--out " + out.string() + " exists and is not a folder");
  if (source != nullptr && fs::equivalent(*source, out, ec)) {
    return invalid_argument("--out " + out.string() + " is the input folder");
  }
  if (fs::is_empty(out, ec)) return Status::ok();
  if (!force) return invalid_argument("--out " + out.string() + " is not empty (pass --force to overwrite)");
  for (const auto& e : fs::directory_iterator(out, ec)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && (name.ends_with(".safetensors") || name == "model.safetensors.index.json" ||
                                name == "hf_quant_config.json" || name == "config.json")) {
      fs::remove(e.path(), ec);
    }
  }
  return Status::ok();
}

Result<std::string> read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(path.string() + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Status write_text_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return internal_error(path.string() + ": cannot write (is the folder writable?)");
  return Status::ok();
}

}  // namespace voltserve
