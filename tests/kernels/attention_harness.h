// Test harness of the device form of gated attention, shared by the GPU test (attention_gpu_test.cpp, CUDA memory and
// gated_attention) and the CPU test (attention_emu_test.cpp, host memory and the kernels run by the SIMT emulator),
// so the CPU run proves the same cases and checks the GPU run makes. A case is a paged KV pool shared by several
// sequences (interleaved pages, in ascending, descending or random order), an optional first call that fills the
// context through the op itself, and the checked call. Every call is checked against the CPU reference
// (attention_ref.cpp, fp32 cache) and against an fp64 oracle that reads the device's own fp16 cache; the cache rows
// the call wrote (key within one fp16 ulp of the reference, value bit-exact), every other cache row unchanged, every
// output element of the sequences' rows written and nothing else, no NaN, guard bytes after the outputs, caches and
// workspace. Optionally each sequence runs again alone (other rows, other bounds) and must give the same bits.
#pragma once

#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "kernels/attention/attention.h"
#include "kernels/attention/attention_math.h"
#include "kernels/common/fp_formats.h"
#include "linear_random.h"
#include "support/tolerances.h"

namespace voltserve::test::attn {

namespace ka = voltserve::kernels::attention;
namespace kd = voltserve::kernels::attention::detail;
using voltserve::DType;
using voltserve::kernels::HostParallel;
using voltserve::kernels::KernelCode;
using voltserve::kernels::KernelStatus;
using voltserve::kernels::SeqDesc;

// Device memory and the op: CUDA (GPU test) or host memory and the SIMT emulator (CPU test).
class Device {
 public:
  virtual ~Device() = default;
  virtual void* alloc(size_t bytes) = 0;  // 256-byte aligned
  virtual void release(void* p) = 0;
  virtual void upload(void* dst, const void* src, size_t bytes) = 0;
  virtual void download(void* dst, const void* src, size_t bytes) = 0;
  virtual void fill(void* dst, uint8_t byte, size_t bytes) = 0;
  // Runs the op and waits for it; a launch or execution error comes back as the status.
  virtual KernelStatus run(const ka::Params& p, const ka::DeviceArgs& a) = 0;
};

inline constexpr size_t kGuard = 256;
inline constexpr uint8_t kGuardByte = 0xA5;
inline constexpr uint8_t kPoisonByte = 0xFF;  // fp16 0xFFFF and fp32 0xFFFFFFFF are NaN

// A device buffer of `bytes` followed by kGuard guard bytes.
class Buf {
 public:
  Buf(Device& dev, size_t bytes) : dev_(dev), bytes_(bytes) {
    p_ = dev_.alloc(bytes + kGuard);
    REQUIRE(p_ != nullptr);
    dev_.fill(static_cast<char*>(p_) + bytes, kGuardByte, kGuard);
  }
  ~Buf() { dev_.release(p_); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  void* get() const { return p_; }
  size_t bytes() const { return bytes_; }
  bool guard_ok() const {
    std::vector<uint8_t> g(kGuard);
    dev_.download(g.data(), static_cast<const char*>(p_) + bytes_, kGuard);
    return std::all_of(g.begin(), g.end(), [](uint8_t b) { return b == kGuardByte; });
  }
  template <class T>
  void put(const std::vector<T>& v) {
    REQUIRE(v.size() * sizeof(T) <= bytes_);
    dev_.upload(p_, v.data(), v.size() * sizeof(T));
  }
  template <class T>
  std::vector<T> get_all() const {
    std::vector<T> v(bytes_ / sizeof(T));
    dev_.download(v.data(), p_, v.size() * sizeof(T));
    return v;
  }

 private:
  Device& dev_;
  size_t bytes_;
  void* p_ = nullptr;
};

// The reference's and the oracle's threads.
class ThreadPool : public HostParallel {
 public:
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body) const override {
    const int64_t hw = std::max<int64_t>(1, std::thread::hardware_concurrency());
    const int64_t parts = std::clamp<int64_t>(n / std::max<int64_t>(1, grain), 1, hw);
    if (parts == 1) {
      body(0, n);
      return;
    }
    std::vector<std::thread> threads;
    for (int64_t i = 0; i < parts; ++i) {
      const int64_t b = n * i / parts, e = n * (i + 1) / parts;
      threads.emplace_back([&body, b, e] { body(b, e); });
    }
    for (auto& t : threads) t.join();
  }
};

struct Shape {
  std::string name;
  ka::Params p;
};

inline Shape make_shape(const std::string& name, int32_t heads, int32_t kv_heads, int32_t head_dim, int32_t rotary,
                        float theta, int32_t page) {
  Shape s;
  s.name = name;
  s.p.n_heads = heads;
  s.p.n_kv_heads = kv_heads;
  s.p.head_dim = head_dim;
  s.p.rotary_dim = rotary;
  s.p.rope_theta = theta;
  s.p.rms_norm_eps = 1e-6f;
  s.p.page_size = page;
  return s;
}
inline Shape shape_27b() { return make_shape("27b", 24, 4, 256, 64, 1e7f, 16); }
// The tiny fixture models (tests/fixtures/models): head_dim 32, 4 q / 2 kv heads, partial rotary 0.25 or 0.5.
inline Shape shape_tiny(int32_t rotary) { return make_shape("tiny-r" + std::to_string(rotary), 4, 2, 32, rotary, 1e4f, 16); }

// How positions [0, n_past) get into the cache before the checked call: kCall runs the op over them first (a
// checked call of its own); kDirect keeps the pool's random fp16 keys and values there (for contexts whose O(n^2)
// reference prefill would take too long).
enum class Fill { kCall, kDirect };
enum class PageOrder { kAscending, kDescending, kRandom };

struct SeqSpec {
  int32_t n_past = 0;
  int32_t n_tokens = 1;  // 0: a padding entry
  Fill fill = Fill::kCall;
};

struct CaseSpec {
  std::string name;
  Shape shape;
  std::vector<SeqSpec> seqs;
  PageOrder order = PageOrder::kRandom;
  DType out_dtype = DType::kF16;
  uint64_t seed = 1;
  int32_t row_gap = 0;           // unused rows between the sequences' rows (must stay untouched)
  int32_t extra_rows = 0;        // n_rows above the rows used
  int32_t extra_seq_tokens = 0;  // max_seq_tokens above the largest segment
  int32_t extra_context = 0;     // max_context above the largest context
  int32_t stride_pad = 0;        // elements after every qg / k / v / out row
  bool invariance = false;       // also run each sequence alone and compare bit for bit
  // Also decode each decode-path sequence's rows one at a time (row t at n_past + t, as plain decoding would) and
  // compare with the batched call's rows bit for bit (a verify pass must reproduce plain decoding).
  bool sequential = false;
};

inline const char* order_name(PageOrder o) {
  return o == PageOrder::kAscending ? "asc" : o == PageOrder::kDescending ? "desc" : "random";
}

inline std::string seqs_text(const std::vector<SeqSpec>& seqs) {
  std::string s;
  for (const SeqSpec& q : seqs) {
    if (!s.empty()) s += ",";
    if (q.n_tokens == 0) {
      s += "pad";
      continue;
    }
    s += std::to_string(q.n_past) + (q.fill == Fill::kDirect && q.n_past > 0 ? "d" : "") + "+" +
         std::to_string(q.n_tokens);
  }
  return s;
}

inline double normalised_error(const std::vector<double>& dev, const std::vector<double>& ref) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < dev.size(); ++i) {
    num += (dev[i] - ref[i]) * (dev[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return den > 0.0 ? num / den : num;
}

// One call of the op, host side.
struct Call {
  std::vector<SeqDesc> seqs;  // as uploaded, padding entries included
  std::vector<int> spec;      // spec index of each entry
  int32_t n_rows = 0, max_seq_tokens = 0, max_context = 0;
  int64_t qg_stride = 0, k_stride = 0, v_stride = 0, out_stride = 0;
  std::vector<float> qg, k, v;
};

class Runner {
 public:
  Runner(Device& dev, const CaseSpec& c)
      : dev_(dev), c_(c), p_(c.shape.p), rng_(c.seed), hd_(p_.head_dim), kv_width_(int64_t{p_.n_kv_heads} * hd_) {
    // Pages: each sequence's context, drawn round-robin from one shuffled pool (sequences interleave), plus spare
    // pages nobody uses; each sequence's list then ordered by c.order.
    const size_t n = c_.seqs.size();
    std::vector<int32_t> need(n);
    int32_t total = 0;
    for (size_t i = 0; i < n; ++i) {
      const SeqSpec& s = c_.seqs[i];
      need[i] = s.n_tokens == 0 ? 0 : (s.n_past + s.n_tokens + p_.page_size - 1) / p_.page_size;
      total += need[i];
    }
    n_pages_ = total + std::max(3, total / 4);
    std::vector<int32_t> perm(static_cast<size_t>(n_pages_));
    std::iota(perm.begin(), perm.end(), 0);
    for (size_t i = perm.size(); i > 1; --i) std::swap(perm[i - 1], perm[rng_.next() % i]);
    pages_.assign(n, {});
    size_t next = 0;
    for (bool more = true; more;) {
      more = false;
      for (size_t i = 0; i < n; ++i) {
        if (static_cast<int32_t>(pages_[i].size()) < need[i]) {
          pages_[i].push_back(perm[next++]);
          more = true;
        }
      }
    }
    for (auto& pl : pages_) {
      if (c_.order == PageOrder::kAscending) std::sort(pl.begin(), pl.end());
      if (c_.order == PageOrder::kDescending) std::sort(pl.rbegin(), pl.rend());
    }
    for (size_t i = 0; i < n; ++i) {
      page_offset_.push_back(static_cast<int32_t>(page_table_.size()));
      page_table_.insert(page_table_.end(), pages_[i].begin(), pages_[i].end());
    }
    if (page_table_.empty()) page_table_.push_back(0);
    // Caches: random fp16 everywhere (the reference holds the same values in fp32).
    cache_elems_ = static_cast<size_t>(n_pages_) * p_.page_size * kv_width_;
    mirror_k_.resize(cache_elems_);
    mirror_v_.resize(cache_elems_);
    ref_k_.resize(cache_elems_);
    ref_v_.resize(cache_elems_);
    for (size_t i = 0; i < cache_elems_; ++i) {
      mirror_k_[i] = fp::float_to_f16(static_cast<float>(rng_.uniform() * 3.4 - 1.7));
      mirror_v_[i] = fp::float_to_f16(static_cast<float>(rng_.uniform() * 2.0 - 1.0));
      ref_k_[i] = fp::f16_to_float(mirror_k_[i]);
      ref_v_[i] = fp::f16_to_float(mirror_v_[i]);
    }
    q_norm_.resize(static_cast<size_t>(hd_));
    k_norm_.resize(static_cast<size_t>(hd_));
    for (auto& w : q_norm_) w = static_cast<float>(0.6 + rng_.uniform());
    for (auto& w : k_norm_) w = static_cast<float>(0.6 + rng_.uniform());
  }

  // The whole case; returns true when every check passed (each failure is also a Catch2 CHECK failure).
  bool run() {
    INFO("case " << label());
    k_cache_ = std::make_unique<Buf>(dev_, cache_elems_ * 2);
    v_cache_ = std::make_unique<Buf>(dev_, cache_elems_ * 2);
    k_cache_->put(mirror_k_);
    v_cache_->put(mirror_v_);
    d_q_norm_ = std::make_unique<Buf>(dev_, q_norm_.size() * 4);
    d_k_norm_ = std::make_unique<Buf>(dev_, k_norm_.size() * 4);
    d_q_norm_->put(q_norm_);
    d_k_norm_->put(k_norm_);
    d_pages_ = std::make_unique<Buf>(dev_, page_table_.size() * 4);
    d_pages_->put(page_table_);
    bool ok = true;
    // The fill call: sequences with a context to compute get it as one segment at n_past = 0; the others are
    // padding entries in it.
    bool any_fill = false;
    std::vector<SeqSpec> fill_specs;
    for (const SeqSpec& s : c_.seqs) {
      const bool f = s.n_tokens > 0 && s.fill == Fill::kCall && s.n_past > 0;
      any_fill |= f;
      fill_specs.push_back(SeqSpec{0, f ? s.n_past : 0, Fill::kCall});
    }
    if (any_fill) {
      Call fill = make_call(fill_specs, 0);
      std::vector<uint8_t> out;
      ok &= run_call(fill, "fill", &out);
    }
    Call main = make_call(c_.seqs, 0);
    const std::vector<uint16_t> before_k = mirror_k_, before_v = mirror_v_;
    std::vector<uint8_t> out;
    ok &= run_call(main, "", &out);
    if (c_.invariance) ok &= check_invariance(main, out, before_k, before_v);
    if (c_.sequential) ok &= check_sequential(main, out, before_k, before_v);
    return ok;
  }

  std::string label() const {
    const ka::Params& p = p_;
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s H%d/KV%d D%d R%d P%d", c_.shape.name.c_str(), p.n_heads, p.n_kv_heads,
                  p.head_dim, p.rotary_dim, p.page_size);
    return std::string("attention ") + buf + " " + c_.name + " seqs=" + seqs_text(c_.seqs) + " pages=" +
           order_name(c_.order) + " out=" + (c_.out_dtype == DType::kF16 ? "f16" : "f32");
  }

 private:
  int64_t qg_width() const { return int64_t{p_.n_heads} * 2 * hd_; }
  int64_t out_width() const { return int64_t{p_.n_heads} * hd_; }
  size_t out_esize() const { return c_.out_dtype == DType::kF16 ? 2 : 4; }

  int64_t cache_row(const SeqDesc& s, int32_t pos) const {
    return kd::cache_row(page_table_.data(), s.page_offset, p_.page_size, pos);
  }

  // A call over `specs` (same order and pages as the case's sequences); row0 is assigned in a shuffled order with
  // gaps; `first_row` moves every sequence's rows.
  Call make_call(const std::vector<SeqSpec>& specs, int32_t first_row) {
    Call call;
    std::vector<int> order;
    for (size_t i = 0; i < specs.size(); ++i)
      if (specs[i].n_tokens > 0) order.push_back(static_cast<int>(i));
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng_.next() % i]);
    std::vector<int32_t> row0(specs.size(), 0);
    int32_t row = first_row;
    for (int i : order) {
      row0[static_cast<size_t>(i)] = row;
      row += specs[static_cast<size_t>(i)].n_tokens + c_.row_gap;
    }
    int32_t max_tokens = 1, max_ctx = 1;
    for (size_t i = 0; i < specs.size(); ++i) {
      const SeqSpec& s = specs[i];
      SeqDesc d;
      if (s.n_tokens > 0) {
        d.row0 = row0[i];
        d.n_tokens = s.n_tokens;
        d.n_past = s.n_past;
        d.page_offset = page_offset_[i];
        max_tokens = std::max(max_tokens, s.n_tokens);
        max_ctx = std::max(max_ctx, s.n_past + s.n_tokens);
      } else {  // padding: the other fields hold nonsense the kernels must not act on
        d.row0 = 1 << 20;
        d.n_tokens = 0;
        d.n_past = 99999;
        d.page_offset = 1 << 20;
      }
      call.seqs.push_back(d);
      call.spec.push_back(static_cast<int>(i));
    }
    call.n_rows = row + c_.extra_rows;
    call.max_seq_tokens = max_tokens + c_.extra_seq_tokens;
    call.max_context = max_ctx + c_.extra_context;
    call.qg_stride = qg_width() + c_.stride_pad;
    call.k_stride = kv_width_ + c_.stride_pad;
    call.v_stride = kv_width_ + c_.stride_pad;
    call.out_stride = out_width() + c_.stride_pad;
    call.qg.resize(static_cast<size_t>(call.n_rows * call.qg_stride));
    call.k.resize(static_cast<size_t>(call.n_rows * call.k_stride));
    call.v.resize(static_cast<size_t>(call.n_rows * call.v_stride));
    for (int64_t r = 0; r < call.n_rows; ++r) {
      for (int32_t h = 0; h < p_.n_heads; ++h) {
        const double f = 0.3 + 2.7 * rng_.uniform();  // the norm must remove any scale
        float* q = call.qg.data() + r * call.qg_stride + int64_t{h} * 2 * hd_;
        for (int32_t d = 0; d < hd_; ++d) q[d] = static_cast<float>((rng_.uniform() * 2.0 - 1.0) * f);
        for (int32_t d = 0; d < hd_; ++d) q[hd_ + d] = static_cast<float>(rng_.uniform() * 8.0 - 4.0);
      }
      for (int64_t i = qg_width(); i < call.qg_stride; ++i) call.qg[static_cast<size_t>(r * call.qg_stride + i)] = 1e30f;
      for (int32_t g = 0; g < p_.n_kv_heads; ++g) {
        const double f = 0.3 + 2.7 * rng_.uniform();
        for (int32_t d = 0; d < hd_; ++d) {
          call.k[static_cast<size_t>(r * call.k_stride + int64_t{g} * hd_ + d)] =
              static_cast<float>((rng_.uniform() * 2.0 - 1.0) * f);
          call.v[static_cast<size_t>(r * call.v_stride + int64_t{g} * hd_ + d)] =
              static_cast<float>(rng_.uniform() * 3.0 - 1.5);
        }
      }
      for (int64_t i = kv_width_; i < call.k_stride; ++i) {
        call.k[static_cast<size_t>(r * call.k_stride + i)] = 1e30f;
        call.v[static_cast<size_t>(r * call.v_stride + i)] = 1e30f;
      }
    }
    return call;
  }

  // The fp64 oracle: q normed and rotated in fp32 as the reference does (attention_math.h helpers), keys and values
  // from the given fp16 cache, softmax, output and gate in fp64. Rows of the call's sequences only (others 0).
  std::vector<double> oracle(const Call& call, const std::vector<uint16_t>& kc, const std::vector<uint16_t>& vc) {
    const int32_t group = p_.n_heads / p_.n_kv_heads;
    std::vector<float> inv_freq(static_cast<size_t>(std::max(1, p_.rotary_dim / 2)));
    kd::rope_inv_freq(p_.rope_theta, p_.rotary_dim, inv_freq.data());
    const double scale = 1.0f / std::sqrt(static_cast<float>(hd_));
    std::vector<double> out(static_cast<size_t>(call.n_rows * call.out_stride), 0.0);  // the output's layout
    struct Item {
      const SeqDesc* s;
      int32_t t;
      int32_t h;
    };
    std::vector<Item> items;
    for (const SeqDesc& s : call.seqs)
      for (int32_t t = 0; t < s.n_tokens; ++t)
        for (int32_t h = 0; h < p_.n_heads; ++h) items.push_back({&s, t, h});
    pool_.parallel_for(static_cast<int64_t>(items.size()), 4, [&](int64_t i0, int64_t i1) {
      std::vector<float> q(static_cast<size_t>(hd_));
      std::vector<double> score;
      for (int64_t it = i0; it < i1; ++it) {
        const Item& item = items[static_cast<size_t>(it)];
        const SeqDesc& s = *item.s;
        const int64_t row = s.row0 + item.t;
        const int32_t pos = s.n_past + item.t;
        const float* x = call.qg.data() + row * call.qg_stride + int64_t{item.h} * 2 * hd_;
        float sum_sq = 0.0f;
        for (int32_t d = 0; d < hd_; ++d) sum_sq += x[d] * x[d];
        const float inv = kd::rms_inv(sum_sq, hd_, p_.rms_norm_eps);
        for (int32_t d = 0; d < hd_; ++d) q[static_cast<size_t>(d)] = x[d] * inv * q_norm_[static_cast<size_t>(d)];
        const int32_t half = p_.rotary_dim / 2;
        for (int32_t j = 0; j < half; ++j) {
          const float theta = static_cast<float>(pos) * inv_freq[static_cast<size_t>(j)];
          const float cs = std::cos(theta), sn = std::sin(theta);
          const float x0 = q[static_cast<size_t>(j)], x1 = q[static_cast<size_t>(j + half)];
          q[static_cast<size_t>(j)] = kd::rope_lo(x0, x1, cs, sn);
          q[static_cast<size_t>(j + half)] = kd::rope_hi(x0, x1, cs, sn);
        }
        const int64_t g = item.h / group;
        score.assign(static_cast<size_t>(pos + 1), 0.0);
        double mx = -INFINITY;
        for (int32_t j = 0; j <= pos; ++j) {
          const uint16_t* kr = kc.data() + cache_row(s, j) * kv_width_ + g * hd_;
          double dot = 0.0;
          for (int32_t d = 0; d < hd_; ++d) dot += static_cast<double>(q[static_cast<size_t>(d)]) * fp::f16_to_float(kr[d]);
          score[static_cast<size_t>(j)] = dot * scale;
          mx = std::max(mx, score[static_cast<size_t>(j)]);
        }
        double sum = 0.0;
        for (int32_t j = 0; j <= pos; ++j) {
          score[static_cast<size_t>(j)] = std::exp(score[static_cast<size_t>(j)] - mx);
          sum += score[static_cast<size_t>(j)];
        }
        double* o = out.data() + row * call.out_stride + int64_t{item.h} * hd_;
        for (int32_t j = 0; j <= pos; ++j) {
          const uint16_t* vr = vc.data() + cache_row(s, j) * kv_width_ + g * hd_;
          const double w = score[static_cast<size_t>(j)] / sum;
          for (int32_t d = 0; d < hd_; ++d) o[d] += w * fp::f16_to_float(vr[d]);
        }
        for (int32_t d = 0; d < hd_; ++d) o[d] *= 1.0 / (1.0 + std::exp(-static_cast<double>(x[hd_ + d])));
      }
    });
    return out;
  }

  struct DeviceCall {
    std::unique_ptr<Buf> qg, k, v, seqs, out, ws;
  };

  // Uploads the call's inputs, poisons the output and the workspace, runs the op.
  KernelStatus launch(const Call& call, const Buf& pages, DeviceCall& dc) {
    dc.qg = std::make_unique<Buf>(dev_, call.qg.size() * 4);
    dc.k = std::make_unique<Buf>(dev_, call.k.size() * 4);
    dc.v = std::make_unique<Buf>(dev_, call.v.size() * 4);
    dc.seqs = std::make_unique<Buf>(dev_, call.seqs.size() * sizeof(SeqDesc));
    dc.qg->put(call.qg);
    dc.k->put(call.k);
    dc.v->put(call.v);
    dc.seqs->put(call.seqs);
    const size_t out_bytes = static_cast<size_t>(call.n_rows * call.out_stride) * out_esize();
    dc.out = std::make_unique<Buf>(dev_, out_bytes);
    dev_.fill(dc.out->get(), kPoisonByte, out_bytes);
    const size_t ws_bytes =
        ka::workspace_bytes(p_, call.n_rows, static_cast<int32_t>(call.seqs.size()), call.max_seq_tokens, call.max_context);
    dc.ws = std::make_unique<Buf>(dev_, ws_bytes);
    dev_.fill(dc.ws->get(), kPoisonByte, ws_bytes);
    ka::DeviceArgs a;
    a.qg = static_cast<const float*>(dc.qg->get());
    a.qg_stride = call.qg_stride;
    a.k = static_cast<const float*>(dc.k->get());
    a.k_stride = call.k_stride;
    a.v = static_cast<const float*>(dc.v->get());
    a.v_stride = call.v_stride;
    a.q_norm = static_cast<const float*>(d_q_norm_->get());
    a.k_norm = static_cast<const float*>(d_k_norm_->get());
    a.k_cache = k_cache_->get();
    a.v_cache = v_cache_->get();
    a.cache_dtype = DType::kF16;
    a.seqs = static_cast<const SeqDesc*>(dc.seqs->get());
    a.n_seqs = static_cast<int32_t>(call.seqs.size());
    a.page_table = static_cast<const int32_t*>(pages.get());
    a.out = dc.out->get();
    a.out_stride = call.out_stride;
    a.out_dtype = c_.out_dtype;
    a.n_rows = call.n_rows;
    a.max_seq_tokens = call.max_seq_tokens;
    a.max_context = call.max_context;
    a.workspace = dc.ws->get();
    a.workspace_bytes = ws_bytes;
    return dev_.run(p_, a);
  }

  double out_value(const std::vector<uint8_t>& out, size_t i) const {
    if (c_.out_dtype == DType::kF16) {
      uint16_t h;
      std::memcpy(&h, out.data() + 2 * i, 2);
      return fp::f16_to_float(h);
    }
    float f;
    std::memcpy(&f, out.data() + 4 * i, 4);
    return f;
  }

  // Runs one call on both sides and checks it; *out_bytes gets the device output.
  bool run_call(const Call& call, const char* what, std::vector<uint8_t>* out_bytes) {
    const std::string name = label() + (what[0] != '\0' ? std::string(" [") + what + "]" : std::string());
    INFO(name);
    // Reference (it writes its fp32 cache in place).
    std::vector<float> ref_out(static_cast<size_t>(call.n_rows * call.out_stride), 0.0f);
    ka::RefArgs r;
    r.qg = call.qg.data();
    r.qg_stride = call.qg_stride;
    r.k = call.k.data();
    r.k_stride = call.k_stride;
    r.v = call.v.data();
    r.v_stride = call.v_stride;
    r.q_norm = q_norm_.data();
    r.k_norm = k_norm_.data();
    r.k_cache = ref_k_.data();
    r.v_cache = ref_v_.data();
    r.seqs = call.seqs.data();
    r.n_seqs = static_cast<int32_t>(call.seqs.size());
    r.page_table = page_table_.data();
    r.out = ref_out.data();
    r.out_stride = call.out_stride;
    r.parallel = &pool_;
    ka::gated_attention_ref(p_, r);

    DeviceCall dc;
    const KernelStatus st = launch(call, *d_pages_, dc);
    INFO("status " << static_cast<int>(st.code) << " " << st.message << " " << st.file << ":" << st.line
                   << " cuda_error=" << st.cuda_error);
    REQUIRE(st.ok());
    *out_bytes = dc.out->get_all<uint8_t>();
    const std::vector<uint16_t> dk = k_cache_->get_all<uint16_t>(), dv = v_cache_->get_all<uint16_t>();
    const bool guards = dc.out->guard_ok() && dc.ws->guard_ok() && k_cache_->guard_ok() && v_cache_->guard_ok();

    // Output: every element of the sequences' rows written (no NaN), every other byte still poison.
    std::vector<char> written(static_cast<size_t>(call.n_rows * call.out_stride), 0);
    for (const SeqDesc& s : call.seqs)
      for (int32_t t = 0; t < s.n_tokens; ++t)
        for (int64_t c = 0; c < out_width(); ++c) written[static_cast<size_t>((s.row0 + t) * call.out_stride + c)] = 1;
    size_t nan = 0, stray = 0;
    std::string first_bad;
    std::vector<double> dev_vals, ref_vals;
    std::vector<size_t> idx;
    for (size_t i = 0; i < written.size(); ++i) {
      const int64_t row = static_cast<int64_t>(i) / call.out_stride, col = static_cast<int64_t>(i) % call.out_stride;
      if (written[i]) {
        const double v = out_value(*out_bytes, i);
        if (std::isnan(v)) {
          if (nan++ == 0) first_bad = "NaN/unwritten at row " + std::to_string(row) + " col " + std::to_string(col);
          continue;
        }
        dev_vals.push_back(v);
        ref_vals.push_back(ref_out[i]);
        idx.push_back(i);
      } else {
        bool poison = true;
        for (size_t b = 0; b < out_esize(); ++b) poison &= (*out_bytes)[i * out_esize() + b] == kPoisonByte;
        if (!poison && stray++ == 0) first_bad += " stray write at row " + std::to_string(row) + " col " + std::to_string(col);
      }
    }
    const double err = normalised_error(dev_vals, ref_vals);
    const std::vector<double> orc = oracle(call, dk, dv);
    std::vector<double> orc_vals;
    for (size_t i : idx) orc_vals.push_back(orc[i]);
    const double strict = normalised_error(dev_vals, orc_vals);
    const double strict_tol = c_.out_dtype == DType::kF16 ? tol::kAttentionStrictF16 : tol::kAttentionStrictF32;
    // Where the device is furthest from the oracle (for the log of a failure).
    size_t worst = 0;
    for (size_t i = 0; i < dev_vals.size(); ++i)
      if (std::abs(dev_vals[i] - orc_vals[i]) > std::abs(dev_vals[worst] - orc_vals[worst])) worst = i;

    // Cache: the rows of this call's positions hold the new key (within one fp16 ulp of the reference's fp32 key, plus
    // 2^-18 absolute: a normed, rotated key element near zero carries the fp32 rounding of its O(1) inputs, which is
    // several fp16 ulps at that magnitude; the device and the reference differ there in sincosf and sum order)
    // and value (bit-exact fp16 of the input); every other row is unchanged.
    std::vector<char> new_row(static_cast<size_t>(n_pages_) * p_.page_size, 0);
    size_t cache_bad = 0;
    std::string cache_first;
    for (const SeqDesc& s : call.seqs) {
      for (int32_t t = 0; t < s.n_tokens; ++t) {
        const int64_t cr = cache_row(s, s.n_past + t);
        new_row[static_cast<size_t>(cr)] = 1;
        const int64_t row = s.row0 + t;
        for (int64_t e = 0; e < kv_width_; ++e) {
          const size_t ci = static_cast<size_t>(cr * kv_width_ + e);
          const double want = ref_k_[ci];
          const double got = fp::f16_to_float(dk[ci]);
          const bool k_ok = std::abs(got - want) <= std::ldexp(std::abs(want), -10) + std::ldexp(1.0, -18);
          const bool v_ok = dv[ci] == fp::float_to_f16(call.v[static_cast<size_t>(row * call.v_stride + e)]);
          if ((!k_ok || !v_ok) && cache_bad++ == 0) {
            cache_first = "cache row " + std::to_string(cr) + " elem " + std::to_string(e) + (k_ok ? "" : " key") +
                          (v_ok ? "" : " value") + " (pos " + std::to_string(s.n_past + t) + ")";
          }
        }
      }
    }
    for (size_t cr = 0; cr < new_row.size(); ++cr) {
      if (new_row[cr]) continue;
      for (int64_t e = 0; e < kv_width_; ++e) {
        const size_t ci = cr * static_cast<size_t>(kv_width_) + static_cast<size_t>(e);
        if ((dk[ci] != mirror_k_[ci] || dv[ci] != mirror_v_[ci]) && cache_bad++ == 0) {
          cache_first = "untouched cache row " + std::to_string(cr) + " elem " + std::to_string(e) + " changed";
        }
      }
    }
    mirror_k_ = dk;
    mirror_v_ = dv;

    const bool ok = st.ok() && nan == 0 && stray == 0 && guards && cache_bad == 0 &&
                    err <= tol::kGpuVsCpuNormalisedError && strict <= strict_tol;
    std::printf("%s err=%.3e strict=%.3e cache=%s %s\n", name.c_str(), err, strict, cache_bad == 0 ? "ok" : "BAD",
                ok ? "ok" : "FAIL");
    if (!ok) {
      const size_t wi = dev_vals.empty() ? 0 : idx[worst];
      std::printf("  nan=%zu stray=%zu guards=%s cache_bad=%zu %s %s; worst vs oracle at row %lld col %lld: %.6g vs %.6g "
                  "(reference %.6g)\n",
                  nan, stray, guards ? "ok" : "DAMAGED", cache_bad, first_bad.c_str(), cache_first.c_str(),
                  static_cast<long long>(wi / static_cast<size_t>(call.out_stride)),
                  static_cast<long long>(wi % static_cast<size_t>(call.out_stride)),
                  dev_vals.empty() ? 0.0 : dev_vals[worst], dev_vals.empty() ? 0.0 : orc_vals[worst],
                  dev_vals.empty() ? 0.0 : ref_vals[worst]);
    }
    std::fflush(stdout);
    CHECK(nan == 0);
    CHECK(stray == 0);
    CHECK(guards);
    CHECK(cache_bad == 0);
    CHECK(err <= tol::kGpuVsCpuNormalisedError);
    CHECK(strict <= strict_tol);
    return ok;
  }

  // Runs rows [t0, t0 + n) of entry e of `call` as a call of their own (one sequence at n_past + t0, rows moved to
  // row 3, bounds other than the batched call's) on the device cache as it stands; returns the output bytes.
  std::vector<uint8_t> run_alone(const Call& call, size_t e, int32_t t0, int32_t n, int32_t extra_context) {
    const SeqDesc& s = call.seqs[e];
    const std::vector<int32_t>& pl = pages_[static_cast<size_t>(call.spec[e])];
    Buf pages(dev_, std::max<size_t>(1, pl.size()) * 4);
    pages.put(pl);
    Call solo;
    const int32_t row0 = 3;
    SeqDesc d = s;
    d.row0 = row0;
    d.n_tokens = n;
    d.n_past = s.n_past + t0;
    d.page_offset = 0;
    solo.seqs = {d};
    solo.spec = {call.spec[e]};
    solo.n_rows = row0 + n + 5;
    solo.max_seq_tokens = n + 1;
    solo.max_context = d.n_past + n + extra_context;
    solo.qg_stride = call.qg_stride;
    solo.k_stride = call.k_stride;
    solo.v_stride = call.v_stride;
    solo.out_stride = call.out_stride;
    solo.qg.assign(static_cast<size_t>(solo.n_rows * solo.qg_stride), 0.5f);
    solo.k.assign(static_cast<size_t>(solo.n_rows * solo.k_stride), 0.5f);
    solo.v.assign(static_cast<size_t>(solo.n_rows * solo.v_stride), 0.5f);
    const int64_t src = s.row0 + t0;
    std::copy_n(call.qg.begin() + src * call.qg_stride, n * call.qg_stride, solo.qg.begin() + row0 * solo.qg_stride);
    std::copy_n(call.k.begin() + src * call.k_stride, n * call.k_stride, solo.k.begin() + row0 * solo.k_stride);
    std::copy_n(call.v.begin() + src * call.v_stride, n * call.v_stride, solo.v.begin() + row0 * solo.v_stride);
    DeviceCall dc;
    const KernelStatus st = launch(solo, pages, dc);
    INFO("status " << st.message);
    REQUIRE(st.ok());
    return dc.out->get_all<uint8_t>();
  }

  // Output row `row` of `a` equals output row `row_b` of `b`, bit for bit.
  bool same_row(const std::vector<uint8_t>& a, int64_t row, const std::vector<uint8_t>& b, int64_t row_b,
                int64_t stride) const {
    const size_t bytes = static_cast<size_t>(out_width()) * out_esize();
    const size_t sb = static_cast<size_t>(stride) * out_esize();
    return std::memcmp(a.data() + static_cast<size_t>(row) * sb, b.data() + static_cast<size_t>(row_b) * sb, bytes) == 0;
  }

  // Each decode-path sequence's rows decoded one at a time from the cache as it was before the call must give the
  // batched call's rows and cache contents bit for bit, where both see the same context splits (split_plan: always
  // up to 4096 positions).
  bool check_sequential(const Call& call, const std::vector<uint8_t>& out, const std::vector<uint16_t>& before_k,
                        const std::vector<uint16_t>& before_v) {
    const std::vector<uint16_t> after_k = mirror_k_, after_v = mirror_v_;
    bool all = true;
    for (size_t e = 0; e < call.seqs.size(); ++e) {
      const SeqDesc& s = call.seqs[e];
      if (s.n_tokens < 2 || !kd::seq_is_decode(s)) continue;
      k_cache_->put(before_k);
      v_cache_->put(before_v);
      const int32_t verify_len = kd::split_plan(s.n_past + s.n_tokens).len;
      int32_t compared = 0, skipped = 0;
      bool same = true;
      for (int32_t t = 0; t < s.n_tokens; ++t) {
        const std::vector<uint8_t> one = run_alone(call, e, t, 1, 0);
        if (kd::split_plan(s.n_past + t + 1).len != verify_len) {
          ++skipped;
          continue;
        }
        ++compared;
        same &= same_row(out, s.row0 + t, one, 3, call.out_stride);
      }
      const std::vector<uint16_t> sk = k_cache_->get_all<uint16_t>(), sv = v_cache_->get_all<uint16_t>();
      for (int32_t t = 0; t < s.n_tokens; ++t) {
        const size_t c0 = static_cast<size_t>(cache_row(s, s.n_past + t) * kv_width_);
        same &= std::equal(sk.begin() + c0, sk.begin() + c0 + kv_width_, after_k.begin() + c0);
        same &= std::equal(sv.begin() + c0, sv.begin() + c0 + kv_width_, after_v.begin() + c0);
      }
      std::printf("%s sequential-decode entry=%zu %d+%d: %d rows one at a time vs one verify pass (%d on another "
                  "split length) %s\n",
                  label().c_str(), e, s.n_past, s.n_tokens, compared, skipped, same ? "same ok" : "DIFFERENT FAIL");
      std::fflush(stdout);
      CHECK(same);
      all &= same;
    }
    k_cache_->put(after_k);
    v_cache_->put(after_v);
    return all;
  }

  // Each sequence of `call` alone (from the cache as it was before the call, at other rows, with other bounds) must
  // give the batched call's output and cache rows bit for bit.
  bool check_invariance(const Call& call, const std::vector<uint8_t>& out, const std::vector<uint16_t>& before_k,
                        const std::vector<uint16_t>& before_v) {
    const std::vector<uint16_t> after_k = mirror_k_, after_v = mirror_v_;
    bool all = true;
    for (size_t e = 0; e < call.seqs.size(); ++e) {
      const SeqDesc& s = call.seqs[e];
      if (s.n_tokens == 0) continue;
      k_cache_->put(before_k);
      v_cache_->put(before_v);
      const std::vector<uint8_t> solo_out = run_alone(call, e, 0, s.n_tokens, 300);
      const std::vector<uint16_t> sk = k_cache_->get_all<uint16_t>(), sv = v_cache_->get_all<uint16_t>();
      bool same = true;
      for (int32_t t = 0; t < s.n_tokens; ++t) {
        same &= same_row(out, s.row0 + t, solo_out, 3 + t, call.out_stride);
        const int64_t cr = cache_row(s, s.n_past + t);
        const size_t c0 = static_cast<size_t>(cr * kv_width_);
        same &= std::equal(sk.begin() + c0, sk.begin() + c0 + kv_width_, after_k.begin() + c0);
        same &= std::equal(sv.begin() + c0, sv.begin() + c0 + kv_width_, after_v.begin() + c0);
      }
      std::printf("%s batch-invariance entry=%zu %d+%d alone vs batched %s\n", label().c_str(), e, s.n_past,
                  s.n_tokens, same ? "same ok" : "DIFFERENT FAIL");
      std::fflush(stdout);
      CHECK(same);
      all &= same;
    }
    k_cache_->put(after_k);
    v_cache_->put(after_v);
    return all;
  }

  Device& dev_;
  const CaseSpec& c_;
  const ka::Params p_;
  SplitMix rng_;
  ThreadPool pool_;
  const int32_t hd_;
  const int64_t kv_width_;
  int32_t n_pages_ = 0;
  size_t cache_elems_ = 0;
  std::vector<std::vector<int32_t>> pages_;
  std::vector<int32_t> page_offset_, page_table_;
  std::vector<uint16_t> mirror_k_, mirror_v_;  // what the device cache holds between calls
  std::vector<float> ref_k_, ref_v_;           // the reference's cache
  std::vector<float> q_norm_, k_norm_;
  std::unique_ptr<Buf> k_cache_, v_cache_, d_q_norm_, d_k_norm_, d_pages_;
};

