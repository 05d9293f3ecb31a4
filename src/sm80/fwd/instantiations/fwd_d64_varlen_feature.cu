// Varlen feature head dim 64 kernels of the library (Sm80FwdFeature over Sm80FwdVarlen over the
// padded feature configuration, sm80/fwd/config.h): packed variable-length batches with a sliding
// window, softcap or ALiBi whose kernel head dim (sm80::kernel_head_dim) is 64, both dtypes, kLocal
// mask. A unit of its own, so the kernels of the varlen and feature units keep their PTX.
#include "sm80/fwd/launch.h"

namespace flashattn::sm80 {

std::span<const KernelEntry> kernels_d64_varlen_feature() { return make_entries<varlen_feature_kernels<64>()>(); }

}  // namespace flashattn::sm80
