// Head dim 256 kernels of the library, both dtypes: the configurations dispatch can pick (the
// tuned table's rows and the head-dim default, sm80/tuned_table.h). The tuning candidates are
// tools/tune/candidate_kernels_d256.cu.
#include "sm80/fwd/launch.h"

namespace flashattn::sm80 {

std::span<const KernelEntry> kernels_d256() { return make_entries<dispatchable_kernels<256>()>(); }

}  // namespace flashattn::sm80