inline bool run_case(Device& dev, const CaseSpec& c) {
  Runner r(dev, c);
  return r.run();
}

inline CaseSpec make_case(const std::string& name, const Shape& shape, std::vector<SeqSpec> seqs,
                          PageOrder order = PageOrder::kRandom, DType out = DType::kF16) {
  CaseSpec c;
  c.name = name;
  c.shape = shape;
  c.seqs = std::move(seqs);
  c.order = order;
  c.out_dtype = out;
  return c;
}

// Cases small enough for the SIMT emulator (the CPU test runs these; the GPU test runs them and bigger ones):
// the tiny fixture shapes at every path (first token, 1..16 verify rows, split context, prefill with and without
// context, a mixed batch), head dims 64 and 96, page sizes 1, 5 and 7, no rotation, GQA groups 1, 2, 3, 12 and 48
// (q groups spanning several rows, rows spanning several q groups; prefill tiles of 1 to 48 rows), verify rows
// against one-at-a-time decoding, and the 27B shape at short contexts.
inline std::vector<CaseSpec> shared_cases() {
  std::vector<CaseSpec> v;
  auto add = [&v](CaseSpec c) {
    c.seed = 1000 + 17 * v.size();
    v.push_back(std::move(c));
  };
  const Shape t8 = shape_tiny(8), t16 = shape_tiny(16), big = shape_27b();
  add(make_case("first-token", t8, {{0, 1}}));
  for (int32_t n : {1, 2, 3, 5, 8, 13, 16}) {
    CaseSpec c = make_case("verify", t8, {{37, n}}, PageOrder::kDescending);
    c.sequential = n == 5 || n == 16;
    add(c);
  }
  add(make_case("split", t16, {{4500, 1, Fill::kDirect}}));
  CaseSpec split16 = make_case("split", t16, {{4500, 16, Fill::kDirect}}, PageOrder::kDescending, DType::kF32);
  split16.sequential = true;
  add(split16);
  for (int32_t n : {17, 64, 200}) {
    add(make_case("prefill", t8, {{0, n}}));
    add(make_case("prefill-after-context", t16, {{50, n}}, PageOrder::kAscending, DType::kF32));
  }
  CaseSpec mixed = make_case("mixed", t8,
                             {{20, 1}, {0, 0}, {5, 7}, {0, 40}, {30, 17}, {300, 3, Fill::kDirect}, {0, 16}});
  mixed.row_gap = 2;
  mixed.extra_rows = 5;
  mixed.extra_seq_tokens = 3;
  mixed.extra_context = 100;
  mixed.stride_pad = 3;
  mixed.invariance = true;
  mixed.sequential = true;
  add(mixed);
  CaseSpec d96 = make_case("odd", make_shape("d96-p5", 6, 2, 96, 32, 1e4f, 5), {{10, 1}, {3, 4}, {0, 19}});
  d96.invariance = true;
  add(d96);
  add(make_case("odd", make_shape("d64-r0-p1", 2, 1, 64, 0, 1e4f, 1), {{7, 2}, {0, 18}}, PageOrder::kDescending));
  add(make_case("odd", make_shape("g1-p7", 3, 3, 32, 32, 1e4f, 7), {{60, 16}, {9, 50}}, PageOrder::kRandom,
                DType::kF32));
  CaseSpec g12 = make_case("groups", make_shape("g12", 12, 1, 32, 16, 1e4f, 16), {{25, 16}, {3, 9}, {0, 30}});
  g12.invariance = true;
  g12.sequential = true;
  add(g12);
  add(make_case("groups", make_shape("g48", 48, 1, 32, 8, 1e4f, 16), {{5, 3}, {2, 20}}));
  add(make_case("first-token", big, {{0, 1}}));
  CaseSpec v3 = make_case("verify", big, {{20, 3}}, PageOrder::kDescending);
  v3.sequential = true;
  add(v3);
  add(make_case("verify", big, {{12, 9}}, PageOrder::kRandom, DType::kF32));
  CaseSpec bmix = make_case("mixed", big, {{6, 1}, {0, 0}, {3, 4}, {0, 18}});
  bmix.invariance = true;
  add(bmix);
  return v;
}

