// Combine step of a split KV-cache call: each output row is the lse-weighted sum of its splits'
// partial outputs (each normalized by its own sum): out = sum_s w_s O_s / sum_s w_s with
// w_s = 2^(lse_s - max lse), lse = max + log2(sum w) (in natural log on the way out). A split
// that saw no key has lse -inf and weight 0; a row no split saw gets out 0 and lse -inf.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "arch/convert.h"
#include "arch/fast_math.h"
#include "decode/kernel_args.h"
#include "decode/launchers.h"
#include "decode/split_heuristic.h"

namespace flashattn::decode {
namespace {

constexpr int kCombineWarps = 4;  // one output row per warp; grid (query blocks of 4, Hq, B)

template <bool kBf16>
__global__ void __launch_bounds__(32 * kCombineWarps) kvcache_combine_kernel(const __grid_constant__ DecodeArgs args) {
  constexpr float kNegInf = -__builtin_huge_valf();
  __shared__ float s_w[kCombineWarps][kMaxSplits];  // this warp's row: weight of each split
  const detail::KvCacheParams& p = args.p;
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int qi = static_cast<int>(blockIdx.x) * kCombineWarps + warp, head = static_cast<int>(blockIdx.y);
  if (qi >= p.sq) return;  // whole warps only: no block-wide barrier below
  const int n = args.splits;
  // gridDim.z is at most 65535: larger batches loop (and no 64-bit division decodes a row).
  for (int b = static_cast<int>(blockIdx.z); b < p.b; b += static_cast<int>(gridDim.z)) {
    const int64_t row = (int64_t(b) * p.hq + head) * p.sq + qi;  // lse's (B, Hq, Sq) order
    float mx = kNegInf;
    for (int s = lane; s < n; s += 32) mx = fmaxf(mx, args.lse_part[int64_t(s) * args.rows + row]);
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    const float mu = mx == kNegInf ? 0.f : mx;
    float sum = 0.f;
    for (int s = lane; s < n; s += 32) {
      const float w = arch::ex2_approx_ftz(args.lse_part[int64_t(s) * args.rows + row] - mu);
      s_w[warp][s] = w;
      sum += w;
    }
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    __syncwarp();  // s_w complete
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    char* out = static_cast<char*>(p.o.ptr) + 2 * (int64_t(b) * p.o.sb + int64_t(qi) * p.o.ss + int64_t(head) * p.o.sh);
    for (int c = lane * 4; c < p.d_v; c += 128) {
      float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
      for (int s = 0; s < n; ++s) {
        const float w = s_w[warp][s];
        if (w == 0.f) continue;  // splits without keys are never read
        const float4 x = *reinterpret_cast<const float4*>(args.o_part + (int64_t(s) * args.rows + row) * p.d_v + c);
        acc.x += w * x.x;
        acc.y += w * x.y;
        acc.z += w * x.z;
        acc.w += w * x.w;
      }
      uint2 v;
      v.x = arch::pack_f32x2<kBf16>(acc.x * inv, acc.y * inv);
      v.y = arch::pack_f32x2<kBf16>(acc.z * inv, acc.w * inv);
      *reinterpret_cast<uint2*>(out + 2 * c) = v;
    }
    if (lane == 0 && p.lse != nullptr) p.lse[row] = sum > 0.f ? (mx + log2f(sum)) * 0.6931471805599453f : kNegInf;
    __syncwarp();  // every lane is done with s_w before the next batch's row rewrites it
  }
}

}  // namespace

Status launch_combine(const DecodeArgs& args, cudaStream_t stream) {
  const detail::KvCacheParams& p = args.p;
  if (args.rows <= 0) return Status::Ok();
  if (p.hq > 65535) return {StatusCode::kNotSupported, "kvcache: more than 65535 query heads"};
  const dim3 grid(static_cast<unsigned>((p.sq + kCombineWarps - 1) / kCombineWarps), static_cast<unsigned>(p.hq),
                  static_cast<unsigned>(p.b < 65535 ? p.b : 65535));
  if (args.p.dtype == detail::ElemType::kBFloat16)
    kvcache_combine_kernel<true><<<grid, 32 * kCombineWarps, 0, stream>>>(args);
  else
    kvcache_combine_kernel<false><<<grid, 32 * kCombineWarps, 0, stream>>>(args);
  return launch_status("combine kernel launch");
}

}  // namespace flashattn::decode
