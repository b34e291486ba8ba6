// Checkpoint: opens and validates every safetensors file of a model folder and serves typed tensor views.
#include "model/checkpoint.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/fp_formats.h"
#include "model/mapped_file.h"
#include "model/safetensors.h"

namespace voltserve {
namespace {

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

Result<std::string> read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(path.string() + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Shard names come from a file we did not write: keep them inside the model folder.
bool is_safe_relative(const std::string& name) {
  if (name.empty()) return false;
  const std::filesystem::path p(name);
  if (p.is_absolute()) return false;
  for (const auto& part : p) {
    if (part == "..") return false;
  }
  return true;
}

}  // namespace

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_to_string(std::span<const int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Result<Checkpoint> Checkpoint::open_files(const std::vector<std::filesystem::path>& files) {
  Checkpoint ckpt;
  if (!files.empty()) ckpt.dir_ = files.front().parent_path();
  for (const auto& path : files) {
    VS_ASSIGN_OR_RETURN(MappedFile mapped, MappedFile::open(path));
    VS_ASSIGN_OR_RETURN(SafetensorsHeader header, parse_safetensors_header(mapped.bytes(), path.string()));
    const size_t file_index = ckpt.files_.size();
    const std::string file_name = path.filename().string();
    for (auto& t : header.tensors) {
      Entry e;
      e.file_index = file_index;
      e.dtype_name = std::move(t.dtype_name);
      e.dtype = t.dtype;
      e.shape = std::move(t.shape);
      e.offset = header.data_offset + t.begin;
      e.n_bytes = t.end - t.begin;
      auto [it, inserted] = ckpt.entries_.emplace(t.name, std::move(e));
      if (!inserted) {
        return invalid_argument(path.string() + ": tensor '" + t.name + "' also appears in " +
                                ckpt.file_names_[it->second.file_index]);
      }
    }
    ckpt.files_.push_back(std::make_shared<const MappedFile>(std::move(mapped)));
    ckpt.file_names_.push_back(file_name);
  }
  return ckpt;
}

Result<Checkpoint> Checkpoint::open(const std::filesystem::path& model_dir) {
  const auto index_path = model_dir / kIndexFile;
  std::error_code ec;
  if (std::filesystem::exists(index_path, ec)) {
    VS_ASSIGN_OR_RETURN(std::string text, read_text(index_path));
    const nlohmann::json index = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (index.is_discarded() || !index.is_object()) {
      return invalid_argument(index_path.string() + ": not a valid JSON object");
    }
    const auto map_it = index.find("weight_map");
    if (map_it == index.end() || !map_it->is_object()) {
      return invalid_argument(index_path.string() + ": missing \"weight_map\" object");
    }
    std::vector<std::string> shard_names;
    std::set<std::string> seen;
    for (const auto& [name, shard] : map_it->items()) {
      if (!shard.is_string() || !is_safe_relative(shard.get<std::string>())) {
        return invalid_argument(index_path.string() + ": weight_map entry for '" + name +
                                "' is not a file name inside the model folder");
      }
      if (seen.insert(shard.get<std::string>()).second) shard_names.push_back(shard.get<std::string>());
    }
    if (shard_names.empty()) return invalid_argument(index_path.string() + ": weight_map is empty");
    std::vector<std::filesystem::path> paths;
    for (const auto& s : shard_names) {
      const auto p = model_dir / s;
      if (!std::filesystem::exists(p, ec)) {
        return not_found(index_path.string() + " names shard " + s + ", which does not exist in " + model_dir.string());
      }
      paths.push_back(p);
    }
    VS_ASSIGN_OR_RETURN(Checkpoint ckpt, open_files(paths));
    ckpt.dir_ = model_dir;
    // Every tensor the index promises must be in the shard it names.
    for (const auto& [name, shard] : map_it->items()) {
      const auto it = ckpt.entries_.find(name);
      const std::string shard_name = shard.get<std::string>();
      if (it == ckpt.entries_.end()) {
        return data_loss(index_path.string() + ": tensor '" + name + "' is mapped to " + shard_name +
                         ", which does not contain it");
      }
      if (std::filesystem::path(shard_name).filename().string() != ckpt.file_names_[it->second.file_index]) {
        return data_loss(index_path.string() + ": tensor '" + name + "' is mapped to " + shard_name +
                         " but found in " + ckpt.file_names_[it->second.file_index]);
      }
    }
    return ckpt;
  }
  const auto single = model_dir / kSingleFile;
  if (!std::filesystem::exists(single, ec)) {
    return not_found(model_dir.string() + ": no " + kSingleFile + " and no " + kIndexFile);
  }
  VS_ASSIGN_OR_RETURN(Checkpoint ckpt, open_files({single}));
  ckpt.dir_ = model_dir;
  return ckpt;
}

bool Checkpoint::contains(std::string_view name) const { return entries_.find(name) != entries_.end(); }

Result<TensorView> Checkpoint::tensor(std::string_view name) const {
  const auto it = entries_.find(name);
  if (it == entries_.end()) {
    std::string msg = "tensor '" + std::string(name) + "' not found in the checkpoint at " + dir_.string();
    // The usual cause is the other text prefix; say so when that name exists.
    for (std::string_view from : {"model.language_model.", "model."}) {
      if (name.substr(0, from.size()) == from) {
        const std::string_view to = from == std::string_view("model.") ? "model.language_model." : "model.";
        const std::string alt = std::string(to) + std::string(name.substr(from.size()));
        if (entries_.find(alt) != entries_.end()) msg += " (but '" + alt + "' exists)";
        break;
      }
    }
    return not_found(msg);
  }
  const Entry& e = it->second;
  const std::string& file = file_names_[e.file_index];
  if (!e.dtype) {
    return unimplemented(file + ": tensor '" + std::string(name) + "' has dtype " + e.dtype_name +
                         ", which voltserve does not read");
  }
  TensorView view;
  view.name = std::string(name);
  view.file = file;
  view.dtype = *e.dtype;
  view.shape = e.shape;
  view.data = files_[e.file_index]->bytes().data() + e.offset;
  view.n_bytes = static_cast<size_t>(e.n_bytes);
  return view;
}

Result<TensorView> Checkpoint::tensor(std::string_view name, DType dtype, std::span<const int64_t> shape) const {
  VS_ASSIGN_OR_RETURN(TensorView view, tensor(name));
  if (view.dtype != dtype) {
    return invalid_argument(view.file + ": tensor '" + view.name + "' has dtype " + dtype_name(view.dtype) +
                            ", expected " + dtype_name(dtype));
  }
  if (!std::equal(view.shape.begin(), view.shape.end(), shape.begin(), shape.end())) {
    return invalid_argument(view.file + ": tensor '" + view.name + "' has shape " + shape_to_string(view.shape) +
                            ", expected " + shape_to_string(shape));
  }
  return view;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& [name, e] : entries_) out.push_back(name);
  return out;
}

Result<std::vector<float>> to_f32(const TensorView& t) {
  const size_t n = static_cast<size_t>(t.numel());
  std::vector<float> out(n);
  const std::byte* p = t.data;
  switch (t.dtype) {
    case DType::kF32:
      std::memcpy(out.data(), p, n * 4);
      break;
    case DType::kBF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t v;
        std::memcpy(&v, p + 2 * i, 2);
        out[i] = fp::bf16_to_float(v);
      }
      break;
    case DType::kF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t v;
        std::memcpy(&v, p + 2 * i, 2);
        out[i] = fp::f16_to_float(v);
      }
      break;
    case DType::kF8E4M3:
      for (size_t i = 0; i < n; ++i) out[i] = fp::e4m3_to_float(static_cast<uint8_t>(p[i]));
      break;
    default:
      return invalid_argument(t.file + ": tensor '" + t.name + "' has dtype " + dtype_name(t.dtype) +
                              ", which has no float conversion");
  }
  return out;
}

}  // namespace voltserve
