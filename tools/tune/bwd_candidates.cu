// The sm80 backward's tuning candidates (bwd_candidates.h). Each is a whole launch_bwd (scratch,
// preprocess, main kernel, postprocess), as the library runs its shipped configurations. Why
// these shapes: warp grids that keep the kernel's 32+-key warp tiles (bwd/config.h) and the
// Q / dO double buffer where it fits 227 KB, around the shipped picks (docs/VERSIONS.md, sm80
// backward S2 and S4).
#include <string>
#include <type_traits>

#include "sm80/bwd/launch.h"
#include "tune/bwd_candidates.h"

namespace flashattn::sm80 {
namespace {

template <Sm80BwdOptions O, class Elem>
Status run_candidate(const detail::BwdParams& p, cudaStream_t stream) {
  using Cfg = Sm80BwdConfig<O>;
  return p.causal ? launch_bwd<Cfg, Elem, MaskKind::kCausal>(p, stream) : launch_bwd<Cfg, Elem, MaskKind::kNone>(p, stream);
}

template <Sm80BwdOptions O, class Elem>
constexpr BwdCandidate entry() {
  return {O, std::is_same_v<Elem, __nv_bfloat16>, Sm80BwdConfig<O>::kSmemBytes, &run_candidate<O, Elem>};
}

}  // namespace

// Both dtypes of one configuration, given as a braced Sm80BwdOptions initializer or a named one.
#define FLASHATTN_SM80_BWD_CANDIDATE(...) \
  entry<Sm80BwdOptions(__VA_ARGS__), __half>(), entry<Sm80BwdOptions(__VA_ARGS__), __nv_bfloat16>()

std::string BwdCandidate::name() const {
  const Sm80BwdOptions& o = options;
  std::string s = "bwd_d" + std::to_string(o.head_dim) + "_m" + std::to_string(o.block_m) + "n" +
                  std::to_string(o.block_n) + "w" + std::to_string(o.warps) + "_sdp" + std::to_string(o.sdp_key_warps) +
                  "_kv" + std::to_string(o.dkv_key_warps) + "_dq" + std::to_string(o.dq_row_warps);
  if (o.sdp_slices != 1) s += "_sl" + std::to_string(o.sdp_slices);
  if (o.dq_passes != 1) s += "_dqp" + std::to_string(o.dq_passes);
  if (!o.double_buffer) s += "_nodb";
  if (o.full_block_loads) s += "_fl";
  if (o.mask_branch) s += "_mb";
  if (o.dq_first) s += "_dqf";
  if (o.dq_mid) s += "_dqm";
  if (o.release_after_dq) s += "_rad";
  if (o.dq_frag_order) s += "_dqo";
  if (o.dq_red_v4) s += "v4";
  if (o.stat_regs) s += "_sr";
  if (o.late_q_load) s += "_lq";
  if (o.smem_epilogue) s += "_ep";
  return s + (bf16 ? "_bf16" : "_fp16");
}

// The loop options (config.h Sm80BwdOptions) as with_flags arguments. The macro lists session
// 30's options (dq_frag_order, dq_red_v4, dq_mid, stat_regs, late_q_load) on one head dim's
// kernels: PLAIN session 30's non-causal kernel, FL its tile with full-block loads, CAUSAL session
// 30's causal kernel, DQF a dq_first kernel, BASE the kernel the combinations build on.
constexpr auto kFl = &BwdOpt::full_block_loads;
constexpr auto kMb = &BwdOpt::mask_branch;
constexpr auto kDqf = &BwdOpt::dq_first;
constexpr auto kRad = &BwdOpt::release_after_dq;
constexpr auto kDqo = &BwdOpt::dq_frag_order;
constexpr auto kV4 = &BwdOpt::dq_red_v4;
constexpr auto kDqm = &BwdOpt::dq_mid;
constexpr auto kSr = &BwdOpt::stat_regs;
constexpr auto kLq = &BwdOpt::late_q_load;
constexpr auto kEp = &BwdOpt::smem_epilogue;
#define FLASHATTN_SM80_BWD_SESSION30_VARIANTS(PLAIN, FL, CAUSAL, DQF, BASE)                  \
  FLASHATTN_SM80_BWD_CANDIDATE(with_flags(PLAIN, kDqo)),                                    \
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(CAUSAL, kDqo)),                               \
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(DQF, kDqo)),                                  \
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(FL, kDqm)),                                   \
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(CAUSAL, kDqm)),                               \
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(FL, kDqm, kDqo)),                             \
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(CAUSAL, kDqm, kDqo)),                         \
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(PLAIN, kSr)),                                 \
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(CAUSAL, kSr)),                                \
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(BASE, kDqm, kDqo, kSr)),                      \
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(PLAIN, kLq)),                                 \
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(CAUSAL, kLq)),                                \
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(BASE, kDqm, kDqo, kSr, kLq)),                 \
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(PLAIN, kDqo, kV4)),                           \
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(CAUSAL, kDqo, kV4)),                          \
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(BASE, kDqm, kDqo, kV4))

