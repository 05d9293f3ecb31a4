// Padded head dim 192 kernels of the library (Sm80FwdPadded, sm80/fwd/config.h): the twins of
// fwd_d192.cu's, for calls whose kernel head dim (sm80::kernel_head_dim) is 192 but whose q/k head
// dim d or v head dim d_v is below it. A unit of their own, so fwd_d192.cu's kernels keep their PTX.
#include "sm80/fwd/launch.h"

namespace flashattn::sm80 {

std::span<const KernelEntry> kernels_d192_padded() { return make_entries<dispatchable_kernels<192, true>()>(); }

}  // namespace flashattn::sm80
