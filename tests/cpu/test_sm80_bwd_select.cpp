// The sm80 backward's shared-memory tiers (sm80/bwd/select.h) and the shared memory of the
// configurations behind them (sm80/bwd/config.h): no GPU.
#include <gtest/gtest.h>

#include "sm80/bwd/config.h"
#include "sm80/bwd/select.h"

using namespace flashattn::sm80;

namespace {

// cudaDevAttrMaxSharedMemoryPerBlockOptin of the parts the tiers are for.
constexpr int kSm86 = kSm86SmemOptin;  // A10, L4, L40, RTX 30 / 40
constexpr int kA100 = 166912;          // 163 KB
constexpr int kH100 = 232448;          // 227 KB (H100, H200)

template <Sm80BwdOptions O>
constexpr int smem() {
  return Sm80BwdConfig<O>::kSmemBytes;
}

}  // namespace

TEST(Sm80BwdSelect, TierOfEachPart) {
  EXPECT_EQ(kSm86SmemOptin, 101376);
  EXPECT_EQ(sm80_bwd_tier(kSm86), Sm80BwdTier::kSmall);
  EXPECT_EQ(sm80_bwd_tier(kA100), Sm80BwdTier::kFull);
  EXPECT_EQ(sm80_bwd_tier(kH100), Sm80BwdTier::kFull);
  // Below the small tier's largest kernel nothing runs; the boundaries are inclusive.
  EXPECT_EQ(sm80_bwd_tier(48 * 1024), Sm80BwdTier::kNone);
  EXPECT_EQ(sm80_bwd_tier(kSm80BwdSmallSmem - 1), Sm80BwdTier::kNone);
  EXPECT_EQ(sm80_bwd_tier(kSm80BwdSmallSmem), Sm80BwdTier::kSmall);
  EXPECT_EQ(sm80_bwd_tier(kSm80BwdFullSmem - 1), Sm80BwdTier::kSmall);
  EXPECT_EQ(sm80_bwd_tier(kSm80BwdFullSmem), Sm80BwdTier::kFull);
}

// The bytes, derived by hand from the layout (K, V, Q and dO per stage, P^T, dS^T, lse and dsum
// per stage): a change of a configuration must show here.
TEST(Sm80BwdSelect, SmallConfigsFitSm86) {
  // 64 x 128, D=64, two stages: 2*16K + 2*2*8K + 2*16K + 2*2*256.
  EXPECT_EQ(smem<kSm80BwdD64Small>(), 99328);
  // 64 x 64, D=128, one stage: 2*16K + 2*16K + 2*8K + 2*256.
  EXPECT_EQ(smem<kSm80BwdD128Small>(), 82432);
  // 64 x 16, D=256, one stage: 2*8K + 2*32K + 2*2K + 2*256.
  EXPECT_EQ(smem<kSm80BwdD256Small>(), 86528);
  EXPECT_LE(smem<kSm80BwdD64Small>(), kSm86);
  EXPECT_LE(smem<kSm80BwdD128Small>(), kSm86);
  EXPECT_LE(smem<kSm80BwdD256Small>(), kSm86);
  EXPECT_EQ(kSm80BwdSmallSmem, smem<kSm80BwdD64Small>());
}

// The small tier's feature kernels keep the plain small tiles (the query slices of the score pass
// change registers, not shared memory), so they fit where the plain ones do; the varlen twins
// take their configurations' tiles.
TEST(Sm80BwdSelect, SmallFeatureConfigsAreThePlainTiles) {
  EXPECT_EQ(smem<kSm80BwdD64SmallFeature>(), smem<kSm80BwdD64Small>());
  EXPECT_EQ(smem<kSm80BwdD128SmallFeature>(), smem<kSm80BwdD128Small>());
  EXPECT_EQ(smem<kSm80BwdD256SmallFeature>(), smem<kSm80BwdD256Small>());
  EXPECT_EQ(Sm80BwdConfig<kSm80BwdD64SmallFeature>::kSliceQ, 16);
  EXPECT_EQ(Sm80BwdConfig<kSm80BwdD128SmallFeature>::kSliceQ, 16);
  EXPECT_EQ(smem<kSm80BwdD256SmallFeature>(), smem<kSm80BwdD256Small>());
  EXPECT_EQ(Sm80BwdVarlen<Sm80BwdConfig<kSm80BwdD64Small>>::kSmemBytes, smem<kSm80BwdD64Small>());
  EXPECT_LE(kSm80BwdSmallSmem, kSm86);
}

TEST(Sm80BwdSelect, FullConfigsNeedAnA100) {
  EXPECT_EQ(smem<kSm80BwdD64>(), 165888);
  EXPECT_EQ(smem<kSm80BwdD128>(), 164864);
  EXPECT_EQ(smem<kSm80BwdD256>(), 147968);
  // The loop options change no buffer: the causal kernels take their tiles' shared memory.
  EXPECT_EQ(smem<kSm80BwdD64Causal>(), smem<kSm80BwdD64>());
  EXPECT_EQ(smem<kSm80BwdD128Causal>(), smem<kSm80BwdD128>());
  EXPECT_EQ(kSm80BwdFullSmem, smem<kSm80BwdD64>());  // 1 KB below an A100's
  for (int bytes : {smem<kSm80BwdD64>(), smem<kSm80BwdD64Causal>(), smem<kSm80BwdD128>(), smem<kSm80BwdD128Causal>(),
                    smem<kSm80BwdD256>(), smem<kSm80BwdD64Feature>(),
                    smem<kSm80BwdD128Feature>(), smem<kSm80BwdD256Feature>()}) {
    EXPECT_GT(bytes, kSm86);  // why the small tier exists
    EXPECT_LE(bytes, kA100);
  }
}

// The small configurations are plain ones: the tile shapes the kernel's static_asserts accept,
// with the thread counts and stages the comments in config.h state.
TEST(Sm80BwdSelect, SmallConfigShapes) {
  using C64 = Sm80BwdConfig<kSm80BwdD64Small>;
  using C128 = Sm80BwdConfig<kSm80BwdD128Small>;
  using C256 = Sm80BwdConfig<kSm80BwdD256Small>;
  EXPECT_EQ(C64::kBlockM, 64);
  EXPECT_EQ(C64::kBlockN, 128);
  EXPECT_EQ(C64::kStages, 2);
  EXPECT_EQ(C128::kBlockM, 64);
  EXPECT_EQ(C128::kBlockN, 64);
  EXPECT_EQ(C128::kStages, 1);
  EXPECT_EQ(C256::kBlockM, 64);
  EXPECT_EQ(C256::kBlockN, 16);
  EXPECT_EQ(C256::kStages, 1);
  EXPECT_EQ(C256::kThreads, 128);
}
