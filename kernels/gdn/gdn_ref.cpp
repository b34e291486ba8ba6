// CPU reference of kernels/gdn (see gdn.h): the CPU backend's Gated DeltaNet mixer, fp32 throughout, token by token
// or in the chunked WY form. Tested against transformers (torch_chunk/recurrent_gated_delta_rule) through the
// golden model tests (tests/golden), and the two forms against each other.
#include <algorithm>
#include <cmath>
#include <vector>

#include "gdn/gdn.h"
#include "norm/norm.h"

namespace voltserve::kernels::gdn {
namespace {

constexpr int32_t kChunk = 64;  // chunk length of the parallel form (transformers and FLA use 64)

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }
inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// torch.nn.functional.softplus with beta 1 and threshold 20.
inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// The per-token inputs of the delta rule for one segment, after conv, L2 norms and gates.
struct Inputs {
  int32_t n_tokens = 0;
  std::vector<float> conv_out;  // [T, conv_dim]: q (scaled, normed) | k (normed) | v
  std::vector<float> beta;      // [T, n_v_heads]
  std::vector<float> g;         // [T, n_v_heads], log decay (<= 0)
};

struct HeadView {
  const Params& p;
  const Inputs& in;
  int32_t ratio;
  const float* q(int32_t t, int32_t j) const {
    return in.conv_out.data() + static_cast<int64_t>(t) * p.conv_dim() + (j / ratio) * p.head_k_dim;
  }
  const float* k(int32_t t, int32_t j) const { return q(t, j) + p.n_k_heads * p.head_k_dim; }
  const float* v(int32_t t, int32_t j) const {
    return in.conv_out.data() + static_cast<int64_t>(t) * p.conv_dim() + 2 * p.n_k_heads * p.head_k_dim +
           static_cast<int64_t>(j) * p.head_v_dim;
  }
  float beta(int32_t t, int32_t j) const { return in.beta[static_cast<size_t>(t * p.n_v_heads + j)]; }
  float g(int32_t t, int32_t j) const { return in.g[static_cast<size_t>(t * p.n_v_heads + j)]; }
};

// Where sequence s's outputs go: out(t) + j * dv for v-head j.
struct OutRows {
  float* out;
  int64_t stride;
  int64_t row0;
  float* row(int32_t t) const { return out + (row0 + t) * stride; }
};

// S[d][e] (dk x dv) is v-head j's state. ckpt (or null): after token t, S is copied to ckpt + t * ckpt_stride.
void delta_rule_sequential(const HeadView& hv, int32_t j, float* S, const OutRows& out, float* ckpt,
                           int64_t ckpt_stride) {
  const int32_t dk = hv.p.head_k_dim, dv = hv.p.head_v_dim;
  std::vector<float> u(static_cast<size_t>(dv));
  for (int32_t t = 0; t < hv.in.n_tokens; ++t) {
    const float* q = hv.q(t, j);
    const float* k = hv.k(t, j);
    const float* v = hv.v(t, j);
    const float decay = std::exp(hv.g(t, j));
    const float beta = hv.beta(t, j);
    // Decay first, then the delta correction against the decayed state, then read the output.
    for (int64_t i = 0; i < static_cast<int64_t>(dk) * dv; ++i) S[i] *= decay;
    std::fill(u.begin(), u.end(), 0.0f);
    for (int32_t d = 0; d < dk; ++d) {
      for (int32_t e = 0; e < dv; ++e) u[static_cast<size_t>(e)] += S[d * dv + e] * k[d];
    }
    for (int32_t e = 0; e < dv; ++e) u[static_cast<size_t>(e)] = beta * (v[e] - u[static_cast<size_t>(e)]);
    for (int32_t d = 0; d < dk; ++d) {
      for (int32_t e = 0; e < dv; ++e) S[d * dv + e] += k[d] * u[static_cast<size_t>(e)];
    }
    float* o = out.row(t) + static_cast<int64_t>(j) * dv;
    std::fill(o, o + dv, 0.0f);
    for (int32_t d = 0; d < dk; ++d) {
      for (int32_t e = 0; e < dv; ++e) o[e] += S[d * dv + e] * q[d];
    }
    if (ckpt != nullptr) {  // in the checkpoint layout (gdn.h ckpt_offset)
      float* ck = ckpt + t * ckpt_stride;
      for (int32_t d = 0; d < dk; ++d) {
        for (int32_t e = 0; e < dv; ++e) ck[ckpt_offset(dk, dv, d, e)] = S[d * dv + e];
      }
    }
  }
}

// The chunked (WY) form, MODEL.md §3, per chunk of L <= 64 tokens with entering state S:
//   gam = cumsum(g); A_ij = beta_i (k_i.k_j) exp(gam_i - gam_j) for j < i
//   (I + A) U = beta V;  (I + A) W = beta exp(gam) K      (forward substitution)
//   V' = U - W S;  O_i = exp(gam_i) q_i S + sum_{j<=i} (q_i.k_j) exp(gam_i - gam_j) V'_j
//   S <- exp(gam_last) S + sum_j exp(gam_last - gam_j) k_j V'_j^T
void delta_rule_chunked(const HeadView& hv, int32_t j, float* S, const OutRows& out) {
  const int32_t dk = hv.p.head_k_dim, dv = hv.p.head_v_dim;
  std::vector<float> gam(kChunk), A(kChunk * kChunk), U(static_cast<size_t>(kChunk) * dv),
      W(static_cast<size_t>(kChunk) * dk), Vn(static_cast<size_t>(kChunk) * dv);
  auto dot = [](const float* x, const float* y, int32_t n) {
    float acc = 0.0f;
    for (int32_t i = 0; i < n; ++i) acc += x[i] * y[i];
    return acc;
  };
  for (int32_t c0 = 0; c0 < hv.in.n_tokens; c0 += kChunk) {
    const int32_t L = std::min(kChunk, hv.in.n_tokens - c0);
    float acc = 0.0f;
    for (int32_t i = 0; i < L; ++i) {
      acc += hv.g(c0 + i, j);
      gam[static_cast<size_t>(i)] = acc;
    }
    for (int32_t i = 0; i < L; ++i) {
      for (int32_t t = 0; t < i; ++t) {
        A[static_cast<size_t>(i * kChunk + t)] = hv.beta(c0 + i, j) * dot(hv.k(c0 + i, j), hv.k(c0 + t, j), dk) *
                                                 std::exp(gam[static_cast<size_t>(i)] - gam[static_cast<size_t>(t)]);
      }
    }
    for (int32_t i = 0; i < L; ++i) {
      const float beta = hv.beta(c0 + i, j);
      const float eg = std::exp(gam[static_cast<size_t>(i)]);
      float* Ui = U.data() + static_cast<size_t>(i) * dv;
      float* Wi = W.data() + static_cast<size_t>(i) * dk;
      const float* vi = hv.v(c0 + i, j);
      const float* ki = hv.k(c0 + i, j);
      for (int32_t e = 0; e < dv; ++e) Ui[e] = beta * vi[e];
      for (int32_t d = 0; d < dk; ++d) Wi[d] = beta * eg * ki[d];
      for (int32_t t = 0; t < i; ++t) {
        const float a = A[static_cast<size_t>(i * kChunk + t)];
        const float* Ut = U.data() + static_cast<size_t>(t) * dv;
        const float* Wt = W.data() + static_cast<size_t>(t) * dk;
        for (int32_t e = 0; e < dv; ++e) Ui[e] -= a * Ut[e];
        for (int32_t d = 0; d < dk; ++d) Wi[d] -= a * Wt[d];
      }
      float* Vi = Vn.data() + static_cast<size_t>(i) * dv;
      for (int32_t e = 0; e < dv; ++e) Vi[e] = Ui[e];
      for (int32_t d = 0; d < dk; ++d) {
        for (int32_t e = 0; e < dv; ++e) Vi[e] -= Wi[d] * S[d * dv + e];
      }
    }
    for (int32_t i = 0; i < L; ++i) {
      const float* qi = hv.q(c0 + i, j);
      const float eg = std::exp(gam[static_cast<size_t>(i)]);
      float* o = out.row(c0 + i) + static_cast<int64_t>(j) * dv;
      std::fill(o, o + dv, 0.0f);
      for (int32_t d = 0; d < dk; ++d) {
        for (int32_t e = 0; e < dv; ++e) o[e] += eg * qi[d] * S[d * dv + e];
      }
      for (int32_t t = 0; t <= i; ++t) {
        const float w = dot(qi, hv.k(c0 + t, j), dk) *
                        std::exp(gam[static_cast<size_t>(i)] - gam[static_cast<size_t>(t)]);
        const float* Vt = Vn.data() + static_cast<size_t>(t) * dv;
        for (int32_t e = 0; e < dv; ++e) o[e] += w * Vt[e];
      }
    }
    const float g_last = gam[static_cast<size_t>(L - 1)];
    const float e_last = std::exp(g_last);
    for (int64_t i = 0; i < static_cast<int64_t>(dk) * dv; ++i) S[i] *= e_last;
    for (int32_t t = 0; t < L; ++t) {
      const float w = std::exp(g_last - gam[static_cast<size_t>(t)]);
      const float* kt = hv.k(c0 + t, j);
      const float* Vt = Vn.data() + static_cast<size_t>(t) * dv;
      for (int32_t d = 0; d < dk; ++d) {
        const float wk = w * kt[d];
        for (int32_t e = 0; e < dv; ++e) S[d * dv + e] += wk * Vt[e];
      }
    }
  }
}

}  // namespace

