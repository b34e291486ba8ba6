# CUDA toolchain and target architectures. VOLTSERVE_CUDA=AUTO enables CUDA when a compiler is found; OFF (or no
# nvcc) builds everything CUDA-free (the kernels' CPU references still build).
#
# Architectures (compute capability) and what the kernels use there:
#   70  Volta (V100): fp16 tensor cores only through mma.sync.m8n8k4, HFMA2; no ldmatrix/cp.async/bf16.
#       The sm70 kernel family. CUDA 13 cannot target it: added only when the compiler is older than 13
#       (CI proves the sm70 family with the CUDA 12.9 ptxas: scripts/check-sm70.sh).
#   75  Turing (T4, RTX 20xx): mma.m16n8k8, ldmatrix; runs the sm70 family (no m16n8k16 with f32 accumulate here).
#   80  Ampere (A100): cp.async, ldmatrix, mma.m16n8k16, bf16 -- the sm80 family.
#   86  Ampere (A10, RTX 30xx): sm80 family, less shared memory per SM.
#   89  Ada (L4, RTX 40xx): sm80 family (fp8 conversions in hardware; not needed by the kernels).
#   90  Hopper (H100, H200): sm80 family; plus PTX of 90 so newer GPUs JIT-compile it.
# VOLTSERVE_CUDA_ARCHITECTURES (e.g. "80" in CI, "90" for an H200 build) overrides the default list.
set(VOLTSERVE_HAVE_CUDA OFF)
set(VOLTSERVE_CUDA_ARCHITECTURES "" CACHE STRING "CUDA architectures to build (default: 75;80;86;89;90 + PTX, 70 with CUDA < 13)")
if(VOLTSERVE_CUDA STREQUAL "ON" OR VOLTSERVE_CUDA STREQUAL "AUTO")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(VOLTSERVE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES ${VOLTSERVE_CUDA_ARCHITECTURES})
    elseif(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 75-real 80-real 86-real 89-real 90)  # 90 = sm_90 SASS + compute_90 PTX
    endif()
    enable_language(CUDA)
    if(NOT VOLTSERVE_CUDA_ARCHITECTURES AND CMAKE_CUDA_COMPILER_VERSION VERSION_LESS 13.0
       AND NOT "70-real" IN_LIST CMAKE_CUDA_ARCHITECTURES)
      list(PREPEND CMAKE_CUDA_ARCHITECTURES 70-real)
    endif()
    find_package(CUDAToolkit REQUIRED)
    set(VOLTSERVE_HAVE_CUDA ON)
  elseif(VOLTSERVE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "VOLTSERVE_CUDA=ON but no CUDA compiler was found")
  endif()
endif()
message(STATUS "voltserve: CUDA ${VOLTSERVE_HAVE_CUDA} ${CMAKE_CUDA_ARCHITECTURES}")
