// CPU reference of kernels/attention (see attention.h): the CPU backend's gated attention, fp32 arithmetic over a KV
// cache stored in fp32, fp16, bf16 or e4m3 (common/e4m3_codec.h, the device form's encoder).
// Tested against transformers' eager attention through the golden model tests (tests/golden).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "attention/attention.h"
#include "common/e4m3_codec.h"
#include "common/fp_formats.h"
#include "norm/norm.h"

namespace voltserve::kernels::attention {
namespace {

// bf16 with round to nearest even (NaN kept quiet).
uint16_t float_to_bf16(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((b >> 16) | 0x40u);
  return static_cast<uint16_t>((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}

// One layer's paged K or V memory in its stored dtype: n elements of a row written from / read into fp32.
struct CacheView {
  void* base;
  DType dtype;
  float scale;  // kF8E4M3: stored = e4m3(x / scale)
  int64_t width;

  void store(int64_t row, int64_t col, const float* x, int64_t n) const {
    const int64_t o = row * width + col;
    switch (dtype) {
      case DType::kF16:
        for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(base)[o + i] = fp::float_to_f16(x[i]);
        break;
      case DType::kBF16:
        for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(base)[o + i] = float_to_bf16(x[i]);
        break;
      case DType::kF8E4M3:
        for (int64_t i = 0; i < n; ++i) static_cast<uint8_t*>(base)[o + i] = fp::float_to_e4m3(x[i] / scale);
        break;
      default:
        std::copy_n(x, n, static_cast<float*>(base) + o);
        break;
    }
  }
  // The values as stored, in fp32: a pointer into the cache (fp32) or into tmp (decoded).
  const float* load(int64_t row, int64_t col, int64_t n, float* tmp) const {
    const int64_t o = row * width + col;
    switch (dtype) {
      case DType::kF16:
        for (int64_t i = 0; i < n; ++i) tmp[i] = fp::f16_to_float(static_cast<const uint16_t*>(base)[o + i]);
        return tmp;
      case DType::kBF16:
        for (int64_t i = 0; i < n; ++i) tmp[i] = fp::bf16_to_float(static_cast<const uint16_t*>(base)[o + i]);
        return tmp;
      case DType::kF8E4M3: {
        static const std::array<float, 256> kDecode = [] {
          std::array<float, 256> t{};
          for (int c = 0; c < 256; ++c) t[static_cast<size_t>(c)] = fp::e4m3_to_float(static_cast<uint8_t>(c));
          return t;
        }();
        const auto* codes = static_cast<const uint8_t*>(base) + o;
        for (int64_t i = 0; i < n; ++i) tmp[i] = kDecode[codes[i]] * scale;
        return tmp;
      }
      default:
        return static_cast<const float*>(base) + o;
    }
  }
};

// Rotates x[0 .. rotary_dim) in place with NeoX pairs (j, j + rotary_dim / 2); the rest of x passes through.
// inv_freq and the angle are fp32 like transformers (cos/sin of pos * inv_freq computed in fp32).
void rope_neox(float* x, int32_t rotary_dim, const std::vector<float>& inv_freq, int32_t pos) {
  const int32_t half = rotary_dim / 2;
  for (int32_t j = 0; j < half; ++j) {
    const float theta = static_cast<float>(pos) * inv_freq[static_cast<size_t>(j)];
    const float c = std::cos(theta), s = std::sin(theta);
    const float x0 = x[j], x1 = x[j + half];
    x[j] = x0 * c - x1 * s;
    x[j + half] = x1 * c + x0 * s;
  }
}

}  // namespace

void gated_attention_ref(const Params& p, const RefArgs& a) {
  const int32_t hd = p.head_dim;
  const int32_t group = p.n_heads / p.n_kv_heads;  // q heads per kv head (repeat_kv: consecutive q heads share)
  const int64_t kv_width = static_cast<int64_t>(p.n_kv_heads) * hd;
  std::vector<float> inv_freq(static_cast<size_t>(p.rotary_dim / 2));
  for (int32_t j = 0; j < p.rotary_dim / 2; ++j) {
    const float exponent = static_cast<float>(2 * j) / static_cast<float>(p.rotary_dim);
    inv_freq[static_cast<size_t>(j)] = 1.0f / std::pow(p.rope_theta, exponent);
  }
  auto cache_row = [&](const SeqDesc& s, int32_t pos) {
    const int32_t page = a.page_table[s.page_offset + pos / p.page_size];
    return static_cast<int64_t>(page) * p.page_size + pos % p.page_size;
  };
  const CacheView kc{a.k_cache, a.cache_dtype, a.k_scale, kv_width};
  const CacheView vc{a.v_cache, a.cache_dtype, a.v_scale, kv_width};

  // 1. Normalise, rotate and store this step's keys and values into the pages.
  for (int32_t si = 0; si < a.n_seqs; ++si) {
    const SeqDesc& s = a.seqs[si];
    run_parallel(a.parallel, s.n_tokens, 8, [&](int64_t t0, int64_t t1) {
      std::vector<float> kd(static_cast<size_t>(kv_width));
      for (int64_t t = t0; t < t1; ++t) {
        const int32_t pos = s.n_past + static_cast<int32_t>(t);
        const int64_t row = s.row0 + t;
        for (int32_t g = 0; g < p.n_kv_heads; ++g) {
          norm::rms_norm_row_ref(a.k + row * a.k_stride + g * hd, a.k_norm, hd, p.rms_norm_eps, kd.data() + g * hd);
          rope_neox(kd.data() + g * hd, p.rotary_dim, inv_freq, pos);
        }
        const int64_t crow = cache_row(s, pos);
        kc.store(crow, 0, kd.data(), kv_width);
        vc.store(crow, 0, a.v + row * a.v_stride, kv_width);
      }
    });
  }

  // 2. Each (token, head) attends over positions 0..pos of its sequence.
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int32_t si = 0; si < a.n_seqs; ++si) {
    const SeqDesc& s = a.seqs[si];
    const int64_t n_items = static_cast<int64_t>(s.n_tokens) * p.n_heads;
    run_parallel(a.parallel, n_items, 4, [&](int64_t i0, int64_t i1) {
      std::vector<float> q(static_cast<size_t>(hd));
      std::vector<float> tmp(static_cast<size_t>(hd));
      std::vector<float> scores(static_cast<size_t>(s.n_past + s.n_tokens));
      for (int64_t item = i0; item < i1; ++item) {
        const int64_t t = item / p.n_heads;
        const int32_t h = static_cast<int32_t>(item % p.n_heads);
        const int32_t g = h / group;
        const int32_t pos = s.n_past + static_cast<int32_t>(t);
        const int64_t row = s.row0 + t;
        const float* qh = a.qg + row * a.qg_stride + static_cast<int64_t>(h) * 2 * hd;  // [query | gate] per head
        const float* gate = qh + hd;
        norm::rms_norm_row_ref(qh, a.q_norm, hd, p.rms_norm_eps, q.data());
        rope_neox(q.data(), p.rotary_dim, inv_freq, pos);

        float max_score = -INFINITY;
        for (int32_t j = 0; j <= pos; ++j) {
          const float* kj = kc.load(cache_row(s, j), static_cast<int64_t>(g) * hd, hd, tmp.data());
          float dot = 0.0f;
          for (int32_t d = 0; d < hd; ++d) dot += q[static_cast<size_t>(d)] * kj[d];
          scores[static_cast<size_t>(j)] = dot * scale;
          max_score = std::max(max_score, scores[static_cast<size_t>(j)]);
        }
        float denom = 0.0f;
        for (int32_t j = 0; j <= pos; ++j) {
          scores[static_cast<size_t>(j)] = std::exp(scores[static_cast<size_t>(j)] - max_score);
          denom += scores[static_cast<size_t>(j)];
        }
        float* o = a.out + row * a.out_stride + static_cast<int64_t>(h) * hd;
        std::fill(o, o + hd, 0.0f);
        for (int32_t j = 0; j <= pos; ++j) {
          const float pj = scores[static_cast<size_t>(j)] / denom;
          const float* vj = vc.load(cache_row(s, j), static_cast<int64_t>(g) * hd, hd, tmp.data());
          for (int32_t d = 0; d < hd; ++d) o[d] += pj * vj[d];
        }
        // Output gate: sigmoid of the raw (un-normed, un-rotated) gate half of q_proj.
        for (int32_t d = 0; d < hd; ++d) o[d] *= 1.0f / (1.0f + std::exp(-gate[d]));
      }
    });
  }
}

}  // namespace voltserve::kernels::attention
