// Ablation variants of the sm80 kernel (fp16 only): at head dim 128 each flips one flag of the
// base configuration, plus the "everything off" kernel; a head dim 192 group compares the tile
// loader's two pass heights. Built into flashattn-sm80-tune only.
#include "sm80/fwd/launch.h"

namespace flashattn::sm80 {

// The fp16 kernels (both mask kinds) of one configuration, given as a braced Sm80FwdOptions
// initializer.
#define ABL(...) make_entry<KernelKey{Sm80FwdOptions __VA_ARGS__, detail::ElemType::kFloat16}>()

std::span<const KernelEntry> ablation_kernels() {
  static const KernelEntry k[] = {
      // base: 128x64, 8 warps (one m16 tile per warp)
      ABL({.head_dim = 128, .block_m = 128, .block_n = 64, .warps = 8}),
      ABL({.head_dim = 128, .block_m = 128, .block_n = 64, .warps = 8, .swizzle = false}),
      ABL({.head_dim = 128, .block_m = 128, .block_n = 64, .warps = 8, .eager_kv = false}),  // just-in-time K/V
      ABL({.head_dim = 128, .block_m = 128, .block_n = 64, .warps = 8, .frag_slice = 0}),  // whole-tile SMEM->RF
      ABL({.head_dim = 128, .block_m = 128, .block_n = 64, .warps = 8, .frag_slice = 1}),
      ABL({.head_dim = 128, .block_m = 128, .block_n = 64, .warps = 8, .q_in_regs = true}),
      ABL({.head_dim = 128, .block_m = 128, .block_n = 64, .warps = 8, .rf_double_buffer = true}),
      ABL({.head_dim = 128, .block_m = 128, .block_n = 64, .warps = 8, .frag_slice = 1, .rf_double_buffer = true}),
      ABL({.head_dim = 128, .block_m = 128, .block_n = 64, .warps = 8, .folded_exp2 = false}),
      // everything off
      ABL({.head_dim = 128, .block_m = 128, .block_n = 64, .warps = 8,
           .swizzle = false, .eager_kv = false, .frag_slice = 0, .folded_exp2 = false}),
      // FA2's shape: 128x64, 4 warps (two m16 tiles per warp)
      ABL({.head_dim = 128, .block_m = 128, .block_n = 64, .warps = 4, .frag_slice = 1}),
      ABL({.head_dim = 128, .block_m = 128, .block_n = 64, .warps = 4, .rf_double_buffer = true}),
      ABL({.head_dim = 128, .block_m = 64, .block_n = 64, .warps = 4, .q_in_regs = true}),
      ABL({.head_dim = 128, .block_m = 64, .block_n = 64, .warps = 4, .rf_double_buffer = true}),
      // The tuned H200 d128 non-causal shape (128x64, 4 warps, FragSlice 2, with and without RF
      // double buffering) against the three main-loop switches (precomputed_swizzle,
      // strided_loads, lazy_rescale): the library default first, then each flipped, then none
      // of the three (with and without RF double buffering).
      ABL({.head_dim = 128, .block_m = 128, .block_n = 64, .warps = 4}),
      ABL({.head_dim = 128, .block_m = 128, .block_n = 64, .warps = 4, .precomputed_swizzle = true}),
      ABL({.head_dim = 128, .block_m = 128, .block_n = 64, .warps = 4, .strided_loads = false}),
      ABL({.head_dim = 128, .block_m = 128, .block_n = 64, .warps = 4, .lazy_rescale = false}),
      ABL({.head_dim = 128, .block_m = 128, .block_n = 64, .warps = 4, .strided_loads = false, .lazy_rescale = false}),
      ABL({.head_dim = 128, .block_m = 128, .block_n = 64, .warps = 4, .rf_double_buffer = true,
           .precomputed_swizzle = true}),
      ABL({.head_dim = 128, .block_m = 128, .block_n = 64, .warps = 4, .rf_double_buffer = true,
           .strided_loads = false, .lazy_rescale = false}),
      // Head dim 192, the loader mapping (swz::LoaderMap; 24 16-B chunks a row): with StridedLoads
      // the pass height divides the tile (8 warps: 8 rows a pass, 64 threads idle; 4 warps: 4
      // rows, 32 idle), without it it is threads / 24 (10 rows, 16 idle, a partial last pass; 5
      // rows, 8 idle). 6 warps (the default 96x64): 8 rows either way, none idle.
      ABL({.head_dim = 192, .block_m = 128, .block_n = 64, .warps = 8}),
      ABL({.head_dim = 192, .block_m = 128, .block_n = 64, .warps = 8, .strided_loads = false}),
      ABL({.head_dim = 192, .block_m = 64, .block_n = 64, .warps = 4}),
      ABL({.head_dim = 192, .block_m = 64, .block_n = 64, .warps = 4, .strided_loads = false}),
      ABL({.head_dim = 192, .block_m = 96, .block_n = 64, .warps = 6}),
      ABL({.head_dim = 192, .block_m = 96, .block_n = 64, .warps = 6, .strided_loads = false}),
  };
  return k;
}

}  // namespace flashattn::sm80
