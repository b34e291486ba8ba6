// What the CUDA backend's start-up log reports about the device, with its measured read bandwidth, and the Status
// of a failed CUDA runtime call. Kept free of the Backend headers so that device code (device_probe.cu) can include it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "voltserve/status.h"

namespace voltserve::cuda {

// Status of a CUDA runtime call, naming the call, the file and the line.
Status cuda_status(cudaError_t e, const char* call, const char* file, int line);
#define VS_CUDA_RETURN(call)                                                                           \
  do {                                                                                                 \
    const cudaError_t vs_e_ = (call);                                                                  \
    if (vs_e_ != cudaSuccess) return ::voltserve::cuda::cuda_status(vs_e_, #call, __FILE__, __LINE__); \
  } while (0)

struct DeviceReport {
  std::string name;
  int compute_capability = 0;
  int sm_count = 0;
  size_t memory_total = 0;
  size_t memory_free = 0;
  double read_gbps = 0.0;  // a read-only kernel over a buffer much larger than L2; 0 when it could not run
};
Result<DeviceReport> probe_device(int device, bool measure_bandwidth);

}  // namespace voltserve::cuda
