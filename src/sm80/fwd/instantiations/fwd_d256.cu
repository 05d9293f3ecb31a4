// Head dim 256 tuning candidates, both dtypes (library build). Why these: docs/VERSIONS.md (sm80 family).
// Sm80FwdConfig<D, BlockM, BlockN, Warps, Swizzle, EagerKV, FragSlice, QInRegs, RfDoubleBuffer>
#include "sm80/fwd/launch.h"

namespace flashattn::sm80 {

std::span<const KernelEntry> kernels_d256() {
  static const KernelEntry k[] = {
      FLASHATTN_SM80_ENTRIES(Sm80FwdConfig<256, 64, 64, 4>),
      FLASHATTN_SM80_ENTRIES(Sm80FwdConfig<256, 64, 32, 4>),
      FLASHATTN_SM80_ENTRIES(Sm80FwdConfig<256, 128, 64, 8>),
      FLASHATTN_SM80_ENTRIES(Sm80FwdConfig<256, 128, 32, 8>),
      FLASHATTN_SM80_ENTRIES(Sm80FwdConfig<256, 64, 64, 4, true, true, 2, false, true>),
      FLASHATTN_SM80_ENTRIES(Sm80FwdConfig<256, 128, 64, 8, true, true, 2, false, true>),
      FLASHATTN_SM80_ENTRIES(Sm80FwdConfig<256, 128, 64, 8, true, true, 4, false, true>),
  };
  return k;
}

}  // namespace flashattn::sm80
