// Test helper: writes safetensors files (well-formed, or with a hand-written header for the malformed cases)
// into a per-test temporary folder. Used by the tests in tests/model/.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace voltserve::testing {

struct RawTensor {
  std::string name;
  std::string dtype;             // safetensors spelling
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// Header JSON + data for `tensors`, packed in order. The 8-byte length is padded so the data starts 8-aligned.
inline std::string safetensors_bytes(const std::vector<RawTensor>& tensors, const nlohmann::json& metadata = nullptr) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.is_null()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text += ' ';
  std::string out(8, '\0');
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  out += text;
  for (const auto& t : tensors) out.append(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
  return out;
}

// A file whose header is `header_text` verbatim, followed by `data_size` zero bytes.
inline std::string safetensors_with_header(const std::string& header_text, size_t data_size) {
  std::string out(8, '\0');
  const uint64_t n = header_text.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  out += header_text;
  out.append(data_size, '\0');
  return out;
}

inline void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A fresh empty folder under the build tree (or /tmp), unique per call.
inline std::filesystem::path temp_dir(const std::string& tag) {
  static std::mt19937_64 rng(std::random_device{}());
  const std::filesystem::path base = std::filesystem::temp_directory_path() / "voltserve-model-tests";
  const auto dir = base / (tag + "-" + std::to_string(rng()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

template <class T>
std::vector<uint8_t> as_bytes(const std::vector<T>& values) {
  std::vector<uint8_t> out(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

inline uint16_t float_to_bf16_bits(float f) {  // exact for bf16-representable values (truncation otherwise)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);
}

inline RawTensor f32_tensor(std::string name, std::vector<int64_t> shape, const std::vector<float>& v) {
  return {std::move(name), "F32", std::move(shape), as_bytes(v)};
}
inline RawTensor bf16_tensor(std::string name, std::vector<int64_t> shape, const std::vector<float>& v) {
  std::vector<uint16_t> bits;
  for (float f : v) bits.push_back(float_to_bf16_bits(f));
  return {std::move(name), "BF16", std::move(shape), as_bytes(bits)};
}
inline RawTensor u8_tensor(std::string name, std::string dtype, std::vector<int64_t> shape, std::vector<uint8_t> v) {
  return {std::move(name), std::move(dtype), std::move(shape), std::move(v)};
}

}  // namespace voltserve::testing
