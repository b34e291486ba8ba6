// CPU reference of kernels/attention (see attention.h): the CPU backend's gated attention, fp32 throughout.
// Tested against transformers' eager attention through the golden model tests (tests/golden).
#include <algorithm>
#include <cmath>
#include <vector>

#include "attention/attention.h"
#include "norm/norm.h"

namespace voltserve::kernels::attention {
namespace {

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
  auto cache_row = [&](float* cache, const SeqDesc& s, int32_t pos) {
    const int32_t page = a.page_table[s.page_offset + pos / p.page_size];
    return cache + (static_cast<int64_t>(page) * p.page_size + pos % p.page_size) * kv_width;
  };

  // 1. Normalise, rotate and store this step's keys and values into the pages.
  for (int32_t si = 0; si < a.n_seqs; ++si) {
    const SeqDesc& s = a.seqs[si];
    run_parallel(a.parallel, s.n_tokens, 8, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int32_t pos = s.n_past + static_cast<int32_t>(t);
        const int64_t row = s.row0 + t;
        float* kd = cache_row(a.k_cache, s, pos);
        float* vd = cache_row(a.v_cache, s, pos);
        for (int32_t g = 0; g < p.n_kv_heads; ++g) {
          norm::rms_norm_row_ref(a.k + row * a.k_stride + g * hd, a.k_norm, hd, p.rms_norm_eps, kd + g * hd);
          rope_neox(kd + g * hd, p.rotary_dim, inv_freq, pos);
        }
        std::copy_n(a.v + row * a.v_stride, kv_width, vd);
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
          const float* kj = cache_row(a.k_cache, s, j) + g * hd;
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
          const float* vj = cache_row(a.v_cache, s, j) + g * hd;
          for (int32_t d = 0; d < hd; ++d) o[d] += pj * vj[d];
        }
        // Output gate: sigmoid of the raw (un-normed, un-rotated) gate half of q_proj.
        for (int32_t d = 0; d < hd; ++d) o[d] *= 1.0f / (1.0f + std::exp(-gate[d]));
      }
    });
  }
}

}  // namespace voltserve::kernels::attention
