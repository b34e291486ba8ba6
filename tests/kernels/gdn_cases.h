// Test cases of the Gated DeltaNet device form against gdn_ref, written once for two backends: the GPU
// (gdn_gpu_test.cpp: device memory, gdn_forward) and the CPU emulation of the same kernel bodies
// (gdn_blocks_test.cpp: host memory, gdn_emulator.h). A case draws seeded random inputs, weights and starting states
// (never zeros), runs one or more calls on the backend and on the reference, and checks: outputs by normalised error
// ||a-b||^2/||b||^2 <= 5e-4 with no NaN and every output written (outputs are NaN-poisoned first), rows and stride
// padding outside the sequences untouched, the recurrent state and checkpoints by normalised error, the conv state
// and conv checkpoints exactly (they are copies), slots and checkpoint rows outside the step unchanged, and guard
// bytes before and after every buffer (the workspace too). Each check prints one line:
//   gdn <shape> <case> what=<x> err=<e> ok|FAIL        (exact checks: err=0 or the first differing index)
#pragma once

#include <algorithm>
#include <catch2/catch_test_macros.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/fp_formats.h"
#include "kernels/gdn/gdn.h"
#include "linear_random.h"

namespace voltserve::test::gdn {

using kernels::KernelStatus;
using kernels::SeqDesc;
using kernels::gdn::Commit;
using kernels::gdn::DeviceArgs;
using kernels::gdn::Mode;
using kernels::gdn::Params;
using kernels::gdn::RefArgs;
using kernels::gdn::State;

constexpr double kTol = 5e-4;
constexpr size_t kGuard = 256;  // bytes before and after every buffer (keeps the 256-byte alignment)
constexpr uint8_t kGuardByte = 0xA5;
constexpr uint8_t kPoisonByte = 0xFF;    // NaN in fp32 and fp16
constexpr uint8_t kCkptInitByte = 0xC3;  // finite fp32: checkpoint rows a call must not touch keep it

// Memory and execution: device memory + gdn_forward, or host memory + the emulator.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual void* alloc(size_t bytes) = 0;  // 256-byte aligned; freed with the backend
  virtual void upload(void* dst, const void* src, size_t bytes) = 0;
  virtual void download(void* dst, const void* src, size_t bytes) = 0;
  virtual void fill(void* dst, uint8_t byte, size_t bytes) = 0;
  virtual KernelStatus forward(const Params& p, const DeviceArgs& a) = 0;  // returns after the work is done
  // kernels::gdn::commit over n_layers layers (a host array of backend states).
  virtual KernelStatus commit(const Params& p, const State* layers, int32_t n_layers, const Commit* commits,
                              int32_t n) = 0;
};

// The reference's threads: a plain pool over std::thread (the 27B cases would take minutes on one core).
class ThreadParallel final : public kernels::HostParallel {
 public:
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body) const override {
    const int64_t hw = std::max<int64_t>(1, std::thread::hardware_concurrency());
    const int64_t pieces = std::min<int64_t>(hw, std::max<int64_t>(1, n / std::max<int64_t>(1, grain)));
    if (pieces <= 1) {
      body(0, n);
      return;
    }
    std::vector<std::thread> ts;
    for (int64_t i = 0; i < pieces; ++i) {
      const int64_t b = n * i / pieces, e = n * (i + 1) / pieces;
      if (b < e) ts.emplace_back([&body, b, e] { body(b, e); });
    }
    for (auto& t : ts) t.join();
  }
};

// A buffer on the backend with guard bytes on both sides, and its host mirror.
struct GuardedBuffer {
  Backend* be = nullptr;
  uint8_t* base = nullptr;
  size_t bytes = 0;
  void* ptr() const { return base + kGuard; }
  void init(Backend& b, size_t n) {
    be = &b;
    bytes = n;
    base = static_cast<uint8_t*>(b.alloc(n + 2 * kGuard));
    REQUIRE(base != nullptr);
    b.fill(base, kGuardByte, n + 2 * kGuard);
  }
  void upload(const void* src) const { be->upload(ptr(), src, bytes); }
  void fill(uint8_t byte) const { be->fill(ptr(), byte, bytes); }
  std::vector<uint8_t> download() const {
    std::vector<uint8_t> v(bytes);
    be->download(v.data(), ptr(), bytes);
    return v;
  }
  bool guards_ok() const {
    std::vector<uint8_t> g(kGuard);
    bool ok = true;
    for (size_t off : {size_t{0}, kGuard + bytes}) {
      be->download(g.data(), base + off, kGuard);
      ok &= std::all_of(g.begin(), g.end(), [](uint8_t x) { return x == kGuardByte; });
    }
    return ok;
  }
};

struct Shape {
  const char* name;
  Params p;
};

inline Params make_params(int32_t nk, int32_t nv, int32_t dk, int32_t dv, int32_t conv_kernel) {
  Params p;
  p.n_k_heads = nk;
  p.n_v_heads = nv;
  p.head_k_dim = dk;
  p.head_v_dim = dv;
  p.conv_kernel = conv_kernel;
  p.rms_norm_eps = 1e-6f;
  return p;
}

