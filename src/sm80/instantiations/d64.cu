// Head dim 64 tuning candidates, both dtypes (library build). Why these: config_table.md.
#include "sm80/launch.h"

namespace flashattn::sm80 {

std::span<const KernelEntry> kernels_d64() {
  static const KernelEntry k[] = {
      FLASHATTN_SM80_ENTRIES(Sm80FwdConfig<64, 128, 64, 4>),
      FLASHATTN_SM80_ENTRIES(Sm80FwdConfig<64, 128, 128, 4>),
      FLASHATTN_SM80_ENTRIES(Sm80FwdConfig<64, 64, 64, 4>),
      FLASHATTN_SM80_ENTRIES(Sm80FwdConfig<64, 128, 64, 8>),
  };
  return k;
}

}  // namespace flashattn::sm80