void gdn_ref(const Params& p, const RefArgs& a) {
  const int32_t conv_dim = p.conv_dim();
  const int32_t K = p.conv_kernel;
  const int32_t hist = K - 1;
  const int32_t ratio = p.n_v_heads / p.n_k_heads;
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(p.head_k_dim));
  const int64_t state_size = p.recurrent_state_size();
  const int64_t head_state = static_cast<int64_t>(p.head_k_dim) * p.head_v_dim;

  for (int32_t si = 0; si < a.n_seqs; ++si) {
    const SeqDesc& s = a.seqs[si];
    const int32_t T = s.n_tokens;
    if (T <= 0) continue;
    const bool ckpt = s.ckpt >= 0 && a.state.recurrent_ckpt != nullptr;
    const int64_t ckpt_row0 = ckpt ? static_cast<int64_t>(s.ckpt) * a.state.max_ckpt_tokens : 0;
    Inputs in;
    in.n_tokens = T;
    in.conv_out.assign(static_cast<size_t>(T) * conv_dim, 0.0f);
    in.beta.resize(static_cast<size_t>(T) * p.n_v_heads);
    in.g.resize(static_cast<size_t>(T) * p.n_v_heads);
    float* conv_state = a.state.conv + static_cast<int64_t>(s.slot) * p.conv_state_width();  // [channel][tap]

    // Causal depthwise conv over [cached K-1 inputs | this segment's inputs], then SiLU; then advance the state.
    run_parallel(a.parallel, conv_dim, 64, [&](int64_t c0, int64_t c1) {
      std::vector<float> window(static_cast<size_t>(hist + T));
      for (int64_t c = c0; c < c1; ++c) {
        float* st = conv_state + c * hist;
        std::copy_n(st, hist, window.begin());
        for (int32_t t = 0; t < T; ++t) window[static_cast<size_t>(hist + t)] = a.qkv[(s.row0 + t) * a.qkv_stride + c];
        const float* wc = a.w.conv + c * K;
        for (int32_t t = 0; t < T; ++t) {
          float acc = 0.0f;
          for (int32_t tap = 0; tap < K; ++tap) acc += wc[tap] * window[static_cast<size_t>(t + tap)];
          in.conv_out[static_cast<size_t>(t) * conv_dim + c] = silu(acc);
          if (ckpt) {  // the conv state after token t: the K-1 inputs ending at t
            std::copy_n(window.begin() + t + 1, hist,
                        a.state.conv_ckpt + (ckpt_row0 + t) * p.conv_state_width() + c * hist);
          }
        }
        std::copy_n(window.begin() + T, hist, st);
      }
    });

    // L2 norm of each q and k head (eps 1e-6 inside the sqrt), q scaled after the norm; beta and g in fp32.
    for (int32_t t = 0; t < T; ++t) {
      float* row = in.conv_out.data() + static_cast<size_t>(t) * conv_dim;
      for (int32_t h = 0; h < 2 * p.n_k_heads; ++h) {
        float* x = row + h * p.head_k_dim;
        float sum_sq = 0.0f;
        for (int32_t d = 0; d < p.head_k_dim; ++d) sum_sq += x[d] * x[d];
        const float inv = 1.0f / std::sqrt(sum_sq + 1e-6f);
        const float mul = h < p.n_k_heads ? inv * q_scale : inv;
        for (int32_t d = 0; d < p.head_k_dim; ++d) x[d] *= mul;
      }
      for (int32_t j = 0; j < p.n_v_heads; ++j) {
        const size_t idx = static_cast<size_t>(t * p.n_v_heads + j);
        in.beta[idx] = sigmoid(a.b[(s.row0 + t) * a.b_stride + j]);
        in.g[idx] = -std::exp(a.w.a_log[j]) * softplus(a.a[(s.row0 + t) * a.a_stride + j] + a.w.dt_bias[j]);
      }
    }

    const bool chunked =
        !ckpt && (a.mode == Mode::kChunked || (a.mode == Mode::kAuto && T > kChunk));
    const HeadView hv{p, in, ratio};
    const OutRows out{a.out, a.out_stride, s.row0};
    run_parallel(a.parallel, p.n_v_heads, 1, [&](int64_t j0, int64_t j1) {
      for (int64_t j = j0; j < j1; ++j) {
        float* S = a.state.recurrent + static_cast<int64_t>(s.slot) * state_size + j * head_state;
        if (chunked) {
          delta_rule_chunked(hv, static_cast<int32_t>(j), S, out);
        } else {
          float* ck = ckpt ? a.state.recurrent_ckpt + ckpt_row0 * state_size + j * head_state : nullptr;
          delta_rule_sequential(hv, static_cast<int32_t>(j), S, out, ck, state_size);
        }
      }
    });

    // Gated RMSNorm per v-head: normalise, multiply by the plain weight, then by silu(z).
    for (int32_t t = 0; t < T; ++t) {
      float* o = out.row(t);
      const float* zr = a.z + (s.row0 + t) * a.z_stride;
      for (int32_t j = 0; j < p.n_v_heads; ++j) {
        float* oh = o + static_cast<int64_t>(j) * p.head_v_dim;
        norm::rms_norm_row_ref(oh, a.w.norm_weight, p.head_v_dim, p.rms_norm_eps, oh);
        for (int32_t e = 0; e < p.head_v_dim; ++e) oh[e] *= silu(zr[j * p.head_v_dim + e]);
      }
    }
  }
}

