// The shipped sm90 configurations (src/sm90/fwd/tile_table.h): their shared-memory layout fits,
// every region starts on the 1 KiB swizzle repeat, no two regions overlap, and the O staging of
// the TMA-store epilogue lies where the kernel may write it: an own buffer, or (kTmaStoreInQ)
// exactly the rows of the tile's Q slot that the writing consumer group's QK^T reads, so a
// group never overwrites rows the other group may still be reading.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "sm90/fwd/tile_table.h"
#include "sm90/head_dim.h"

namespace {

using namespace flashattn::sm90;

struct Region {
  std::string name;
  uint64_t lo, hi;  // [lo, hi)
};

struct Layout {
  std::string name;
  int q_stages, groups, boxes, block_m, head_dim, swizzle_bytes;
  bool own_buffer, in_q;
  uint64_t q_bytes, q_box_bytes, smem_bytes, dynamic_bytes;
  std::vector<Region> regions;                   // Q slots, K and V stages, O buffer
  std::vector<std::vector<Region>> staging;      // [group] the 64 x 128 B boxes it writes
};

template <class Cfg>
Layout layout(const std::string& name) {
  Layout l{name, Cfg::kQStages, Cfg::kNumConsumerWarpgroups, Cfg::kVBoxes, Cfg::kBlockM, Cfg::kHeadDim,
           Cfg::kSwizzleBytes, Cfg::kTmaStoreOwnBuffer, Cfg::kTmaStoreInQ, Cfg::kQBytes, Cfg::kQBoxBytes, Cfg::kSmemBytes,
           Cfg::kDynamicSmemBytes, {}, {}};
  for (int s = 0; s < Cfg::kQStages; ++s)
    l.regions.push_back({"Q" + std::to_string(s), Cfg::kSmemQ + uint64_t(s) * Cfg::kQBytes,
                         Cfg::kSmemQ + uint64_t(s + 1) * Cfg::kQBytes});
  for (int s = 0; s < Cfg::kStages; ++s) {
    l.regions.push_back({"K" + std::to_string(s), Cfg::kSmemK + uint64_t(s) * Cfg::kKBytes,
                         Cfg::kSmemK + uint64_t(s + 1) * Cfg::kKBytes});
    l.regions.push_back({"V" + std::to_string(s), Cfg::kSmemV + uint64_t(s) * Cfg::kVBytes,
                         Cfg::kSmemV + uint64_t(s + 1) * Cfg::kVBytes});
  }
  if (Cfg::kTmaStoreOwnBuffer) l.regions.push_back({"O", Cfg::kSmemO, Cfg::kSmemO + Cfg::kOBytes});
  if (Cfg::kTmaStoreEpilogue) {
    // The epilogue's staging address of box c, group g (epilogue.h), for Q slot 1 if there is one.
    const uint64_t base = Cfg::kTmaStoreInQ ? Cfg::kSmemQ + uint64_t(Cfg::kQStages - 1) * Cfg::kQBytes : Cfg::kSmemO;
    for (int g = 0; g < Cfg::kNumConsumerWarpgroups; ++g) {
      l.staging.emplace_back();
      for (int c = 0; c < Cfg::kVBoxes; ++c) {
        const uint64_t lo = base + uint64_t(c) * Cfg::kOBoxStride + uint64_t(g) * Cfg::kOGroupStride;
        l.staging.back().push_back({"O g" + std::to_string(g) + " box" + std::to_string(c), lo, lo + Cfg::kOBoxBytes});
      }
    }
  }
  return l;
}

std::vector<Layout> shipped() {
  std::vector<Layout> v;
  v.push_back(layout<TableConfig<64, true, false>>("d64 non-causal"));
  v.push_back(layout<TableConfig<64, true, true>>("d64 causal"));
  v.push_back(layout<TableConfig<64, true, true, true>>("d64 short causal"));
  v.push_back(layout<TableConfig<96, true, false>>("d96 non-causal"));
  v.push_back(layout<TableConfig<96, false, true>>("d96 causal fp16"));
  v.push_back(layout<TableConfig<128, true, false>>("d128 non-causal"));
  v.push_back(layout<TableConfig<128, false, true>>("d128 causal fp16"));
  v.push_back(layout<TableConfig<192, true, false>>("d192 non-causal"));
  v.push_back(layout<TableConfig<192, false, true>>("d192 causal fp16"));
  v.push_back(layout<Sm90FwdConfig<pair_table_192_128(true, false)>>("d192/128 non-causal"));
  v.push_back(layout<Sm90FwdConfig<pair_table_192_128(false, true)>>("d192/128 causal fp16"));
  v.push_back(layout<TableConfig<256, true, false>>("d256 non-causal"));
  v.push_back(layout<TableConfig<256, true, true>>("d256 causal"));
  // Not dispatched today, but the Q-slot staging with two slots is only exercised here.
  v.push_back(layout<Sm90FwdConfig<with_ablations(
                  {.head_dim = 128, .block_n = 160, .split_masked_loop = true, .stream_k = true})>>("d128 BlockN 160"));
  return v;
}

TEST(Sm90Config, RegionsFitAlignAndDoNotOverlap) {
  for (const Layout& l : shipped()) {
    SCOPED_TRACE(l.name);
    EXPECT_LE(l.dynamic_bytes, 227u * 1024u);
    for (size_t i = 0; i < l.regions.size(); ++i) {
      const Region& a = l.regions[i];
      EXPECT_EQ(a.lo % 1024, 0u) << a.name;
      EXPECT_LE(a.hi, l.smem_bytes) << a.name;
      for (size_t j = i + 1; j < l.regions.size(); ++j) {
        const Region& b = l.regions[j];
        EXPECT_TRUE(a.hi <= b.lo || b.hi <= a.lo) << a.name << " overlaps " << b.name;
      }
    }
  }
}

TEST(Sm90Config, StagingIsTheGroupsOwnRowsOrItsOwnBuffer) {
  for (const Layout& l : shipped()) {
    SCOPED_TRACE(l.name);
    if (l.staging.empty()) continue;
    ASSERT_EQ(int(l.staging.size()), l.groups);
    const Region* q_last = nullptr;
    const Region* o_buf = nullptr;
    for (const Region& r : l.regions) {
      if (r.name == "Q" + std::to_string(l.q_stages - 1)) q_last = &r;
      if (r.name == "O") o_buf = &r;
    }
    ASSERT_NE(q_last, nullptr);
    for (int g = 0; g < l.groups; ++g)
      for (int c = 0; c < l.boxes; ++c) {
        const Region& s = l.staging[g][c];
        EXPECT_EQ(s.lo % (8 * l.swizzle_bytes), 0u) << s.name;  // the swizzle pattern repeats every 8 rows
        if (l.in_q) {
          // Q box c holds rows 0..block_m-1 at swizzle_bytes each: group g's rows are 64g..64g+63.
          EXPECT_EQ(s.lo, q_last->lo + uint64_t(c) * l.q_box_bytes + uint64_t(g) * 64 * l.swizzle_bytes) << s.name;
        } else {
          ASSERT_NE(o_buf, nullptr);
          EXPECT_TRUE(s.lo >= o_buf->lo && s.hi <= o_buf->hi) << s.name;
        }
        for (int g2 = 0; g2 < l.groups; ++g2)
          for (int c2 = 0; c2 < l.boxes; ++c2) {
            const Region& t = l.staging[g2][c2];
            if (g2 == g && c2 == c) continue;
            EXPECT_TRUE(s.hi <= t.lo || t.hi <= s.lo) << s.name << " overlaps " << t.name;
          }
      }
  }
}

// What the table ships (V16/V17 measured these choices; a change here should be a decision).
TEST(Sm90Config, ShippedChoices) {
  const std::vector<Layout> v = shipped();
  auto get = [&](const std::string& n) -> const Layout& {
    for (const Layout& l : v)
      if (l.name == n) return l;
    ADD_FAILURE() << n;
    return v.front();
  };
  EXPECT_EQ(get("d128 non-causal").q_stages, 2);
  EXPECT_TRUE(get("d128 non-causal").own_buffer);
  EXPECT_EQ(get("d128 causal fp16").q_stages, 2);
  EXPECT_TRUE(get("d128 causal fp16").own_buffer);
  EXPECT_EQ(get("d256 non-causal").q_stages, 1);  // no room: O staged over the one Q slot
  EXPECT_TRUE(get("d256 non-causal").in_q);
  EXPECT_TRUE(get("d256 causal").in_q);
  EXPECT_EQ(get("d192 non-causal").q_stages, 1);  // 216 KiB: O staged over the one Q slot
  EXPECT_TRUE(get("d192 non-causal").in_q);
  EXPECT_TRUE(get("d192 causal fp16").in_q);
  EXPECT_TRUE(get("d64 non-causal").own_buffer);  // three groups: non-causal only (V16)
  EXPECT_FALSE(get("d64 causal").own_buffer || get("d64 causal").in_q);
  EXPECT_TRUE(get("d64 short causal").own_buffer);
  EXPECT_EQ(get("d96 non-causal").swizzle_bytes, 64);  // 96 columns: three 64B-swizzled boxes
  EXPECT_EQ(get("d96 non-causal").boxes, 3);
  EXPECT_EQ(get("d96 non-causal").q_stages, 2);
  EXPECT_TRUE(get("d96 non-causal").own_buffer);
  EXPECT_EQ(get("d192/128 non-causal").swizzle_bytes, 128);
  EXPECT_EQ(get("d192/128 non-causal").boxes, 2);  // O: 128 columns, staged over Q's first two boxes
  EXPECT_TRUE(get("d192/128 non-causal").in_q);
  EXPECT_TRUE(get("d192/128 causal fp16").in_q);
  EXPECT_TRUE(get("d128 BlockN 160").in_q);
  EXPECT_EQ(get("d128 BlockN 160").q_stages, 2);
}

}  // namespace

