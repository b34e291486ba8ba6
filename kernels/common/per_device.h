// PerDevice<T>: a value computed once per CUDA device ordinal, thread-safe, for what a launch consults every time
// (compute capability, SM count, occupancy of a kernel family) and that differs between the GPUs of one process.
// The fast path is one std::call_once check. CUDA-free: `make(dev)` does the device queries.
#pragma once

#include <array>
#include <mutex>

namespace voltserve::kernels {

template <class T>
class PerDevice {
 public:
  // The value for device `dev`, made by make(dev) on first use; the reference stays valid for the process (ordinals
  // past kMaxDevices are made again on every call, into a per-thread slot).
  template <class Make>
  const T& get(int dev, Make&& make) {
    if (dev < 0 || dev >= kMaxDevices) {
      thread_local T overflow;
      overflow = make(dev);
      return overflow;
    }
    std::call_once(once_[static_cast<size_t>(dev)], [&] { values_[static_cast<size_t>(dev)] = make(dev); });
    return values_[static_cast<size_t>(dev)];
  }

  static constexpr int kMaxDevices = 64;

 private:
  std::array<std::once_flag, kMaxDevices> once_{};
  std::array<T, kMaxDevices> values_{};
};

}  // namespace voltserve::kernels
