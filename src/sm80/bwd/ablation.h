// Build-time ablation switches of the sm80 backward (bwd/kernel.h), all in one place. The
// defaults are the shipped configuration; an ablation build flips one for every head dim, e.g.
// scripts/stage-libs.sh order0="-DFLASHATTN_SM80_ABL_BWD_DQ_FIRST=0" (docs/VERSIONS.md, sm80
// backward, has what each measured).
#pragma once

// Non-deterministic calls run a copy of the main loop without the deterministic turns' code.
// 0: one loop, deterministic mode a run-time branch; there the turn's release (fence + store,
// predicated off in non-deterministic calls) still waited every query block for the warp's
// outstanding dQ atomics, as a fence does.
#ifndef FLASHATTN_SM80_ABL_BWD_DET_SPLIT
#define FLASHATTN_SM80_ABL_BWD_DET_SPLIT 1
#endif
// Non-deterministic, double-buffered configurations: dQ = dS K and its atomics first, then dV and
// dK, so the atomics drain under the dV / dK MMAs instead of in front of the next block's barrier.
#ifndef FLASHATTN_SM80_ABL_BWD_DQ_FIRST
#define FLASHATTN_SM80_ABL_BWD_DQ_FIRST 1
#endif
// dQ's atomics address one per-lane pointer with compile-time offsets (0: the pointer of each row
// recomputed from the row index, which ptxas rematerialised with 64-bit multiplies per row).
#ifndef FLASHATTN_SM80_ABL_BWD_LANE_PTR
#define FLASHATTN_SM80_ABL_BWD_LANE_PTR 1
#endif
// Masked blocks set hidden scores to -inf in a pass of their own before the exp2 (0: every score
// of every block selected against the rule after its exp2, which ptxas if-converted into an FSEL
// per score even in blocks that need no mask).
#ifndef FLASHATTN_SM80_ABL_BWD_MASK_INF
#define FLASHATTN_SM80_ABL_BWD_MASK_INF 1
#endif
