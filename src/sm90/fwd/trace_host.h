// Host side of the sm90 trace build (FLASHATTN_SM90_TRACE, kernel_args.h): empty otherwise.
// Included by launch_template.h only; bench/trace_sm90.py reads what it writes.
#pragma once

#include "sm90/fwd/kernel_args.h"

#if FLASHATTN_SM90_TRACE
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "common/params.h"

namespace flashattn::sm90 {

// Trace builds only: waits for the launch and appends "cta k code stored t_start t_main t_end"
// lines (ns, relative to the earliest start) to $FLASHATTN_SM90_TRACE_FILE.
inline void dump_trace(unsigned long long* d_trace, int grid, const StreamKPlan& plan, const detail::FwdParams& p) {
  std::vector<unsigned long long> h(static_cast<size_t>(grid) * kTraceEvents * 4);
  cudaDeviceSynchronize();
  cudaMemcpy(h.data(), d_trace, h.size() * 8, cudaMemcpyDeviceToHost);
  cudaFree(d_trace);
  const char* path = std::getenv("FLASHATTN_SM90_TRACE_FILE");
  if (path == nullptr) return;
  unsigned long long t0 = ~0ull;
  for (size_t i = 0; i < h.size(); i += 4)
    if (h[i + 1] != 0 && h[i + 1] < t0) t0 = h[i + 1];
  FILE* f = std::fopen(path, "a");
  if (f == nullptr) return;
  std::fprintf(f, "# launch b=%d sq=%d sk=%d hq=%d d=%d causal=%d grid=%d dp_tiles=%d sk_tiles=%d chunks=%d n_blocks=%d\n",
               p.b, p.sq, p.sk, p.hq, p.d, p.causal ? 1 : 0, grid, plan.dp_tiles, plan.sk_tiles, plan.chunks,
               plan.n_blocks);
  for (int c = 0; c < grid; ++c)
    for (int k = 0; k < kTraceEvents; ++k) {
      const unsigned long long* e = &h[(static_cast<size_t>(c) * kTraceEvents + k) * 4];
      if (e[1] == 0) continue;
      std::fprintf(f, "%d %d %llu %llu %llu %llu %llu\n", c, k, e[0] & 0xffffffffull, e[0] >> 32, e[1] - t0,
                   e[2] - t0, e[3] - t0);
    }
  std::fclose(f);
}

}  // namespace flashattn::sm90
#endif
