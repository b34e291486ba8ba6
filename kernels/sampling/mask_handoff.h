// The hand-off of a step's structured-output token masks from the host to the device while the step runs
// (engine/core/mask_worker.h computes them during the forward). The host launches the whole step, graph or eager,
// before the masks exist; placed just before the sampler, a one-thread kernel waits on the device until the host has
// written them into pinned memory and published the step's ticket in a mapped word, then a copy-engine transfer
// brings them in (one DMA rather than SM loads from host memory, which cross the bus a few bytes per transaction;
// a first version that copied with the SMs measured the same step times, bench/RESULTS.md). A ticket (a per-step number the host uploads
// with the step's metadata, outside any graph) rather than a flag the host resets keeps a replayed graph from
// reading an earlier step's publication. A host that never publishes (a bug) cannot hang the device: after
// timeout_ns the kernel gives up and writes the ticket to `timed_out`, which the host checks after the step (the
// masks copied are then stale, and the step must fail). CUDA-free header; tested by
// tests/kernels/sampling_handoff_gpu_test.cpp and, in whole masked steps, tests/golden/cuda_model_test.cpp.
#pragma once

#include <cstdint>

#include "common/kernel_status.h"

namespace voltserve::kernels::sampling {

struct MaskHandoff {
  const uint32_t* host_masks = nullptr;  // pinned host memory (the host's pointer): n_words, host-written
  const uint32_t* ready = nullptr;       // mapped pinned word (its device pointer): the host stores the ticket here
                                         // once host_masks is full
  const uint32_t* ticket = nullptr;      // device memory: the ticket of this step
  uint32_t* timed_out = nullptr;         // mapped pinned word (device pointer): the ticket, when the device gave up
  uint32_t* masks = nullptr;             // device memory the sampler reads
  int64_t n_words = 0;
  int64_t timeout_ns = 0;
};

KernelStatus await_host_masks(const MaskHandoff& h, void* stream);

}  // namespace voltserve::kernels::sampling
