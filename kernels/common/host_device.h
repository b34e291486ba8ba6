// VS_HD marks helpers usable from host C++ and from CUDA device code alike.
#pragma once

#if defined(__CUDACC__)
#define VS_HD __host__ __device__ __forceinline__
#else
#define VS_HD inline
#endif