// The 27B layer, the tiny fixtures (tests/fixtures/models: 2 k-heads, 4 or 6 v-heads, 16 / 24) and awkward ones.
inline Shape shape_27b() { return {"27b", make_params(16, 48, 128, 128, 4)}; }
inline std::vector<Shape> tiny_shapes() {
  return {
      {"nk2.nv4.dk16.dv24.K4", make_params(2, 4, 16, 24, 4)},    // tiny-chat / tiny-tied fixture
      {"nk2.nv6.dk16.dv24.K4", make_params(2, 6, 16, 24, 4)},    // tiny-modelopt fixture (ratio 3)
      {"nk4.nv4.dk32.dv16.K2", make_params(4, 4, 32, 16, 2)},    // ratio 1, K = 2
      {"nk3.nv6.dk24.dv32.K3", make_params(3, 6, 24, 32, 3)},    // ratio 2, dk 24, K = 3
      {"nk1.nv3.dk8.dv8.K2", make_params(1, 3, 8, 8, 2)},        // smallest dims
      {"nk2.nv4.dk128.dv40.K4", make_params(2, 4, 128, 40, 4)},  // full key rows, 5 value warps, 2 column slices
      {"nk2.nv2.dk16.dv16.K8", make_params(2, 2, 16, 16, 8)},    // the most conv taps the kernels take
  };
}

struct SeqSpec {
  int32_t n_tokens = 1;
  int32_t slot = 0;
  int32_t ckpt = -1;       // checkpoint set (verify item), or -1
  int32_t gap_before = 0;  // rows before this sequence's rows that belong to no sequence (must stay untouched)
};

struct CaseSpec {
  std::string name;
  Params p;
  Mode mode = Mode::kAuto;
  voltserve::DType out_dtype = voltserve::DType::kF16;
  std::vector<SeqSpec> seqs;
  int32_t n_calls = 1;  // > 1: later calls continue from the states the earlier ones left
  int32_t n_slots = 0;  // 0: max slot + 2 (one slot nobody uses)
  int32_t max_ckpt_tokens = 0;
  int32_t n_ckpt_sets = 0;
  bool weak_decay = false;  // A_log near -7: g ~ -0.005, long memory (stresses the chunked sums)
  uint64_t seed = 1;
  std::vector<Commit> commits;  // applied after the last call (backend commit vs commit_ref)
  bool cross_ref = false;       // also compare with the reference run token by token (kSequential)
};

inline const char* mode_name(Mode m) { return m == Mode::kAuto ? "auto" : m == Mode::kSequential ? "seq" : "chunked"; }

inline std::string seqs_name(const std::vector<SeqSpec>& seqs) {
  std::string s = "T=";
  for (size_t i = 0; i < seqs.size(); ++i) {
    s += (i ? "," : "") + std::to_string(seqs[i].n_tokens);
    if (seqs[i].ckpt >= 0) s += "c";
  }
  return s;
}

inline std::string case_label(const std::string& shape, const CaseSpec& c) {
  return "gdn " + shape + " " + c.name + " " + seqs_name(c.seqs) + " mode=" + mode_name(c.mode) +
         " out=" + (c.out_dtype == voltserve::DType::kF16 ? "f16" : "f32") +
         (c.n_calls > 1 ? " calls=" + std::to_string(c.n_calls) : "") + (c.weak_decay ? " weak-decay" : "");
}

struct ErrAcc {
  double num = 0, den = 0;
  size_t nan = 0;
  void add(double got, double want) {
    if (std::isnan(got)) {
      ++nan;
      return;
    }
    num += (got - want) * (got - want);
    den += want * want;
  }
  double err() const { return den > 0 ? num / den : num; }
};

inline bool report(const std::string& label, const char* what, const ErrAcc& e) {
  const bool ok = e.nan == 0 && e.err() <= kTol;
  std::printf("%s what=%s err=%.3e%s %s\n", label.c_str(), what, e.err(),
              e.nan ? (" nan=" + std::to_string(e.nan)).c_str() : "", ok ? "ok" : "FAIL");
  std::fflush(stdout);
  return ok;
}

// Exact comparison of two byte ranges; prints the first differing element (4-byte units).
inline bool report_exact(const std::string& label, const char* what, const uint8_t* got, const uint8_t* want,
                         size_t bytes) {
  size_t first = bytes;
  for (size_t i = 0; i < bytes; ++i) {
    if (got[i] != want[i]) {
      first = i;
      break;
    }
  }
  const bool ok = first == bytes;
  if (ok) {
    std::printf("%s what=%s err=0 exact ok\n", label.c_str(), what);
  } else {
    float g = 0, w = 0;
    const size_t at = first / 4 * 4;
    if (at + 4 <= bytes) {
      std::memcpy(&g, got + at, 4);
      std::memcpy(&w, want + at, 4);
    }
    std::printf("%s what=%s err=1 first_diff=%zu got=%g want=%g FAIL\n", label.c_str(), what, first / 4, g, w);
  }
  std::fflush(stdout);
  return ok;
}

inline bool report_flag(const std::string& label, const char* what, bool ok, const std::string& detail = "") {
  std::printf("%s what=%s err=%d%s %s\n", label.c_str(), what, ok ? 0 : 1, detail.c_str(), ok ? "ok" : "FAIL");
  std::fflush(stdout);
  return ok;
}

inline void fill_uniform(std::vector<float>& v, SplitMix& rng, float lo, float hi) {
  for (auto& x : v) x = lo + (hi - lo) * static_cast<float>(rng.uniform());
}

// Everything one case needs, host side and on the backend.
struct CaseData {
  Params p;
  int32_t n_rows = 0, max_seq_tokens = 0, n_slots = 0, n_ckpt_rows = 0;
  int64_t conv_dim = 0, v_width = 0, qkv_stride = 0, z_stride = 0, b_stride = 0, a_stride = 0, out_stride = 0;
  std::vector<SeqDesc> seqs;
  std::vector<float> conv_w, a_log, dt_bias, norm_w;
  std::vector<float> conv_state, rec_state, conv_ckpt, rec_ckpt;  // reference copies (updated by gdn_ref)
  GuardedBuffer d_conv_w, d_a_log, d_dt_bias, d_norm_w, d_conv_state, d_rec_state, d_conv_ckpt, d_rec_ckpt;
  GuardedBuffer d_qkv, d_z, d_b, d_a, d_out, d_seqs, d_ws, d_commits;
  bool ckpt = false;