void commit_ref(const Params& p, const State& s, const Commit* commits, int32_t n_commits) {
  for (int32_t i = 0; i < n_commits; ++i) {
    const Commit& c = commits[i];
    // Skipped as the device commit skips them (gdn_blocks.h commit_block).
    if (c.slot < 0 || c.ckpt < 0 || c.index < 0 || c.index >= s.max_ckpt_tokens) continue;
    const int64_t row = static_cast<int64_t>(c.ckpt) * s.max_ckpt_tokens + c.index;
    std::copy_n(s.conv_ckpt + row * p.conv_state_width(), p.conv_state_width(),
                s.conv + static_cast<int64_t>(c.slot) * p.conv_state_width());
    const int32_t dk = p.head_k_dim, dv = p.head_v_dim;
    for (int32_t j = 0; j < p.n_v_heads; ++j) {
      const int64_t head = static_cast<int64_t>(j) * dk * dv;
      const float* src = s.recurrent_ckpt + row * p.recurrent_state_size() + head;
      float* dst = s.recurrent + static_cast<int64_t>(c.slot) * p.recurrent_state_size() + head;
      for (int32_t d = 0; d < dk; ++d) {
        for (int32_t e = 0; e < dv; ++e) dst[d * dv + e] = src[ckpt_offset(dk, dv, d, e)];
      }
    }
  }
}

}  // namespace voltserve::kernels::gdn
