// Head dim 256 tuning candidates, both dtypes: the kernels flashattn-sm80-tune --tune times (built
// into the tuner only; the library ships the tuned table's picks). Why these: docs/VERSIONS.md
// (sm80 family).
#include "sm80/fwd/launch.h"

namespace flashattn::sm80 {

std::span<const KernelEntry> candidate_kernels_d256() {
  static const KernelEntry k[] = {
      FLASHATTN_SM80_ENTRIES({.head_dim = 256, .block_m = 64, .block_n = 64, .warps = 4}),
      FLASHATTN_SM80_ENTRIES({.head_dim = 256, .block_m = 64, .block_n = 32, .warps = 4}),
      FLASHATTN_SM80_ENTRIES({.head_dim = 256, .block_m = 128, .block_n = 64, .warps = 8}),
      FLASHATTN_SM80_ENTRIES({.head_dim = 256, .block_m = 128, .block_n = 32, .warps = 8}),
      FLASHATTN_SM80_ENTRIES({.head_dim = 256, .block_m = 64, .block_n = 64, .warps = 4, .rf_double_buffer = true}),
      FLASHATTN_SM80_ENTRIES({.head_dim = 256, .block_m = 128, .block_n = 64, .warps = 8, .rf_double_buffer = true}),
      FLASHATTN_SM80_ENTRIES(
          {.head_dim = 256, .block_m = 128, .block_n = 64, .warps = 8, .frag_slice = 4, .rf_double_buffer = true}),
      // Q in registers with 32-key blocks (fewer shared-memory bytes per MMA, the suspected bound
      // at D=256: docs/VERSIONS.md, sm80 part, session 30): 8 warps (1 CTA per SM) and 4 warps.
      FLASHATTN_SM80_ENTRIES({.head_dim = 256, .block_m = 128, .block_n = 32, .warps = 8, .q_in_regs = true}),
      FLASHATTN_SM80_ENTRIES(
          {.head_dim = 256, .block_m = 128, .block_n = 32, .warps = 8, .q_in_regs = true, .rf_double_buffer = true}),
      FLASHATTN_SM80_ENTRIES({.head_dim = 256, .block_m = 64, .block_n = 32, .warps = 4, .frag_slice = 1, .q_in_regs = true}),
      // O's columns split over warp pairs, P through shared memory (fwd/col_split.h): each V
      // fragment feeds two m16 tiles (docs/VERSIONS.md, sm80 part, session 33).
      FLASHATTN_SM80_ENTRIES({.head_dim = 256, .block_m = 64, .block_n = 64, .warps = 4, .o_col_split = true}),
      FLASHATTN_SM80_ENTRIES(
          {.head_dim = 256, .block_m = 64, .block_n = 64, .warps = 4, .rf_double_buffer = true, .o_col_split = true}),
      FLASHATTN_SM80_ENTRIES({.head_dim = 256, .block_m = 128, .block_n = 64, .warps = 8, .o_col_split = true}),
      FLASHATTN_SM80_ENTRIES(
          {.head_dim = 256, .block_m = 64, .block_n = 64, .warps = 4, .frag_slice = 1, .o_col_split = true}),
  };
  return k;
}

}  // namespace flashattn::sm80
