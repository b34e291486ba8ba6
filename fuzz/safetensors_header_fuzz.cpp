// libFuzzer target: the safetensors header parser on arbitrary bytes. Every accepted header must describe
// tensors that lie inside the buffer, which the harness checks by reading each one (ASan catches any overrun).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "model/checkpoint.h"
#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
  auto header = voltserve::parse_safetensors_header(file, "fuzz.safetensors");
  if (!header.is_ok()) {
    if (header.status().message().empty()) std::abort();  // every rejection must say why
    return 0;
  }
  for (const auto& t : header->tensors) {
    if (t.begin > t.end || header->data_offset + t.end > size) std::abort();
    if (!t.dtype) continue;
    voltserve::TensorView view;
    view.name = t.name;
    view.file = "fuzz.safetensors";
    view.dtype = *t.dtype;
    view.shape = t.shape;
    view.data = file.data() + header->data_offset + t.begin;
    view.n_bytes = static_cast<size_t>(t.end - t.begin);
    if (static_cast<size_t>(view.numel()) * voltserve::dtype_size_bytes(view.dtype) != view.n_bytes) std::abort();
    if (view.n_bytes <= (1u << 20)) (void)voltserve::to_f32(view);
  }
  return 0;
}