// Host-side argument checks: each bad argument gives its status code and launches nothing.
inline void check_bad_arguments(Device& dev) {
  const ka::Params good = shape_tiny(8).p;
  Buf qg(dev, 4096), k(dev, 4096), v(dev, 4096), w(dev, 4096), kc(dev, 65536), vc(dev, 65536), seqs(dev, 256),
      pages(dev, 256), out(dev, 4096), ws(dev, 1 << 20);
  std::vector<SeqDesc> one(1);
  one[0].n_tokens = 1;
  seqs.put(one);
  pages.put(std::vector<int32_t>(8, 0));
  ka::DeviceArgs a;
  a.qg = static_cast<const float*>(qg.get());
  a.qg_stride = 2 * 4 * 32;
  a.k = static_cast<const float*>(k.get());
  a.k_stride = 64;
  a.v = static_cast<const float*>(v.get());
  a.v_stride = 64;
  a.q_norm = static_cast<const float*>(w.get());
  a.k_norm = static_cast<const float*>(w.get());
  a.k_cache = kc.get();
  a.v_cache = vc.get();
  a.seqs = static_cast<const SeqDesc*>(seqs.get());
  a.n_seqs = 1;
  a.page_table = static_cast<const int32_t*>(pages.get());
  a.out = out.get();
  a.out_stride = 128;
  a.n_rows = 1;
  a.max_seq_tokens = 1;
  a.max_context = 1;
  a.workspace = ws.get();
  a.workspace_bytes = ws.bytes();
  REQUIRE(dev.run(good, a).ok());
  auto code = [&](const ka::Params& p, const ka::DeviceArgs& x) { return dev.run(p, x).code; };
  ka::Params p = good;
  p.head_dim = 48;
  CHECK(code(p, a) == KernelCode::kBadShape);
  p = good;
  p.head_dim = 288;
  CHECK(code(p, a) == KernelCode::kBadShape);
  p = good;
  p.rotary_dim = 7;
  CHECK(code(p, a) == KernelCode::kBadShape);
  p = good;
  p.rotary_dim = 34;
  CHECK(code(p, a) == KernelCode::kBadShape);
  p = good;
  p.n_kv_heads = 3;
  CHECK(code(p, a) == KernelCode::kBadShape);
  p = good;
  p.page_size = 0;
  CHECK(code(p, a) == KernelCode::kBadShape);
  p = good;
  p.rope_theta = 0.0f;
  CHECK(code(p, a) == KernelCode::kBadArgument);
  p = good;
  p.n_heads = 98;
  p.n_kv_heads = 1;
  CHECK(code(p, a) == KernelCode::kUnsupported);
  ka::DeviceArgs b = a;
  b.cache_dtype = DType::kBF16;
  CHECK(code(good, b) == KernelCode::kUnsupported);
  b = a;
  b.cache_dtype = DType::kF8E4M3;
  b.k_scale = 0.0f;
  CHECK(code(good, b) == KernelCode::kBadArgument);
  b.k_scale = 1.0f;
  b.v_scale = std::nanf("");
  CHECK(code(good, b) == KernelCode::kBadArgument);
  b = a;
  b.out_dtype = DType::kBF16;
  CHECK(code(good, b) == KernelCode::kBadArgument);
  b = a;
  b.qg = nullptr;
  CHECK(code(good, b) == KernelCode::kBadArgument);
  b = a;
  b.workspace = nullptr;
  CHECK(code(good, b) == KernelCode::kBadArgument);
  b = a;
  b.workspace_bytes = ka::workspace_bytes(good, 1, 1, 1, 1) - 1;
  CHECK(code(good, b) == KernelCode::kWorkspaceTooSmall);
  b = a;
  b.out_stride = 127;
  CHECK(code(good, b) == KernelCode::kBadShape);
  b = a;
  b.k_cache = static_cast<char*>(kc.get()) + 2;
  CHECK(code(good, b) == KernelCode::kBadArgument);
  b = a;
  b.n_seqs = -1;
  CHECK(code(good, b) == KernelCode::kBadShape);
  b = a;
  b.n_seqs = 70000;
  CHECK(code(good, b) == KernelCode::kBadShape);
  // Nothing to do is fine, even with null pointers.
  b = ka::DeviceArgs{};
  CHECK(code(good, b) == KernelCode::kOk);
}

}  // namespace voltserve::test::attn
