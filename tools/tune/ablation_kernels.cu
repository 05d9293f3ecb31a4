// Ablation variants of the sm80 kernel (head dim 128, fp16 only): each flips one flag of the
// base configuration, plus the "everything off" kernel. Built into flashattn-sm80-tune only.
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
  };
  return k;
}

}  // namespace flashattn::sm80
