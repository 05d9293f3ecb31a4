// Ablation variants of the sm80 kernel (head dim 128, fp16 only): each flips one flag of the
// base configuration, plus the "everything off" kernel. Built into flashattn-sm80-tune only.
#include "sm80/fwd/launch.h"

namespace flashattn::sm80 {

// Sm80FwdConfig<D, BM, BN, W, Swizzle, EagerKV, FragSlice, QInRegs, RfDoubleBuffer, FoldedExp2,
//               PrecomputedSwizzle, StridedLoads, LazyRescale>
#define ABL(...) make_entry<Sm80FwdConfig<__VA_ARGS__>, __half>()

std::span<const KernelEntry> ablation_kernels() {
  static const KernelEntry k[] = {
      // base: 128x64, 8 warps (one m16 tile per warp)
      ABL(128, 128, 64, 8, true, true, 2, false, false, true),
      ABL(128, 128, 64, 8, false, true, 2, false, false, true),   // no swizzle
      ABL(128, 128, 64, 8, true, false, 2, false, false, true),   // lazy (just-in-time) K/V
      ABL(128, 128, 64, 8, true, true, 0, false, false, true),    // whole-tile SMEM->RF
      ABL(128, 128, 64, 8, true, true, 1, false, false, true),    // 1-step slices
      ABL(128, 128, 64, 8, true, true, 2, true, false, true),     // Q resident in RF
      ABL(128, 128, 64, 8, true, true, 2, false, true, true),     // RF double buffer
      ABL(128, 128, 64, 8, true, true, 1, false, true, true),     // RF double buffer, 1-step slices
      ABL(128, 128, 64, 8, true, true, 2, false, false, false),   // unfolded exp2
      ABL(128, 128, 64, 8, false, false, 0, false, false, false), // everything off
      // FA2's shape: 128x64, 4 warps (two m16 tiles per warp)
      ABL(128, 128, 64, 4, true, true, 1, false, false, true),
      ABL(128, 128, 64, 4, true, true, 2, false, true, true),
      ABL(128, 64, 64, 4, true, true, 2, true, false, true),
      ABL(128, 64, 64, 4, true, true, 2, false, true, true),
      // The tuned H200 d128 non-causal shape (128x64, 4 warps, FragSlice 2, with and without
      // RF double buffering), main-loop switches spelled out: (PrecomputedSwizzle, StridedLoads,
      // LazyRescale). The first row is the library default (_nopsw); the last two are the kernel
      // before the three switches.
      ABL(128, 128, 64, 4, true, true, 2, false, false, true, false, true, true),   // default
      ABL(128, 128, 64, 4, true, true, 2, false, false, true, true, true, true),    // + precomputed swizzle
      ABL(128, 128, 64, 4, true, true, 2, false, false, true, false, false, true),  // no strided K/V loads
      ABL(128, 128, 64, 4, true, true, 2, false, false, true, false, true, false),  // no lazy rescale
      ABL(128, 128, 64, 4, true, true, 2, false, false, true, false, false, false), // none of the three
      ABL(128, 128, 64, 4, true, true, 2, false, true, true, true, true, true),     // db + precomputed swizzle
      ABL(128, 128, 64, 4, true, true, 2, false, true, true, false, false, false),  // db, none of the three
  };
  return k;
}

}  // namespace flashattn::sm80
