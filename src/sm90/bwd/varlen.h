// Packed variable-length batches in the sm90 backward (BwdConfig::kVarlen): the kernel's
// arguments, where a sequence sits in the packed tensors, the padded layout of the scratch, and
// the shared-memory zeroing of rows that lie outside a sequence.
//
// Where a sequence sits and the padded scratch layout (VarlenLayout) are common/varlen_layout.h's,
// shared with the sm80 backward. Deterministic mode's turn counters are per (sequence, head,
// query block), so offsets that break the contract can never make a CTA wait on a turn that
// never comes.
#pragma once

#include <cstdint>
#include <type_traits>

#include "common/varlen_layout.h"
#include "sm90/bwd/kernel_args.h"

namespace flashattn::sm90 {

struct Sm90BwdVarlenArgs : Sm90BwdArgs {
  // sq / sk (base): the max lengths. num_m_blocks: padded blocks per head; sq_pad = num_m_blocks
  // * kBlockM. dq_turn: (num_seqs, hq, turn_m_blocks) in deterministic mode.
  const int* cu_q = nullptr;
  const int* cu_k = nullptr;
  int total_q = 0, total_k = 0;
  int turn_m_blocks = 0;  // ceil(max_seqlen_q / kBlockM)
};
// The varlen feature kernels' (kVarlen and kLocal): the window as the call's max lengths bound it
// (an unbounded side stays unbounded for every sequence), softcap, ALiBi by sequence.
using Sm90BwdVarlenFeatureArgs = WithBwdFeatures<Sm90BwdVarlenArgs>;
// The causal varlen kernels' (BwdConfig::kGroupedOrder): as the dense Sm90BwdCausalArgs, a
// one-dimensional grid in `order` (grouped = 1) over (key block, kv head, sequence), key block 0
// of an L2-sized group of (sequence, kv head) pairs first. Key blocks past a short sequence's
// keys exit at once wherever they fall.
struct Sm90BwdVarlenCausalArgs : Sm90BwdVarlenArgs {
  TileOrder order;
  int grouped = 0;
};
template <class Cfg>
using BwdVarlenArgsOf =
    std::conditional_t<Cfg::kLocal, Sm90BwdVarlenFeatureArgs,
                       std::conditional_t<Cfg::kGroupedOrder, Sm90BwdVarlenCausalArgs, Sm90BwdVarlenArgs>>;

using detail::varlen_rows;
using detail::varlen_rows_of;
using detail::VarlenLayout;
using detail::VarlenRows;

// Zeroes rows [first, kRows) of a shared-memory tile of kBoxes 64-column boxes of kRows rows,
// from `threads` threads (t is this one's index). A 128-byte swizzle permutes the 16-byte chunks
// of a row only within that row's own 128-byte line, so whole rows are zeroed without knowing it.
template <int kRows, int kBoxes, int kThreads>
__device__ __forceinline__ void zero_tile_rows(uint8_t* tile, int first, int t) {
  const int chunks = (kRows - first) * 8;  // 16-byte chunks per box
  for (int i = t; i < kBoxes * chunks; i += kThreads) {
    const int box = i / chunks, c = i - box * chunks;
    *reinterpret_cast<uint4*>(tile + box * (kRows * 128) + first * 128 + c * 16) = make_uint4(0u, 0u, 0u, 0u);
  }
}

}  // namespace flashattn::sm90
