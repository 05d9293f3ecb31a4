// Padded head dim 256 kernels of the library (Sm80FwdPadded, sm80/fwd/config.h): the twins of
// fwd_d256.cu's, for calls whose kernel head dim (sm80::kernel_head_dim) is 256 but whose q/k head
// dim d or v head dim d_v is below it. A unit of their own, so fwd_d256.cu's kernels keep their PTX.
#include "sm80/fwd/launch.h"

namespace flashattn::sm80 {

std::span<const KernelEntry> kernels_d256_padded() { return make_entries<dispatchable_kernels<256, true>()>(); }

}  // namespace flashattn::sm80