  State host_state() {
    State s;
    s.conv = conv_state.data();
    s.recurrent = rec_state.data();
    s.conv_ckpt = ckpt ? conv_ckpt.data() : nullptr;
    s.recurrent_ckpt = ckpt ? rec_ckpt.data() : nullptr;
    s.max_ckpt_tokens = ckpt ? max_ckpt_tokens_ : 0;
    return s;
  }
  State dev_state() const {
    State s;
    s.conv = static_cast<float*>(d_conv_state.ptr());
    s.recurrent = static_cast<float*>(d_rec_state.ptr());
    s.conv_ckpt = ckpt ? static_cast<float*>(d_conv_ckpt.ptr()) : nullptr;
    s.recurrent_ckpt = ckpt ? static_cast<float*>(d_rec_ckpt.ptr()) : nullptr;
    s.max_ckpt_tokens = ckpt ? max_ckpt_tokens_ : 0;
    return s;
  }
  int32_t max_ckpt_tokens_ = 0;
};

struct CallInputs {
  std::vector<float> qkv, z, b, a;
};

inline void setup_case(Backend& be, const CaseSpec& c, CaseData& d, SplitMix& rng) {
  d.p = c.p;
  const Params& p = c.p;
  d.conv_dim = p.conv_dim();
  d.v_width = int64_t{p.n_v_heads} * p.head_v_dim;
  // Awkward strides: rows padded by a few elements (never read, never written).
  d.qkv_stride = d.conv_dim + 3;
  d.z_stride = d.v_width + 5;
  d.b_stride = p.n_v_heads + 1;
  d.a_stride = p.n_v_heads + 2;
  d.out_stride = d.v_width + 7;
  int32_t row = 0, max_slot = 0;
  d.max_seq_tokens = 1;
  for (const SeqSpec& s : c.seqs) {
    row += s.gap_before;
    SeqDesc sd;
    sd.row0 = row;
    sd.n_tokens = s.n_tokens;
    sd.slot = s.slot;
    sd.ckpt = s.ckpt;
    sd.n_past = 7;
    d.seqs.push_back(sd);
    row += std::max(0, s.n_tokens);
    max_slot = std::max(max_slot, s.slot);
    d.max_seq_tokens = std::max(d.max_seq_tokens, s.n_tokens);
    d.ckpt |= s.ckpt >= 0;
  }
  d.n_rows = row + 2;  // two trailing rows no sequence owns
  d.n_slots = c.n_slots > 0 ? c.n_slots : max_slot + 2;
  d.max_ckpt_tokens_ = c.max_ckpt_tokens;
  d.n_ckpt_rows = c.n_ckpt_sets * c.max_ckpt_tokens;
  REQUIRE((!d.ckpt || d.n_ckpt_rows > 0));

  d.conv_w.resize(static_cast<size_t>(d.conv_dim * p.conv_kernel));
  d.a_log.resize(static_cast<size_t>(p.n_v_heads));
  d.dt_bias.resize(d.a_log.size());
  d.norm_w.resize(static_cast<size_t>(p.head_v_dim));
  fill_uniform(d.conv_w, rng, -0.6f, 0.6f);
  if (c.weak_decay) {
    fill_uniform(d.a_log, rng, -8.0f, -6.0f);
  } else {
    fill_uniform(d.a_log, rng, -2.0f, 1.0f);
  }
  fill_uniform(d.dt_bias, rng, -1.0f, 1.0f);
  fill_uniform(d.norm_w, rng, 0.5f, 1.5f);
  d.conv_state.resize(static_cast<size_t>(d.n_slots) * p.conv_state_width());
  d.rec_state.resize(static_cast<size_t>(d.n_slots * p.recurrent_state_size()));
  fill_uniform(d.conv_state, rng, -1.0f, 1.0f);
  fill_uniform(d.rec_state, rng, -0.5f, 0.5f);
  d.conv_ckpt.assign(static_cast<size_t>(std::max(1, d.n_ckpt_rows)) * p.conv_state_width(), 0.0f);
  d.rec_ckpt.assign(static_cast<size_t>(std::max(1, d.n_ckpt_rows) * p.recurrent_state_size()), 0.0f);
  std::memset(d.conv_ckpt.data(), kCkptInitByte, d.conv_ckpt.size() * 4);
  std::memset(d.rec_ckpt.data(), kCkptInitByte, d.rec_ckpt.size() * 4);

  auto up = [&](GuardedBuffer& g, const void* src, size_t bytes) {
    g.init(be, bytes);
    g.upload(src);
  };
  up(d.d_conv_w, d.conv_w.data(), d.conv_w.size() * 4);
  up(d.d_a_log, d.a_log.data(), d.a_log.size() * 4);
  up(d.d_dt_bias, d.dt_bias.data(), d.dt_bias.size() * 4);
  up(d.d_norm_w, d.norm_w.data(), d.norm_w.size() * 4);
  up(d.d_conv_state, d.conv_state.data(), d.conv_state.size() * 4);
  up(d.d_rec_state, d.rec_state.data(), d.rec_state.size() * 4);
  up(d.d_conv_ckpt, d.conv_ckpt.data(), d.conv_ckpt.size() * 4);
  up(d.d_rec_ckpt, d.rec_ckpt.data(), d.rec_ckpt.size() * 4);
  up(d.d_seqs, d.seqs.data(), d.seqs.size() * sizeof(SeqDesc));
  d.d_qkv.init(be, static_cast<size_t>(d.n_rows * d.qkv_stride) * 4);
  d.d_z.init(be, static_cast<size_t>(d.n_rows * d.z_stride) * 4);
  d.d_b.init(be, static_cast<size_t>(d.n_rows * d.b_stride) * 4);
  d.d_a.init(be, static_cast<size_t>(d.n_rows * d.a_stride) * 4);
  d.d_out.init(be, static_cast<size_t>(d.n_rows * d.out_stride) * voltserve::dtype_bytes(c.out_dtype));
  d.d_ws.init(be, std::max<size_t>(16, kernels::gdn::workspace_bytes(p, d.n_rows, static_cast<int32_t>(d.seqs.size()),
                                                                     d.max_seq_tokens)));
}

