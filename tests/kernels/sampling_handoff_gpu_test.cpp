// The host-to-device token-mask hand-off (kernels/sampling/mask_handoff.h): the device waits for the host's
// publication made after the launch, ignores an earlier step's ticket, copies exactly the words it was given, times
// out (the ticket in timed_out) when nothing is published, and works from a replayed CUDA graph with a new ticket
// each time. Skips itself without a CUDA device.
#include <catch2/catch_test_macros.hpp>

#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "kernels/sampling/mask_handoff.h"

using namespace voltserve::kernels;
using namespace voltserve::kernels::sampling;

namespace {

#define HANDOFF_CUDA(call)                                              \
  do {                                                                  \
    const cudaError_t e_ = (call);                                      \
    INFO(#call << " -> " << cudaGetErrorString(e_));                    \
    REQUIRE(e_ == cudaSuccess);                                         \
  } while (0)

bool have_device() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

// Mapped pinned host words, device words and a stream: what a backend holds for the hand-off.
struct Rig {
  static constexpr int64_t kWords = 4748 * 3 + 5;  // three rows of a 151,936-id vocabulary and an odd tail
  uint32_t* host = nullptr;                        // [kWords] host masks (pinned)
  uint32_t* sync = nullptr;                        // [0] ready, [1] timed_out
  uint32_t* d_ticket = nullptr;
  uint32_t* d_masks = nullptr;
  cudaStream_t stream = nullptr;
  Rig() {
    HANDOFF_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&host), kWords * 4, cudaHostAllocDefault));
    HANDOFF_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&sync), 2 * 4, cudaHostAllocMapped));
    HANDOFF_CUDA(cudaMalloc(&d_ticket, 4));
    HANDOFF_CUDA(cudaMalloc(&d_masks, kWords * 4));
    HANDOFF_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    sync[0] = sync[1] = 0;
  }
  ~Rig() {
    cudaStreamDestroy(stream);
    cudaFree(d_masks);
    cudaFree(d_ticket);
    cudaFreeHost(sync);
    cudaFreeHost(host);
  }
  MaskHandoff args(int64_t timeout_ns = 10'000'000'000) const {
    MaskHandoff h;
    void* ds = nullptr;
    REQUIRE(cudaHostGetDevicePointer(&ds, sync, 0) == cudaSuccess);
    h.host_masks = host;
    h.ready = static_cast<const uint32_t*>(ds);
    h.timed_out = static_cast<uint32_t*>(ds) + 1;
    h.ticket = d_ticket;
    h.masks = d_masks;
    h.n_words = kWords;
    h.timeout_ns = timeout_ns;
    return h;
  }
  void set_ticket(uint32_t t) { HANDOFF_CUDA(cudaMemcpy(d_ticket, &t, 4, cudaMemcpyHostToDevice)); }
  // What the backend does once the masks are computed: fill, then publish with a release store.
  void publish(uint32_t ticket, uint32_t seed) {
    for (int64_t i = 0; i < kWords; ++i) host[i] = pattern(seed, i);
    std::atomic_ref<uint32_t>(sync[0]).store(ticket, std::memory_order_release);
  }
  static uint32_t pattern(uint32_t seed, int64_t i) { return seed * 2654435761u ^ static_cast<uint32_t>(i * 40503); }
  std::vector<uint32_t> device_masks() {
    std::vector<uint32_t> out(kWords);
    HANDOFF_CUDA(cudaMemcpy(out.data(), d_masks, kWords * 4, cudaMemcpyDeviceToHost));
    return out;
  }
  bool holds(const std::vector<uint32_t>& got, uint32_t seed) const {
    for (int64_t i = 0; i < kWords; ++i) {
      if (got[static_cast<size_t>(i)] != pattern(seed, i)) return false;
    }
    return true;
  }
};

}  // namespace

TEST_CASE("mask hand-off: the device waits for masks published after the launch, not an earlier step's", "[gpu]") {
  if (!have_device()) SKIP("no CUDA device");
  Rig rig;
  rig.publish(4, 44);  // an earlier step's masks and ticket, still in place
  rig.set_ticket(5);
  REQUIRE(await_host_masks(rig.args(), rig.stream).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  CHECK(cudaStreamQuery(rig.stream) == cudaErrorNotReady);  // still waiting for ticket 5
  rig.publish(5, 55);
  HANDOFF_CUDA(cudaStreamSynchronize(rig.stream));
  CHECK(rig.holds(rig.device_masks(), 55));
  CHECK(rig.sync[1] == 0);
}

TEST_CASE("mask hand-off: nothing published within the timeout ends the wait and reports the ticket", "[gpu]") {
  if (!have_device()) SKIP("no CUDA device");
  Rig rig;
  rig.publish(6, 66);
  rig.set_ticket(7);
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(await_host_masks(rig.args(/*timeout_ns=*/20'000'000), rig.stream).ok());
  HANDOFF_CUDA(cudaStreamSynchronize(rig.stream));
  CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(20));
  CHECK(rig.sync[1] == 7u);
  // A ticket published after the give-up is not reported again.
  rig.set_ticket(8);
  rig.publish(8, 88);
  REQUIRE(await_host_masks(rig.args(), rig.stream).ok());
  HANDOFF_CUDA(cudaStreamSynchronize(rig.stream));
  CHECK(rig.holds(rig.device_masks(), 88));
  CHECK(rig.sync[1] == 7u);
}

TEST_CASE("mask hand-off: a captured graph replayed with a new ticket each step gets each step's masks", "[gpu]") {
  if (!have_device()) SKIP("no CUDA device");
  Rig rig;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  HANDOFF_CUDA(cudaStreamBeginCapture(rig.stream, cudaStreamCaptureModeThreadLocal));
  REQUIRE(await_host_masks(rig.args(), rig.stream).ok());
  HANDOFF_CUDA(cudaStreamEndCapture(rig.stream, &graph));
  HANDOFF_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (uint32_t ticket = 1; ticket <= 5; ++ticket) {
    rig.set_ticket(ticket);
    HANDOFF_CUDA(cudaGraphLaunch(exec, rig.stream));
    // A publisher thread, as the engine's mask worker and the backend's end_step are: a little later each time.
    std::thread publisher([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(2 * ticket));
      rig.publish(ticket, 100 + ticket);
    });
    publisher.join();
    HANDOFF_CUDA(cudaStreamSynchronize(rig.stream));
    CHECK(rig.holds(rig.device_masks(), 100 + ticket));
  }
  CHECK(rig.sync[1] == 0);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

TEST_CASE("mask hand-off: argument checks", "[gpu]") {
  if (!have_device()) SKIP("no CUDA device");
  MaskHandoff h;
  CHECK(await_host_masks(h, nullptr).ok());  // nothing to copy
  h.n_words = 8;
  h.timeout_ns = 1000;
  CHECK(await_host_masks(h, nullptr).code == KernelCode::kBadArgument);
  h.timeout_ns = 0;
  CHECK(await_host_masks(h, nullptr).code == KernelCode::kBadShape);
}
