// Head dim 256 tuning candidates, both dtypes (library build). Why these: config_table.md.
#include "sm80/launch.h"

namespace flashattn::sm80 {

std::span<const KernelEntry> kernels_d256() {
  static const KernelEntry k[] = {
      FLASHATTN_SM80_ENTRIES(Sm80FwdConfig<256, 64, 64, 4>),
      FLASHATTN_SM80_ENTRIES(Sm80FwdConfig<256, 64, 32, 4>),
      FLASHATTN_SM80_ENTRIES(Sm80FwdConfig<256, 128, 64, 8>),
      FLASHATTN_SM80_ENTRIES(Sm80FwdConfig<256, 128, 32, 8>),
  };
  return k;
}

}  // namespace flashattn::sm80
