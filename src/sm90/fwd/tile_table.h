// The configurations the sm90 launcher dispatches to: Sm90TileTable's entries per head dim
// and mask, with the build-time ablation switches (FLASHATTN_SM90_*) applied. Plain C++ (no
// CUDA headers), so the CPU tests check the shipped configurations' smem layouts.
#pragma once

#include "sm90/fwd/config.h"

// Stream-K tail for non-causal persistent launches (stream_k.h): on (1) or off (0).
#ifndef FLASHATTN_SM90_STREAM_K
#define FLASHATTN_SM90_STREAM_K 1
#endif

// Ablation builds flip the optimisation flags for every head dim at once
// (e.g. -DFLASHATTN_SM90_PINGPONG=0); the defaults are the shipped configuration.
#ifndef FLASHATTN_SM90_PERSISTENT
#define FLASHATTN_SM90_PERSISTENT 1
#endif
#ifndef FLASHATTN_SM90_OVERLAP
#define FLASHATTN_SM90_OVERLAP 1
#endif
#ifndef FLASHATTN_SM90_PINGPONG
#define FLASHATTN_SM90_PINGPONG FLASHATTN_SM90_OVERLAP
#endif
// -1: per head dim from Sm90TileTable (on for D=256); 0/1 force it off/on everywhere.
#ifndef FLASHATTN_SM90_COND_RESCALE
#define FLASHATTN_SM90_COND_RESCALE -1
#endif
#ifndef FLASHATTN_SM90_TMA_STORE
#define FLASHATTN_SM90_TMA_STORE 1
#endif
// Separate masked/unmasked key-tile loops: -1 = per head dim and mask (table), 0/1 force it.
#ifndef FLASHATTN_SM90_SPLIT_MASKED_LOOP
#define FLASHATTN_SM90_SPLIT_MASKED_LOOP -1
#endif

// Two Q buffers where they fit (config.h kQStages): 1 on, 0 off.
#ifndef FLASHATTN_SM90_DOUBLE_Q
#define FLASHATTN_SM90_DOUBLE_Q 1
#endif

namespace flashattn::sm90 {

// A table configuration: the tile shape and per-config flags given, the ablation switches
// (FLASHATTN_SM90_*) and the head dim's table entries filling in the rest.
template <int D, bool Bf16, int BlockN, int Stages, int ConsumerWarpgroups, bool SplitMaskedLoop, bool StreamK>
using TableConfig = Sm90FwdConfig<D, BlockN, Stages, Bf16, FLASHATTN_SM90_OVERLAP != 0, FLASHATTN_SM90_PINGPONG != 0,
                                  FLASHATTN_SM90_PERSISTENT != 0, ConsumerWarpgroups,
                                  FLASHATTN_SM90_COND_RESCALE < 0 ? Sm90TileTable<D>::kConditionalRescale
                                                                  : FLASHATTN_SM90_COND_RESCALE != 0,
                                  FLASHATTN_SM90_TMA_STORE != 0,
                                  FLASHATTN_SM90_SPLIT_MASKED_LOOP < 0 ? SplitMaskedLoop
                                                                       : FLASHATTN_SM90_SPLIT_MASKED_LOOP != 0,
                                  StreamK && FLASHATTN_SM90_STREAM_K != 0, FLASHATTN_SM90_DOUBLE_Q != 0>;

// The configuration each (head dim, dtype, mask) dispatches to.
template <int D, bool Bf16, bool Causal, int ConsumerWarpgroups = Sm90TileTable<D>::kConsumerWarpgroups>
using DefaultConfig =
    TableConfig<D, Bf16, Causal ? Sm90TileTable<D>::kBlockNCausal : Sm90TileTable<D>::kBlockN,
                Causal ? Sm90TileTable<D>::kStagesCausal : Sm90TileTable<D>::kStages, ConsumerWarpgroups,
                Causal ? Sm90TileTable<D>::kSplitMaskedLoopCausal : Sm90TileTable<D>::kSplitMaskedLoop, !Causal>;

}  // namespace flashattn::sm90
