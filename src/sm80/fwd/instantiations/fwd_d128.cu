// Head dim 128 kernels of the library, both dtypes: the configurations dispatch can pick (the
// tuned table's rows and the head-dim default, sm80/tuned_table.h). The tuning candidates are
// tools/tune/candidate_kernels_d128.cu.
#include "sm80/fwd/launch.h"

namespace flashattn::sm80 {

std::span<const KernelEntry> kernels_d128() { return make_entries<dispatchable_kernels<128>()>(); }

}  // namespace flashattn::sm80