inline CallInputs make_inputs(const CaseData& d, SplitMix& rng) {
  CallInputs in;
  in.qkv.resize(static_cast<size_t>(d.n_rows * d.qkv_stride));
  in.z.resize(static_cast<size_t>(d.n_rows * d.z_stride));
  in.b.resize(static_cast<size_t>(d.n_rows * d.b_stride));
  in.a.resize(static_cast<size_t>(d.n_rows * d.a_stride));
  fill_uniform(in.qkv, rng, -1.0f, 1.0f);
  for (auto& x : in.qkv) {
    if (rng.next() % 64 == 0) x *= 4.0f;  // a few larger activations
  }
  fill_uniform(in.z, rng, -3.0f, 3.0f);
  fill_uniform(in.b, rng, -4.0f, 4.0f);
  fill_uniform(in.a, rng, -3.0f, 3.0f);
  return in;
}

inline DeviceArgs device_args(const CaseData& d, Mode mode, voltserve::DType out_dtype, int32_t n_seqs,
                              const SeqDesc* seqs, int32_t max_seq_tokens) {
  DeviceArgs a;
  a.qkv = static_cast<const float*>(d.d_qkv.ptr());
  a.qkv_stride = d.qkv_stride;
  a.z = static_cast<const float*>(d.d_z.ptr());
  a.z_stride = d.z_stride;
  a.b = static_cast<const float*>(d.d_b.ptr());
  a.b_stride = d.b_stride;
  a.a = static_cast<const float*>(d.d_a.ptr());
  a.a_stride = d.a_stride;
  a.w.conv = static_cast<const float*>(d.d_conv_w.ptr());
  a.w.a_log = static_cast<const float*>(d.d_a_log.ptr());
  a.w.dt_bias = static_cast<const float*>(d.d_dt_bias.ptr());
  a.w.norm_weight = static_cast<const float*>(d.d_norm_w.ptr());
  a.state = d.dev_state();
  a.seqs = seqs;
  a.n_seqs = n_seqs;
  a.out = d.d_out.ptr();
  a.out_stride = d.out_stride;
  a.out_dtype = out_dtype;
  a.mode = mode;
  a.n_rows = d.n_rows;
  a.max_seq_tokens = max_seq_tokens;
  a.workspace = d.d_ws.ptr();
  a.workspace_bytes = d.d_ws.bytes;
  return a;
}

