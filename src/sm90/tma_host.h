// Host side of TMA: tensor maps for (B, S, H, D) tensors, through the runtime's driver entry
// point (no libcuda link). Used by every sm90 launcher.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/params.h"

namespace flashattn::sm90 {

// cuTensorMapEncodeTiled through the runtime's driver entry point (no libcuda link).
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult st{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &st) !=
            cudaSuccess ||
        st != cudaDriverEntryPointSuccess)
      p = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// (B, S, H, D) tensor with element strides (sb, ss, sh, 1) as a 4-D map {D, S, H, B}; boxes of
// swizzle_bytes / 2 columns x rows (one swizzle span wide: 64 columns under the default 128B
// swizzle, 32 under 64B). Out-of-bounds rows and columns read as zero.
template <class T>
inline bool encode_bshd(CUtensorMap* map, const detail::View4<T>& t, CUtensorMapDataType dt, int b, int s, int h,
                        int d, int box_rows, int swizzle_bytes = 128) {
  const void* ptr = t.ptr;
  const int64_t sb = t.sb, ss = t.ss, sh = t.sh;
  const cuuint64_t dims[4] = {(cuuint64_t)d, (cuuint64_t)s, (cuuint64_t)h, (cuuint64_t)b};
  const cuuint64_t strides[3] = {(cuuint64_t)ss * 2, (cuuint64_t)sh * 2, (cuuint64_t)sb * 2};
  const cuuint32_t box[4] = {(cuuint32_t)swizzle_bytes / 2, (cuuint32_t)box_rows, 1, 1};
  const cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  const CUtensorMapSwizzle swizzle = swizzle_bytes == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                                     : swizzle_bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                           : CU_TENSOR_MAP_SWIZZLE_32B;
  auto enc = tensor_map_encoder();
  if (enc == nullptr) return false;
  return enc(map, dt, 4, const_cast<void*>(ptr), dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
             swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace flashattn::sm90