// The softcap / ALiBi twins of the dense kernels keep the dense entries' tiles, groups, mask and
// stream-K tail: only the switches differ (tile_table.h score_mod_table).
TEST(Sm90Config, ScoreModTwinsAreTheDenseEntries) {
  for (int d : {64, 128})
    for (bool bf16 : {false, true})
      for (bool causal : {false, true})
        for (bool short_causal : {false, true}) {
          Sm90FwdOptions o = score_mod_table(d, bf16, causal, short_causal);
          EXPECT_TRUE(o.softcap);
          o.softcap = false;
          EXPECT_TRUE(o == tile_table(d, bf16, causal, short_causal)) << d << " " << causal << " " << short_causal;
        }
  EXPECT_TRUE(score_mod_table(64, true, false).stream_k);
  EXPECT_EQ(score_mod_table(64, true, true).consumer_wgs, 3);
  EXPECT_EQ(score_mod_table(64, true, true, true).consumer_wgs, 2);
}

// The window twins keep the dense causal entries' tiles and groups with the window mask, no
// softcap switch and no stream-K tail (tile_table.h window_table); D=64's serves only wide
// windows past the short-causal length, other head dims none.
TEST(Sm90Config, WindowTwinsAreTheCausalEntries) {
  for (int d : {64, 128})
    for (bool bf16 : {false, true}) {
      Sm90FwdOptions o = window_table(d, bf16);
      EXPECT_EQ(o.mask, flashattn::MaskKind::kLocal);
      EXPECT_FALSE(o.softcap);
      EXPECT_FALSE(o.stream_k);
      o.mask = flashattn::MaskKind::kCausal;
      EXPECT_TRUE(o == tile_table(d, bf16, true)) << d;
    }
  EXPECT_EQ(window_table(64, true).consumer_wgs, 3);
  EXPECT_TRUE(window_twin_serves(128, 100, 1));
  EXPECT_TRUE(window_twin_serves(64, 16384, 4097));
  EXPECT_FALSE(window_twin_serves(64, 16384, 1025));  // narrow: the feature kernel's 128-row tiles
  EXPECT_FALSE(window_twin_serves(64, 1024, 1024));   // short: as causal's short entry
  for (int d : {96, 192, 256}) EXPECT_FALSE(window_twin_serves(d, 16384, 16384)) << d;
}