inline float out_value(const std::vector<uint8_t>& raw, int64_t idx, voltserve::DType dt) {
  if (dt == voltserve::DType::kF32) {
    float f;
    std::memcpy(&f, raw.data() + idx * 4, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, raw.data() + idx * 2, 2);
  return fp::f16_to_float(h);
}

inline std::vector<int32_t> row_owner(const CaseData& d) {
  std::vector<int32_t> owner(static_cast<size_t>(d.n_rows), -1);
  for (size_t i = 0; i < d.seqs.size(); ++i) {
    for (int32_t t = 0; t < d.seqs[i].n_tokens; ++t)
      owner[static_cast<size_t>(d.seqs[i].row0 + t)] = static_cast<int32_t>(i);
  }
  return owner;
}

// Runs one case; every check prints its line and CHECKs. Returns true if all passed.
inline bool run_case(Backend& be, const std::string& shape, const CaseSpec& c) {
  const std::string label = case_label(shape, c);
  INFO(label);
  SplitMix rng(c.seed);
  CaseData d;
  setup_case(be, c, d, rng);
  const Params& p = d.p;
  const int32_t n_seqs = static_cast<int32_t>(d.seqs.size());
  const std::vector<float> conv0 = d.conv_state, rec0 = d.rec_state;  // starting states (for untouched slots)
  ThreadParallel pool;
  std::vector<float> ref_out(static_cast<size_t>(d.n_rows * d.out_stride), 0.0f);
  std::vector<uint8_t> out_raw;
  // The cross reference: gdn_ref in kSequential on its own copies of the states (no checkpoints).
  std::vector<float> x_conv = d.conv_state, x_rec = d.rec_state, x_out(ref_out.size(), 0.0f);
  bool all_ok = true;
  for (int32_t call = 0; call < c.n_calls; ++call) {
    const CallInputs in = make_inputs(d, rng);
    d.d_qkv.upload(in.qkv.data());
    d.d_z.upload(in.z.data());
    d.d_b.upload(in.b.data());
    d.d_a.upload(in.a.data());
    d.d_out.fill(kPoisonByte);
    d.d_ws.fill(kPoisonByte);
    const DeviceArgs a =
        device_args(d, c.mode, c.out_dtype, n_seqs, static_cast<const SeqDesc*>(d.d_seqs.ptr()), d.max_seq_tokens);
    const KernelStatus st = be.forward(p, a);
    INFO("status " << static_cast<int>(st.code) << " " << st.message << " " << st.file << ":" << st.line);
    REQUIRE(st.ok());

    RefArgs r;
    r.qkv = in.qkv.data();
    r.qkv_stride = d.qkv_stride;
    r.z = in.z.data();
    r.z_stride = d.z_stride;
    r.b = in.b.data();
    r.b_stride = d.b_stride;
    r.a = in.a.data();
    r.a_stride = d.a_stride;
    r.w = {d.conv_w.data(), d.a_log.data(), d.dt_bias.data(), d.norm_w.data()};
    r.state = d.host_state();
    r.seqs = d.seqs.data();
    r.n_seqs = n_seqs;
    r.out = ref_out.data();
    r.out_stride = d.out_stride;
    r.mode = c.mode;
    r.parallel = &pool;
    kernels::gdn::gdn_ref(p, r);
    if (c.cross_ref) {
      RefArgs rx = r;
      rx.state = State{x_conv.data(), x_rec.data(), nullptr, nullptr, 0};
      rx.out = x_out.data();
      rx.mode = Mode::kSequential;
      kernels::gdn::gdn_ref(p, rx);
    }

    // Outputs of this call: every sequence row written and close; other rows and the stride padding untouched.
    out_raw = d.d_out.download();
    const size_t esz = voltserve::dtype_bytes(c.out_dtype);
    const std::vector<int32_t> owner = row_owner(d);
    ErrAcc e, ex;
    size_t untouched_bad = 0, first_bad = 0;
    for (int64_t row = 0; row < d.n_rows; ++row) {
      for (int64_t col = 0; col < d.out_stride; ++col) {
        const int64_t idx = row * d.out_stride + col;
        if (owner[static_cast<size_t>(row)] >= 0 && col < d.v_width) {
          e.add(out_value(out_raw, idx, c.out_dtype), ref_out[static_cast<size_t>(idx)]);
          ex.add(out_value(out_raw, idx, c.out_dtype), x_out[static_cast<size_t>(idx)]);
        } else {
          for (size_t bi = 0; bi < esz; ++bi) {
            if (out_raw[static_cast<size_t>(idx) * esz + bi] != kPoisonByte) {
              if (untouched_bad++ == 0) first_bad = static_cast<size_t>(idx);
            }
          }
        }
      }
    }
    const std::string cl = label + (c.n_calls > 1 ? " call=" + std::to_string(call) : "");
    all_ok &= report(cl, "out", e);
    if (c.cross_ref) all_ok &= report(cl, "out-vs-seq-ref", ex);
    all_ok &= report_flag(cl, "out-untouched", untouched_bad == 0,
                          untouched_bad ? " first=" + std::to_string(first_bad) : "");
  }

  // States after the last call: the used slots against the reference, the others unchanged.
  const std::vector<uint8_t> conv_raw = d.d_conv_state.download(), rec_raw = d.d_rec_state.download();
  std::vector<char> used(static_cast<size_t>(d.n_slots), 0);
  for (const SeqDesc& s : d.seqs) {
    if (s.n_tokens > 0) used[static_cast<size_t>(s.slot)] = 1;
  }
  ErrAcc es, esx;
  const int64_t ssz = p.recurrent_state_size(), csz = p.conv_state_width();
  bool slots_ok = true, conv_ok = true;
  for (int32_t slot = 0; slot < d.n_slots; ++slot) {
    const uint8_t* got_r = rec_raw.data() + slot * ssz * 4;
    const uint8_t* got_c = conv_raw.data() + slot * csz * 4;
    if (used[static_cast<size_t>(slot)]) {
      for (int64_t i = 0; i < ssz; ++i) {
        float g;
        std::memcpy(&g, got_r + i * 4, 4);
        es.add(g, d.rec_state[static_cast<size_t>(slot * ssz + i)]);
        esx.add(g, x_rec[static_cast<size_t>(slot * ssz + i)]);
      }
      conv_ok &= report_exact(label + " slot=" + std::to_string(slot), "conv-state", got_c,
                              reinterpret_cast<const uint8_t*>(d.conv_state.data() + slot * csz),
                              static_cast<size_t>(csz) * 4);
    } else {
      slots_ok &= std::memcmp(got_r, rec0.data() + slot * ssz, static_cast<size_t>(ssz) * 4) == 0;
      slots_ok &= std::memcmp(got_c, conv0.data() + slot * csz, static_cast<size_t>(csz) * 4) == 0;
    }
  }
  all_ok &= report(label, "state", es);
  if (c.cross_ref) all_ok &= report(label, "state-vs-seq-ref", esx);
  all_ok &= conv_ok;
  all_ok &= report_flag(label, "other-slots-unchanged", slots_ok);

  if (d.ckpt) {
    const std::vector<uint8_t> cc = d.d_conv_ckpt.download(), rc = d.d_rec_ckpt.download();
    ErrAcc ek;
    std::vector<char> row_used(static_cast<size_t>(d.n_ckpt_rows), 0);
    for (const SeqDesc& s : d.seqs) {
      if (s.ckpt < 0 || s.n_tokens <= 0) continue;
      for (int32_t t = 0; t < s.n_tokens; ++t) row_used[static_cast<size_t>(s.ckpt * c.max_ckpt_tokens + t)] = 1;
    }
    bool rows_ok = true;
    for (int32_t row = 0; row < d.n_ckpt_rows; ++row) {
      const uint8_t* got_r = rc.data() + row * ssz * 4;
      const uint8_t* want_r = reinterpret_cast<const uint8_t*>(d.rec_ckpt.data() + row * ssz);
      if (row_used[static_cast<size_t>(row)]) {
        for (int64_t i = 0; i < ssz; ++i) {
          float g, w;
          std::memcpy(&g, got_r + i * 4, 4);
          std::memcpy(&w, want_r + i * 4, 4);
          ek.add(g, w);
        }
      } else {
        rows_ok &= std::memcmp(got_r, want_r, static_cast<size_t>(ssz) * 4) == 0;
      }
    }
    all_ok &= report(label, "recurrent-ckpt", ek);
    all_ok &=
        report_exact(label, "conv-ckpt", cc.data(), reinterpret_cast<const uint8_t*>(d.conv_ckpt.data()), cc.size());
    all_ok &= report_flag(label, "ckpt-other-rows-unchanged", rows_ok);

    if (!c.commits.empty()) {
      GuardedBuffer& dc = d.d_commits;
      dc.init(be, c.commits.size() * sizeof(Commit));
      dc.upload(c.commits.data());
      const State ds = d.dev_state();
      const KernelStatus st =
          be.commit(p, &ds, 1, static_cast<const Commit*>(dc.ptr()), static_cast<int32_t>(c.commits.size()));
      INFO("commit status " << st.message);
      REQUIRE(st.ok());
      const State hs = d.host_state();
      kernels::gdn::commit_ref(p, hs, c.commits.data(), static_cast<int32_t>(c.commits.size()));
      // A commit is a (transposing) copy: the backend's slots must equal the backend's own checkpoint rows bit for bit,
      // and the
      // reference's slots by normalised error (the checkpoints themselves differ by rounding).
      const std::vector<uint8_t> conv2 = d.d_conv_state.download(), rec2 = d.d_rec_state.download();
      for (const Commit& cm : c.commits) {
        const int64_t row = int64_t{cm.ckpt} * c.max_ckpt_tokens + cm.index;
        const std::string cl = label + " commit slot=" + std::to_string(cm.slot) + " ckpt=" + std::to_string(cm.ckpt) +
                               " index=" + std::to_string(cm.index);
        // The checkpoint row in the slot's layout (gdn.h ckpt_offset).
        std::vector<uint8_t> row_slot(static_cast<size_t>(ssz) * 4);
        const int32_t dk = p.head_k_dim, dv = p.head_v_dim;
        for (int32_t j = 0; j < p.n_v_heads; ++j) {
          const int64_t head = int64_t{j} * dk * dv;
          for (int32_t dd = 0; dd < dk; ++dd) {
            for (int32_t e = 0; e < dv; ++e) {
              std::memcpy(row_slot.data() + (head + int64_t{dd} * dv + e) * 4,
                          rc.data() + (row * ssz + head + kernels::gdn::ckpt_offset(dk, dv, dd, e)) * 4, 4);
            }
          }
        }
        all_ok &= report_exact(cl, "commit-recurrent", rec2.data() + cm.slot * ssz * 4, row_slot.data(),
                               row_slot.size());
        all_ok &= report_exact(cl, "commit-conv", conv2.data() + cm.slot * csz * 4, cc.data() + row * csz * 4,
                               static_cast<size_t>(csz) * 4);
        ErrAcc ec;
        for (int64_t i = 0; i < ssz; ++i) {
          float g;
          std::memcpy(&g, rec2.data() + (cm.slot * ssz + i) * 4, 4);
          ec.add(g, d.rec_state[static_cast<size_t>(cm.slot * ssz + i)]);
        }
        all_ok &= report(cl, "commit-vs-ref", ec);
      }
      all_ok &= report_flag(label, "commit-guards", dc.guards_ok());
    }
  }

  bool guards = true;
  for (const GuardedBuffer* g :
       {&d.d_conv_w, &d.d_a_log, &d.d_dt_bias, &d.d_norm_w, &d.d_conv_state, &d.d_rec_state, &d.d_conv_ckpt,
        &d.d_rec_ckpt, &d.d_qkv, &d.d_z, &d.d_b, &d.d_a, &d.d_out, &d.d_seqs, &d.d_ws}) {
    guards &= g->guards_ok();
  }
  all_ok &= report_flag(label, "guards", guards);
  CHECK(all_ok);
  return all_ok;
}

// Batch composition: the whole batch in one call, then each sequence alone (same slots, rows and starting
// state, max_seq_tokens cut to its own length): outputs, states and checkpoints bit for bit equal. Then the
// batch result against the reference (run_case checks that separately).
inline bool run_batch_invariance(Backend& be, const std::string& shape, const CaseSpec& c) {
  const std::string label = case_label(shape, c) + " batch-vs-alone";
  INFO(label);
  SplitMix rng(c.seed);
  CaseData d;
  setup_case(be, c, d, rng);
  const CallInputs in = make_inputs(d, rng);
  d.d_qkv.upload(in.qkv.data());
  d.d_z.upload(in.z.data());
  d.d_b.upload(in.b.data());
  d.d_a.upload(in.a.data());
  const int32_t n_seqs = static_cast<int32_t>(d.seqs.size());
  const int64_t ssz = d.p.recurrent_state_size(), csz = d.p.conv_state_width();
  const size_t esz = voltserve::dtype_bytes(c.out_dtype);

  auto reset_states = [&] {
    d.d_conv_state.upload(d.conv_state.data());
    d.d_rec_state.upload(d.rec_state.data());
    d.d_conv_ckpt.upload(d.conv_ckpt.data());
    d.d_rec_ckpt.upload(d.rec_ckpt.data());
    d.d_out.fill(kPoisonByte);
    d.d_ws.fill(kPoisonByte);
  };
  reset_states();
  const DeviceArgs all =
      device_args(d, c.mode, c.out_dtype, n_seqs, static_cast<const SeqDesc*>(d.d_seqs.ptr()), d.max_seq_tokens);
  REQUIRE(be.forward(d.p, all).ok());
  const std::vector<uint8_t> out_b = d.d_out.download(), conv_b = d.d_conv_state.download(),
                             rec_b = d.d_rec_state.download(), rck_b = d.d_rec_ckpt.download(),
                             cck_b = d.d_conv_ckpt.download();
  bool all_ok = true;
  for (int32_t i = 0; i < n_seqs; ++i) {
    const SeqDesc& s = d.seqs[static_cast<size_t>(i)];
    if (s.n_tokens <= 0) continue;
    reset_states();
    const DeviceArgs one =
        device_args(d, c.mode, c.out_dtype, 1, static_cast<const SeqDesc*>(d.d_seqs.ptr()) + i, s.n_tokens);
    REQUIRE(be.forward(d.p, one).ok());
    const std::vector<uint8_t> out_1 = d.d_out.download(), conv_1 = d.d_conv_state.download(),
                               rec_1 = d.d_rec_state.download(), rck_1 = d.d_rec_ckpt.download(),
                               cck_1 = d.d_conv_ckpt.download();
    const std::string sl = label + " seq=" + std::to_string(i) + " T=" + std::to_string(s.n_tokens);
    for (int32_t t = 0; t < s.n_tokens; ++t) {
      const size_t at = static_cast<size_t>((s.row0 + t) * d.out_stride) * esz;
      all_ok &= std::memcmp(out_b.data() + at, out_1.data() + at, static_cast<size_t>(d.v_width) * esz) == 0 ||
                report_flag(sl + " t=" + std::to_string(t), "out-bitwise", false);
    }
    all_ok &= report_exact(sl, "state-bitwise", rec_b.data() + s.slot * ssz * 4, rec_1.data() + s.slot * ssz * 4,
                           static_cast<size_t>(ssz) * 4);
    all_ok &= report_exact(sl, "conv-bitwise", conv_b.data() + s.slot * csz * 4, conv_1.data() + s.slot * csz * 4,
                           static_cast<size_t>(csz) * 4);
    if (s.ckpt >= 0) {
      const size_t r0 = static_cast<size_t>(s.ckpt) * static_cast<size_t>(c.max_ckpt_tokens);
      all_ok &=
          report_exact(sl, "ckpt-bitwise", rck_b.data() + r0 * static_cast<size_t>(ssz) * 4,
                       rck_1.data() + r0 * static_cast<size_t>(ssz) * 4, static_cast<size_t>(s.n_tokens * ssz) * 4);
      all_ok &=
          report_exact(sl, "conv-ckpt-bitwise", cck_b.data() + r0 * static_cast<size_t>(csz) * 4,
                       cck_1.data() + r0 * static_cast<size_t>(csz) * 4, static_cast<size_t>(s.n_tokens * csz) * 4);
    }
  }
  report_flag(label, "all", all_ok);
  CHECK(all_ok);
  return all_ok;
}

// Case lists. `big`: include the long and 27B cases (the GPU test); the emulator runs the small ones.
inline std::vector<CaseSpec> recurrent_cases(const Params& p, uint64_t seed) {
  std::vector<CaseSpec> cs;
  for (int32_t T : {1, 2, 3, 5, 8, 13, 16}) {
    for (Mode m : {Mode::kSequential, Mode::kAuto}) {
      CaseSpec c;
      c.name = "segment";
      c.p = p;
      c.mode = m;
      c.out_dtype = T % 2 ? voltserve::DType::kF16 : voltserve::DType::kF32;
      c.seqs = {{T, 1, -1, 1}};
      c.seed = seed++;
      cs.push_back(c);
    }
  }
  CaseSpec batch;  // decode batch: 5 sequences of one token, slots out of order, a padding entry
  batch.name = "decode-batch";
  batch.p = p;
  batch.seqs = {{1, 3}, {1, 0}, {0, 5}, {1, 6, -1, 1}, {1, 2}, {1, 4}};
  batch.seed = seed++;
  cs.push_back(batch);
  return cs;
}

inline std::vector<CaseSpec> chunked_cases(const Params& p, uint64_t seed, bool big) {
  std::vector<CaseSpec> cs;
  std::vector<int32_t> lengths = {17, 64, 65, 200};
  if (big) lengths.push_back(2048);
  for (int32_t T : lengths) {
    for (Mode m : {Mode::kChunked, Mode::kAuto, Mode::kSequential}) {
      CaseSpec c;
      c.name = "segment";
      c.p = p;
      c.mode = m;
      c.out_dtype = T % 2 ? voltserve::DType::kF32 : voltserve::DType::kF16;
      c.seqs = {{T, 0, -1, 2}};
      c.cross_ref = m != Mode::kSequential;
      c.seed = seed++;
      cs.push_back(c);
    }
  }
  for (Mode m : {Mode::kChunked, Mode::kAuto}) {
    CaseSpec c;
    c.name = "weak-decay";
    c.p = p;
    c.mode = m;
    c.seqs = {{big ? 1000 : 150, 1}};
    c.weak_decay = true;
    c.cross_ref = true;
    c.seed = seed++;
    cs.push_back(c);
  }
  return cs;
}

// Several calls continuing the same slots (prefill then decode / verify), mixed batches with a checkpointed
// sequence, commits.
inline std::vector<CaseSpec> mixed_cases(const Params& p, uint64_t seed, bool big) {
  std::vector<CaseSpec> cs;
  {
    CaseSpec c;
    c.name = "continue";
    c.p = p;
    c.n_calls = 3;
    c.cross_ref = true;
    c.seqs = {{37, 1}, {big ? 130 : 70, 0, -1, 1}};
    c.seed = seed++;
    for (Mode m : {Mode::kAuto, Mode::kChunked, Mode::kSequential}) {
      c.mode = m;
      cs.push_back(c);
      ++c.seed;
    }
  }
  {
    CaseSpec c;  // a mixed step: decode, a padding entry, a prefill chunk, a verify item, a short segment
    c.name = "mixed";
    c.p = p;
    c.seqs = {{1, 4}, {0, 7}, {big ? 300 : 90, 2, -1, 3}, {4, 0, 1, 1}, {17, 5}, {3, 3, 0}};
    c.max_ckpt_tokens = 5;
    c.n_ckpt_sets = 3;
    c.commits = {{0, 1, 2}, {3, 0, 0}, {5, 2, 4}};  // the last one names an unused set: a copy of untouched rows
    c.seed = seed++;
    for (Mode m : {Mode::kAuto, Mode::kChunked}) {
      c.mode = m;
      c.out_dtype = m == Mode::kAuto ? voltserve::DType::kF16 : voltserve::DType::kF32;
      cs.push_back(c);
      ++c.seed;
    }
  }
  {
    CaseSpec c;  // speculative verify at batch 4 (k + 1 = 8 rows each), every checkpoint row used
    c.name = "verify";
    c.p = p;
    c.seqs = {{8, 0, 0}, {8, 1, 1}, {8, 2, 2}, {8, 3, 3}};
    c.max_ckpt_tokens = 8;
    c.n_ckpt_sets = 4;
    c.commits = {{0, 0, 7}, {1, 1, 0}, {2, 2, 3}, {3, 3, 5}};
    c.seed = seed++;
    cs.push_back(c);
  }
  return cs;
}

// One commit launch over n_layers layers, each with its own random slots and checkpoints: every layer's slots must
// equal commit_ref applied to that layer's host copy, bit for bit (a commit is a transposing copy), a commit outside
// the checkpoint rows is skipped, the other slots stay as they were, and no guard byte changes. n_layers above
// kernels::gdn::kMaxCommitLayers checks the launches' split.
inline void run_commit_layers(Backend& be, const char* shape, const Params& p, int32_t n_layers, uint64_t seed) {
  constexpr int32_t kSlots = 3, kSets = 2, kTokens = 3;
  const int64_t csz = p.conv_state_width(), ssz = p.recurrent_state_size();
  struct Layer {
    GuardedBuffer conv, rec, conv_ckpt, rec_ckpt;
    std::vector<float> h_conv, h_rec, h_conv_ckpt, h_rec_ckpt;
  };
  SplitMix rng(seed);
  auto random = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = static_cast<float>(rng.uniform() * 2.0 - 1.0);
    return v;
  };
  std::vector<Layer> layers(static_cast<size_t>(n_layers));
  std::vector<State> states;
  for (Layer& L : layers) {
    L.h_conv = random(kSlots * csz);
    L.h_rec = random(kSlots * ssz);
    L.h_conv_ckpt = random(kSets * kTokens * csz);
    L.h_rec_ckpt = random(kSets * kTokens * ssz);
    GuardedBuffer* bufs[] = {&L.conv, &L.rec, &L.conv_ckpt, &L.rec_ckpt};
    const std::vector<float>* hosts[] = {&L.h_conv, &L.h_rec, &L.h_conv_ckpt, &L.h_rec_ckpt};
    for (int i = 0; i < 4; ++i) {
      bufs[i]->init(be, hosts[i]->size() * 4);
      bufs[i]->upload(hosts[i]->data());
    }
    states.push_back({static_cast<float*>(L.conv.ptr()), static_cast<float*>(L.rec.ptr()),
                      static_cast<float*>(L.conv_ckpt.ptr()), static_cast<float*>(L.rec_ckpt.ptr()), kTokens});
  }
  // Slot 2 <- (set 0, token 1), slot 0 <- (set 1, token 2); (slot 1, index kTokens) is outside the rows: skipped.
  const std::vector<Commit> commits = {{2, 0, 1}, {0, 1, 2}, {1, 0, kTokens}};
  GuardedBuffer dc;
  dc.init(be, commits.size() * sizeof(Commit));
  dc.upload(commits.data());
  const KernelStatus st = be.commit(p, states.data(), n_layers, static_cast<const Commit*>(dc.ptr()),
                                    static_cast<int32_t>(commits.size()));
  INFO("commit status " << st.message);
  REQUIRE(st.ok());
  bool all_ok = true;
  for (int32_t l = 0; l < n_layers; ++l) {
    Layer& L = layers[static_cast<size_t>(l)];
    const std::vector<float> conv_before = L.h_conv, rec_before = L.h_rec;
    const State hs{L.h_conv.data(), L.h_rec.data(), L.h_conv_ckpt.data(), L.h_rec_ckpt.data(), kTokens};
    kernels::gdn::commit_ref(p, hs, commits.data(), static_cast<int32_t>(commits.size()));
    const std::string label = std::string("gdn ") + shape + " commit layers=" + std::to_string(n_layers) +
                              " layer=" + std::to_string(l);
    const std::vector<uint8_t> conv = L.conv.download(), rec = L.rec.download();
    all_ok &= report_exact(label, "conv-state", conv.data(), reinterpret_cast<const uint8_t*>(L.h_conv.data()),
                           conv.size());
    all_ok &= report_exact(label, "recurrent-state", rec.data(), reinterpret_cast<const uint8_t*>(L.h_rec.data()),
                           rec.size());
    // The skipped commit's slot: as before (and the reference must not have touched it either).
    all_ok &= report_flag(label, "skipped-slot-unchanged",
                          std::equal(rec_before.begin() + ssz, rec_before.begin() + 2 * ssz, L.h_rec.begin() + ssz) &&
                              std::equal(conv_before.begin() + csz, conv_before.begin() + 2 * csz,
                                         L.h_conv.begin() + csz));
    all_ok &= report_flag(label, "committed-slot-changed",
                          !std::equal(rec_before.begin(), rec_before.begin() + ssz, L.h_rec.begin()));
    all_ok &= report_flag(label, "guards", L.conv.guards_ok() && L.rec.guards_ok() && L.conv_ckpt.guards_ok() &&
                                               L.rec_ckpt.guards_ok());
  }
  CHECK(all_ok);
}

}  // namespace voltserve::test::gdn
