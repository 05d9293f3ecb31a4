// Varlen head dim 192 kernels of the library (Sm80FwdVarlen over the padded default
// configuration, sm80/fwd/config.h): packed variable-length batches whose kernel head dim
// (sm80::kernel_head_dim) is 192, both dtypes and masks. A unit of their own, so the dense kernels
// of fwd_d192.cu and fwd_d192_padded.cu keep their PTX.
#include "sm80/fwd/launch.h"

namespace flashattn::sm80 {

std::span<const KernelEntry> kernels_d192_varlen() { return make_entries<varlen_kernels<192>()>(); }

}  // namespace flashattn::sm80
