// Feature head dim 256 kernels of the library (Sm80FwdFeature over the padded feature
// configuration, sm80/fwd/config.h): sliding windows, softcap and ALiBi for dense calls whose
// kernel head dim (sm80::kernel_head_dim) is 256, both dtypes, kLocal mask. A unit of its own, so
// the kNone / kCausal kernels of the other units keep their PTX.
#include "sm80/fwd/launch.h"

namespace flashattn::sm80 {

std::span<const KernelEntry> kernels_d256_feature() { return make_entries<feature_kernels<256>()>(); }

}  // namespace flashattn::sm80