// The candidates build on the optionless tiles (config.h kSm80BwdD64Tile / kSm80BwdD128Tile) and
// on session 30's shipped kernels, spelled out here so the list keeps its entries as the shipped
// picks move: D=64 causal and D=128 causal with full-block loads + mask branch, D=128 non-causal
// with full-block loads.
constexpr Sm80BwdOptions kT64 = kSm80BwdD64Tile;
constexpr Sm80BwdOptions kT64Causal = with_flags(kT64, kFl, kMb);
constexpr Sm80BwdOptions kT128 = with_flags(kSm80BwdD128Tile, kFl);
constexpr Sm80BwdOptions kT128Causal = with_flags(kT128, kMb);

std::span<const BwdCandidate> bwd_candidates() {
  static const BwdCandidate k[] = {
      // D=64: the shipped tile without loop options first (tools/tune/bwd_rel.py's reference),
      // other tiles, then the shipped tile with loop options (config.h with_flags; the
      // shipped causal kernel is the full-block-loads + mask-branch one).
      FLASHATTN_SM80_BWD_CANDIDATE(kT64),
      FLASHATTN_SM80_BWD_CANDIDATE({.head_dim = 64, .block_m = 128, .block_n = 128, .warps = 8, .sdp_key_warps = 4,
                                    .dkv_key_warps = 4, .dq_row_warps = 4, .sdp_slices = 2}),
      FLASHATTN_SM80_BWD_CANDIDATE({.head_dim = 64, .block_m = 128, .block_n = 128, .warps = 8, .sdp_key_warps = 2,
                                    .dkv_key_warps = 2, .dq_row_warps = 4}),
      FLASHATTN_SM80_BWD_CANDIDATE({.head_dim = 64, .block_m = 128, .block_n = 128, .warps = 8, .sdp_key_warps = 2,
                                    .dkv_key_warps = 4, .dq_row_warps = 8}),
      FLASHATTN_SM80_BWD_CANDIDATE({.head_dim = 64, .block_m = 64, .block_n = 128, .warps = 8, .sdp_key_warps = 4,
                                    .dkv_key_warps = 4, .dq_row_warps = 4}),
      FLASHATTN_SM80_BWD_CANDIDATE({.head_dim = 64, .block_m = 128, .block_n = 64, .warps = 8, .sdp_key_warps = 2,
                                    .dkv_key_warps = 4, .dq_row_warps = 4}),
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(kT64, kFl)),
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(kT64, kFl, kMb)),
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(kT64, kFl, kDqf)),
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(kT64, kFl, kMb, kDqf)),
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(kT64, kFl, kMb, kDqf, kRad)),
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(kT64, kRad)),
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(kT64, kFl, kMb, kRad)),
      FLASHATTN_SM80_BWD_SESSION30_VARIANTS(kT64, with_flags(kT64, kFl), kT64Causal,
                                            with_flags(kT64, kFl, kMb, kDqf), kT64Causal),
      // Session 31: stat_regs on the dq_frag_order winners (it gained 2% on D=128 causal's fl + mb).
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(kT64Causal, kDqo, kSr)),
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(kT64Causal, kDqm, kDqo, kV4, kSr)),
      // Session 32: the shipped kernels with dK / dV through shared memory.
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(kSm80BwdD64, kEp)),
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(kSm80BwdD64Causal, kEp)),
      // D=128: the shipped tile without loop options first, then the shipped non-causal
      // (kSm80BwdD128: full-block loads) and causal (+ mask branch) kernels among the variants.
      FLASHATTN_SM80_BWD_CANDIDATE(kSm80BwdD128Tile),
      FLASHATTN_SM80_BWD_CANDIDATE(kT128),
      FLASHATTN_SM80_BWD_CANDIDATE({.head_dim = 128, .block_m = 64, .block_n = 128, .warps = 8, .sdp_key_warps = 4,
                                    .dkv_key_warps = 2, .dq_row_warps = 2, .sdp_slices = 2, .full_block_loads = true}),
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(kT128, kMb)),
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(kSm80BwdD128Tile, kMb)),
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(kT128, kMb, kDqf)),
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(kT128, kDqf)),
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(kT128, kDqf, kRad)),
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(kT128, kRad)),
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(kT128, kMb, kRad)),
      FLASHATTN_SM80_BWD_SESSION30_VARIANTS(kT128, kT128, kT128Causal,
                                            with_flags(kT128, kDqf), kT128),
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(kT128, kDqo, kSr)),
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(kT128Causal, kDqo, kSr)),
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(kSm80BwdD128, kEp)),
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(kSm80BwdD128Causal, kEp)),
      FLASHATTN_SM80_BWD_CANDIDATE({.head_dim = 128, .block_m = 64, .block_n = 128, .warps = 8, .sdp_key_warps = 4,
                                    .dkv_key_warps = 2, .dq_row_warps = 4}),
      FLASHATTN_SM80_BWD_CANDIDATE({.head_dim = 128, .block_m = 64, .block_n = 128, .warps = 8, .sdp_key_warps = 4,
                                    .dkv_key_warps = 2, .dq_row_warps = 2, .dq_passes = 2}),
      FLASHATTN_SM80_BWD_CANDIDATE({.head_dim = 128, .block_m = 64, .block_n = 128, .warps = 8, .sdp_key_warps = 4,
                                    .dkv_key_warps = 2, .dq_row_warps = 2, .sdp_slices = 2}),
      FLASHATTN_SM80_BWD_CANDIDATE({.head_dim = 128, .block_m = 128, .block_n = 64, .warps = 8, .sdp_key_warps = 2,
                                    .dkv_key_warps = 2, .dq_row_warps = 4}),
      FLASHATTN_SM80_BWD_CANDIDATE({.head_dim = 128, .block_m = 64, .block_n = 64, .warps = 4, .sdp_key_warps = 2,
                                    .dkv_key_warps = 2, .dq_row_warps = 2}),
      FLASHATTN_SM80_BWD_CANDIDATE({.head_dim = 128, .block_m = 128, .block_n = 128, .warps = 8, .sdp_key_warps = 4,
                                    .dkv_key_warps = 2, .dq_row_warps = 4, .sdp_slices = 2, .double_buffer = false}),
      // D=256: the optionless tile first, as for D=64 / D=128, then the shipped kernel
      // (dq_frag_order).
      FLASHATTN_SM80_BWD_CANDIDATE(kSm80BwdD256Tile),
      FLASHATTN_SM80_BWD_CANDIDATE(kSm80BwdD256),
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(kSm80BwdD256, kEp)),
      FLASHATTN_SM80_BWD_CANDIDATE(with_flags(kSm80BwdD256Tile, kDqo, kV4)),
      FLASHATTN_SM80_BWD_CANDIDATE({.head_dim = 256, .block_m = 64, .block_n = 64, .warps = 8, .sdp_key_warps = 4,
                                    .dkv_key_warps = 2, .dq_row_warps = 2, .dq_passes = 4, .double_buffer = false}),
      FLASHATTN_SM80_BWD_CANDIDATE({.head_dim = 256, .block_m = 64, .block_n = 64, .warps = 8, .sdp_key_warps = 2,
                                    .dkv_key_warps = 2, .dq_row_warps = 2, .dq_passes = 2, .double_buffer = false}),
      FLASHATTN_SM80_BWD_CANDIDATE({.head_dim = 256, .block_m = 64, .block_n = 64, .warps = 8, .sdp_key_warps = 4,
                                    .dkv_key_warps = 4, .dq_row_warps = 2, .dq_passes = 2, .double_buffer = false}),
  };
  return k;
}

}  // namespace flashattn::sm80
