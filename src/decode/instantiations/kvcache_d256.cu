// KV-cache attention kernels of covering head dim 256 (fp16 and bf16).
#include "decode/launch.h"

namespace flashattn::decode {

template Status run_kvcache_attention<256, false>(const detail::KvCacheParams&, cudaStream_t);
template Status run_kvcache_attention<256, true>(const detail::KvCacheParams&, cudaStream_t);

}  // namespace flashattn::decode
