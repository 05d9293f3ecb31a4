// Head dim 128 tuning candidates, both dtypes (library build). Why these: docs/VERSIONS.md (sm80 family).
// Sm80FwdConfig<D, BlockM, BlockN, Warps, Swizzle, EagerKV, FragSlice, QInRegs, RfDoubleBuffer>
#include "sm80/fwd/launch.h"

namespace flashattn::sm80 {

std::span<const KernelEntry> kernels_d128() {
  static const KernelEntry k[] = {
      FLASHATTN_SM80_ENTRIES(Sm80FwdConfig<128, 128, 64, 4>),
      FLASHATTN_SM80_ENTRIES(Sm80FwdConfig<128, 128, 64, 4, true, true, 2, false, true>),
      FLASHATTN_SM80_ENTRIES(Sm80FwdConfig<128, 128, 64, 4, true, true, 1>),
      FLASHATTN_SM80_ENTRIES(Sm80FwdConfig<128, 128, 32, 4>),
      FLASHATTN_SM80_ENTRIES(Sm80FwdConfig<128, 64, 64, 4>),
      FLASHATTN_SM80_ENTRIES(Sm80FwdConfig<128, 64, 64, 4, true, true, 2, true>),
      FLASHATTN_SM80_ENTRIES(Sm80FwdConfig<128, 128, 64, 8, true, true, 2, true>),
      FLASHATTN_SM80_ENTRIES(Sm80FwdConfig<128, 128, 128, 8, true, true, 2, true>),
  };
  return k;
}

}  // namespace flashattn::sm80
