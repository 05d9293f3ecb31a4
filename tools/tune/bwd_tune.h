// flashattn-sm80-tune --bwd (bwd_tune.cpp): the sm80 backward's candidates (bwd_candidates.h)
// checked against the GPU reference backward, then timed on the standard grid.
#pragma once

#include <string>
#include <vector>

namespace flashattn::tune {

// Every candidate of the head dims in `dims` (64, 128, 256; others are skipped): first the
// correctness gate on awkward shapes (dq, dk, dv under the rule max|cand - ref| <= 2 max|lowp -
// ref| + atol against the fp32 and input-precision GPU reference backwards, no NaN; in
// deterministic mode too, with two runs on two streams bitwise equal), then the median time of
// each passing candidate at S = 2k..16k (B = 16k / S, H = 2048 / D, bf16, causal and not), plain
// ("bwd" rows) and deterministic ("bwd-det"), with the fastest per (mode, D, causal, S). Returns
// 0 when every candidate passed its gate. A non-empty `match` keeps only the candidates whose
// name (without the dtype) contains one of its strings ("x$": ends with x; tune::name_matches),
// and each head dim's first (the reference bwd_rel.py divides by): a short call for a few new
// candidates.
int run_bwd(const std::vector<int>& dims, const std::vector<std::string>& match = {});

}  // namespace flashattn::tune
