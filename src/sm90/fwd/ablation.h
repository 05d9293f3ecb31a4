// Build-time ablation switches of the sm90 forward, all in one place. The defaults are the
// shipped configuration; an ablation build flips one for every head dim at once, e.g.
// scripts/stage-libs.sh nopp="-DFLASHATTN_SM90_ABL_PINGPONG=0". They are named *_ABL_* so no
// macro shares a name with a run-time environment switch (docs/ARCHITECTURE.md, "Switches").
#pragma once

#ifndef FLASHATTN_SM90_ABL_PERSISTENT
#define FLASHATTN_SM90_ABL_PERSISTENT 1
#endif
#ifndef FLASHATTN_SM90_ABL_OVERLAP
#define FLASHATTN_SM90_ABL_OVERLAP 1
#endif
#ifndef FLASHATTN_SM90_ABL_PINGPONG
#define FLASHATTN_SM90_ABL_PINGPONG FLASHATTN_SM90_ABL_OVERLAP
#endif
// -1: the tile table's choice; 0/1 force it off/on everywhere.
#ifndef FLASHATTN_SM90_ABL_COND_RESCALE
#define FLASHATTN_SM90_ABL_COND_RESCALE -1
#endif
// Lazy rescaling's threshold (log2 units): the running max is raised only when a tile exceeds it
// by more than this. 0 raises on every increase (P's largest value is then exactly 1, as without
// lazy rescaling) and only skips the O rescale of warps whose rows kept their max.
#ifndef FLASHATTN_SM90_ABL_RESCALE_THRESHOLD
#define FLASHATTN_SM90_ABL_RESCALE_THRESHOLD 8.f
#endif
#ifndef FLASHATTN_SM90_ABL_TMA_STORE
#define FLASHATTN_SM90_ABL_TMA_STORE 1
#endif
// -1: the tile table's choice; 0/1 force it off/on everywhere.
#ifndef FLASHATTN_SM90_ABL_SPLIT_MASKED_LOOP
#define FLASHATTN_SM90_ABL_SPLIT_MASKED_LOOP -1
#endif
// Stream-K tail compiled into the non-causal kernels (1) or not (0); the environment variable
// FLASHATTN_SM90_STREAM_K=0 turns it off per call in a build that has it.
#ifndef FLASHATTN_SM90_ABL_STREAM_K
#define FLASHATTN_SM90_ABL_STREAM_K 1
#endif
#ifndef FLASHATTN_SM90_ABL_DOUBLE_Q
#define FLASHATTN_SM90_ABL_DOUBLE_Q 1
#endif
// Key blocks before the end of a piece at which the next one is claimed (config.h kClaimLead).
#ifndef FLASHATTN_SM90_ABL_CLAIM_LEAD
#define FLASHATTN_SM90_ABL_CLAIM_LEAD 1
#endif
// Tile table overrides (tile_table.h).
#ifndef FLASHATTN_SM90_ABL_D64_CONSUMER_WGS
#define FLASHATTN_SM90_ABL_D64_CONSUMER_WGS 3
#endif
#ifndef FLASHATTN_SM90_ABL_D128_BLOCKN
#define FLASHATTN_SM90_ABL_D128_BLOCKN 128
#endif
#ifndef FLASHATTN_SM90_ABL_D128_CAUSAL_STAGES
#define FLASHATTN_SM90_ABL_D128_CAUSAL_STAGES 2
#endif
#ifndef FLASHATTN_SM90_ABL_D96_BLOCKN
#define FLASHATTN_SM90_ABL_D96_BLOCKN 176
#endif
#ifndef FLASHATTN_SM90_ABL_D96_CAUSAL_BLOCKN
#define FLASHATTN_SM90_ABL_D96_CAUSAL_BLOCKN 128
#endif
#ifndef FLASHATTN_SM90_ABL_D96_CONSUMER_WGS
#define FLASHATTN_SM90_ABL_D96_CONSUMER_WGS 2
#endif
#ifndef FLASHATTN_SM90_ABL_D96_STAGES
#define FLASHATTN_SM90_ABL_D96_STAGES 2
#endif
#ifndef FLASHATTN_SM90_ABL_D192V128_BLOCKN
#define FLASHATTN_SM90_ABL_D192V128_BLOCKN 128
#endif
#ifndef FLASHATTN_SM90_ABL_D192_BLOCKN
#define FLASHATTN_SM90_ABL_D192_BLOCKN 112
#endif
#ifndef FLASHATTN_SM90_ABL_D256_BLOCKN
#define FLASHATTN_SM90_ABL_D256_BLOCKN 80
#endif
// Scheduling modes (launch.h): 0 one CTA per tile, 1 static persistent, 2 dynamic persistent;
// causal -1: the table's choice (dynamic, or one CTA per tile from causal_one_cta_per_tile_seqlen).
#ifndef FLASHATTN_SM90_ABL_SCHED_NONCAUSAL
#define FLASHATTN_SM90_ABL_SCHED_NONCAUSAL 2
#endif
#ifndef FLASHATTN_SM90_ABL_SCHED_CAUSAL
#define FLASHATTN_SM90_ABL_SCHED_CAUSAL -1
#endif
// Softcap kernels (config.h kSoftcap): 1 of every N score registers takes its softmax exp2 on the
// FMA pipe (arch::ex2_poly) instead of MUFU, which MUFU.TANH already loads; 0 = all on MUFU.
#ifndef FLASHATTN_SM90_ABL_SOFTCAP_POLY_EXP2
#define FLASHATTN_SM90_ABL_SOFTCAP_POLY_EXP2 0
#endif
// 1: the steady-state turn's smem descriptors are computed before the turn starts (not between
// its barrier and its wgmmas), and QK^T's k-steps step them by 32-bit adds on the address word.
#ifndef FLASHATTN_SM90_ABL_EARLY_DESC
#define FLASHATTN_SM90_ABL_EARLY_DESC 1
#endif
// Trace builds (-DFLASHATTN_SM90_TRACE=1, never the shipped one): consumer warp 0 of each CTA
// stamps every piece it runs into a buffer the launcher dumps to $FLASHATTN_SM90_TRACE_FILE.
#ifndef FLASHATTN_SM90_TRACE
#define FLASHATTN_SM90_TRACE 0
#endif
