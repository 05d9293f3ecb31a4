// Head dim 192 kernels of the library, both dtypes: the configurations dispatch can pick (the
// head-dim default, sm80/tuned_table.h; the tuned table has no 192 rows yet, and the tuner no 192
// candidates).
#include "sm80/fwd/launch.h"

namespace flashattn::sm80 {

std::span<const KernelEntry> kernels_d192() { return make_entries<dispatchable_kernels<192>()>(); }

}  // namespace flashattn::sm80
