// Head dim 192 tuning candidates, both dtypes: the kernels flashattn-sm80-tune --tune times (built
// into the tuner only; the library ships the tuned table's picks). A 192-wide row is 24 16-B
// chunks, so at 4 and 8 warps some loader threads idle (swz::LoaderMap). FA2's hdim-192 shape is
// 128 x 64 with 8 warps; 96 x 64 with 6 warps is the library default. Left out: 128 x 64 with 4
// warps (two m16 tiles a warp need 256 accumulator registers, over Sm80FwdConfig's 208) and
// 64 x 32 with 4 warps (spills 24 B on sm_90a, ptxas 13.0). None of these spills on sm_80 or
// sm_90a; registers and shared memory per candidate: the commit adding this file.
#include "sm80/fwd/launch.h"

namespace flashattn::sm80 {

std::span<const KernelEntry> candidate_kernels_d192() {
  static const KernelEntry k[] = {
      FLASHATTN_SM80_ENTRIES({.head_dim = 192, .block_m = 96, .block_n = 64, .warps = 6}),
      FLASHATTN_SM80_ENTRIES({.head_dim = 192, .block_m = 96, .block_n = 64, .warps = 6, .rf_double_buffer = true}),
      FLASHATTN_SM80_ENTRIES({.head_dim = 192, .block_m = 128, .block_n = 64, .warps = 8}),
      FLASHATTN_SM80_ENTRIES({.head_dim = 192, .block_m = 128, .block_n = 64, .warps = 8, .rf_double_buffer = true}),
      FLASHATTN_SM80_ENTRIES({.head_dim = 192, .block_m = 128, .block_n = 64, .warps = 8, .frag_slice = 1}),
      FLASHATTN_SM80_ENTRIES({.head_dim = 192, .block_m = 128, .block_n = 64, .warps = 8, .q_in_regs = true}),
      FLASHATTN_SM80_ENTRIES({.head_dim = 192, .block_m = 128, .block_n = 128, .warps = 8}),
      FLASHATTN_SM80_ENTRIES({.head_dim = 192, .block_m = 128, .block_n = 128, .warps = 8, .rf_double_buffer = true}),
      FLASHATTN_SM80_ENTRIES({.head_dim = 192, .block_m = 128, .block_n = 32, .warps = 8}),
      FLASHATTN_SM80_ENTRIES({.head_dim = 192, .block_m = 64, .block_n = 64, .warps = 4}),
      FLASHATTN_SM80_ENTRIES({.head_dim = 192, .block_m = 64, .block_n = 64, .warps = 4, .rf_double_buffer = true}),
      FLASHATTN_SM80_ENTRIES({.head_dim = 192, .block_m = 64, .block_n = 64, .warps = 4, .q_in_regs = true}),
  };
  return k;
}

}  // namespace flashattn::sm80
