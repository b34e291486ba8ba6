// KernelStatus: what every kernel entry point returns (no exceptions, logging or globals in kernels), and
// VS_CUDA_TRY, which checks a CUDA call and records the file and line of the first failure.
#pragma once

namespace voltserve::kernels {

enum class KernelCode { kOk = 0, kBadArgument, kBadShape, kUnsupported, kWorkspaceTooSmall, kCudaError };

struct KernelStatus {
  KernelCode code = KernelCode::kOk;
  const char* message = "";  // static string: what was wrong
  const char* file = "";
  int line = 0;
  int cuda_error = 0;  // cudaError_t / cublasStatus_t value when code == kCudaError

  bool ok() const { return code == KernelCode::kOk; }
  static KernelStatus Ok() { return {}; }
};

inline KernelStatus kernel_error(KernelCode code, const char* message, const char* file, int line, int err = 0) {
  return KernelStatus{code, message, file, line, err};
}

}  // namespace voltserve::kernels

#define VS_KERNEL_FAIL(code, msg) \
  ::voltserve::kernels::kernel_error(::voltserve::kernels::KernelCode::code, msg, __FILE__, __LINE__)

// Only in CUDA translation units: returns a KernelStatus naming the failing call, file and line.
#define VS_CUDA_TRY(call)                                                                                \
  do {                                                                                                   \
    const cudaError_t vs_err_ = (call);                                                                  \
    if (vs_err_ != cudaSuccess) {                                                                        \
      return ::voltserve::kernels::kernel_error(::voltserve::kernels::KernelCode::kCudaError, #call,     \
                                                __FILE__, __LINE__, static_cast<int>(vs_err_));          \
    }                                                                                                    \
  } while (0)