// Which kernel serves a head dim: the smallest instantiated one covering both q/k's and v's.
TEST(Sm90Config, KernelHeadDimCoversTheCall) {
  using flashattn::sm90::bwd_kernel_head_dim;
  using flashattn::sm90::fwd_kernel_head_dim;
  for (int d = 8; d <= 256; d += 8)
    for (int dv = 8; dv <= 256; dv += 8) {
      const int m = std::max(d, dv);
      const int f = fwd_kernel_head_dim(d, dv), b = bwd_kernel_head_dim(d, dv);
      EXPECT_GE(f, m);
      // No instantiated forward head dim lies in [m, f): f is the smallest that covers.
      for (int k : {64, 96, 128, 192, 256}) EXPECT_FALSE(k >= m && k < f) << d << "/" << dv;
      EXPECT_EQ(b, m <= 64 ? 64 : m <= 128 ? 128 : 256) << d << "/" << dv;
    }
  EXPECT_EQ(fwd_kernel_head_dim(192, 128), 192);
  EXPECT_EQ(fwd_kernel_head_dim(96, 96), 96);
  EXPECT_EQ(fwd_kernel_head_dim(96, 128), 128);
  EXPECT_EQ(fwd_kernel_head_dim(8, 264), 0);
}

// The (192, 128) pair kernel takes exactly the dense calls the D=192 kernel would serve whose v
// fits 128 columns.
TEST(Sm90Config, PairKernelServesWideQkNarrowV) {
  using flashattn::sm90::fwd_uses_pair_192_128;
  for (int d = 8; d <= 256; d += 8)
    for (int dv = 8; dv <= 256; dv += 8)
      EXPECT_EQ(fwd_uses_pair_192_128(d, dv), d > 128 && d <= 192 && dv <= 128) << d << "/" << dv;
  EXPECT_TRUE(fwd_uses_pair_192_128(192, 128));
  EXPECT_TRUE(fwd_uses_pair_192_128(136, 64));
  EXPECT_FALSE(fwd_uses_pair_192_128(192, 192));
  EXPECT_FALSE(fwd_uses_pair_192_128(128, 128));
  EXPECT_FALSE(fwd_uses_pair_192_128(200, 128));  // the D=256 kernel's
}
