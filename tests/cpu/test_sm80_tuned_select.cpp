// The sm80 tuned table's bucket rule (sm80/tuned_select.h), on small hand-made tables, and the
// shipped table against the kernels the library instantiates: no GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <set>
#include <utility>
#include <vector>

#include "sm80/tuned_select.h"
#include "sm80/tuned_table.h"

using flashattn::detail::ElemType;
using flashattn::sm80::select_tuned_row;
using flashattn::sm80::tuned_rows_well_formed;
using flashattn::sm80::TunedRow;

namespace {

constexpr ElemType kBf16 = ElemType::kBFloat16;
constexpr ElemType kFp16 = ElemType::kFloat16;

// A row for (sm 90, bf16, D 128, causal) with bound `max_s`; `tag` (block_n) tells rows apart.
constexpr TunedRow row(int max_s, int tag, int sm = 90, ElemType dt = kBf16, int d = 128, bool causal = true) {
  return {sm, dt, d, causal, max_s, 128, tag, 4, 2, false, false, false};
}

const auto kAll = [](const TunedRow&) { return true; };

const TunedRow* pick(const std::vector<TunedRow>& rows, int sq, int sk) {
  return select_tuned_row(rows, 90, kBf16, 128, true, sq, sk, kAll);
}

// The rule, stated independently of the implementation: among rows with the key whose bound
// (0 = infinity) is >= max(sq, sk) and that are available, the smallest bound.
const TunedRow* expected(const std::vector<TunedRow>& rows, int sq, int sk, const std::set<int>& missing_tags = {}) {
  const long long len = sq > sk ? sq : sk;
  const TunedRow* best = nullptr;
  auto bound = [](const TunedRow& r) { return r.max_seqlen == 0 ? (1LL << 62) : (long long)r.max_seqlen; };
  for (const TunedRow& r : rows) {
    if (r.sm != 90 || r.dtype != kBf16 || r.head_dim != 128 || !r.causal) continue;
    if (missing_tags.count(r.block_n) || bound(r) < len) continue;
    if (best == nullptr || bound(r) < bound(*best)) best = &r;
  }
  return best;
}

}  // namespace

TEST(Sm80TunedSelect, SmallestBucketThatHoldsTheSeqlen) {
  const std::vector<TunedRow> rows = {row(1024, 16), row(4096, 32), row(0, 48)};
  EXPECT_EQ(pick(rows, 1000, 1000), &rows[0]);
  EXPECT_EQ(pick(rows, 1024, 1024), &rows[0]);  // the bound is inclusive
  EXPECT_EQ(pick(rows, 1025, 1025), &rows[1]);
  EXPECT_EQ(pick(rows, 4096, 4096), &rows[1]);
  EXPECT_EQ(pick(rows, 5000, 5000), &rows[2]);
  EXPECT_EQ(pick(rows, 1, 1), &rows[0]);
  EXPECT_EQ(pick(rows, 1 << 30, 1 << 30), &rows[2]);  // 0 is unbounded
}

TEST(Sm80TunedSelect, RowOrderDoesNotMatter) {
  const std::vector<TunedRow> rows = {row(0, 48), row(4096, 32), row(1024, 16)};
  for (int s : {1, 1000, 1024, 1025, 4096, 4097, 100000}) EXPECT_EQ(pick(rows, s, s), expected(rows, s, s)) << s;
  EXPECT_EQ(pick(rows, 1000, 1000)->max_seqlen, 1024);
  EXPECT_EQ(pick(rows, 5000, 5000)->max_seqlen, 0);
}

TEST(Sm80TunedSelect, UnequalSeqlensUseTheLonger) {
  const std::vector<TunedRow> rows = {row(1024, 16), row(4096, 32), row(0, 48)};
  const std::vector<std::pair<int, int>> shapes = {{1, 4096}, {4096, 1}, {1000, 1025}, {1025, 1000}, {17, 5000}, {5000, 17}};
  for (auto [sq, sk] : shapes) {
    const TunedRow* r = pick(rows, sq, sk);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r, expected(rows, sq, sk)) << sq << " " << sk;
    EXPECT_EQ(r, pick(rows, std::max(sq, sk), std::max(sq, sk))) << sq << " " << sk;
  }
}

TEST(Sm80TunedSelect, MissingKernelFallsThroughToTheNextBucket) {
  const std::vector<TunedRow> rows = {row(1024, 16), row(4096, 32), row(0, 48)};
  auto without = [](std::set<int> tags) { return [tags](const TunedRow& r) { return !tags.count(r.block_n); }; };
  const std::vector<std::set<int>> cases = {{16}, {32}, {16, 32}, {48}, {16, 32, 48}};
  for (const std::set<int>& missing : cases) {
    for (int s : {1000, 1025, 4096, 5000}) {
      const TunedRow* r = select_tuned_row(rows, 90, kBf16, 128, true, s, s, without(missing));
      EXPECT_EQ(r, expected(rows, s, s, missing)) << s;
      if (r != nullptr) {
        EXPECT_FALSE(missing.count(r->block_n));
      }
    }
  }
  // Concretely: 1000 with the 1024 row's kernel missing takes the 4096 row; with every row
  // missing there is no row (the caller uses the head dim's default).
  EXPECT_EQ(select_tuned_row(rows, 90, kBf16, 128, true, 1000, 1000, without({16})), &rows[1]);
  EXPECT_EQ(select_tuned_row(rows, 90, kBf16, 128, true, 1000, 1000, without({16, 32, 48})), nullptr);
}

TEST(Sm80TunedSelect, NoRowWiderThanTheSeqlenMeansNoRow) {
  const std::vector<TunedRow> rows = {row(1024, 16), row(4096, 32)};  // no unbounded row
  EXPECT_EQ(pick(rows, 4097, 4097), nullptr);
  EXPECT_EQ(pick(rows, 4096, 4097), nullptr);
}

TEST(Sm80TunedSelect, OnlyRowsWithTheKeyCount) {
  // Tighter rows for other sm, dtype, head dim or mask must not be picked.
  const std::vector<TunedRow> rows = {row(512, 1, 80),           row(512, 2, 90, kFp16),
                                      row(512, 3, 90, kBf16, 64), row(512, 4, 90, kBf16, 128, false),
                                      row(0, 48)};
  for (int s : {1, 512, 513}) {
    const TunedRow* r = pick(rows, s, s);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->block_n, 48) << s;
  }
  EXPECT_EQ(select_tuned_row(rows, 80, kBf16, 128, true, 512, 512, kAll), &rows[0]);
  EXPECT_EQ(select_tuned_row(rows, 86, kBf16, 128, true, 512, 512, kAll), nullptr);
}

TEST(Sm80TunedSelect, AvailabilityIsAskedOnlyOfImprovingRows) {
  // The per-call cost claim in tuned_select.h: rows that cannot beat the current pick are not
  // checked. With the tightest row first, only it is asked.
  const std::vector<TunedRow> rows = {row(1024, 16), row(4096, 32), row(0, 48)};
  int asked = 0;
  const TunedRow* r = select_tuned_row(rows, 90, kBf16, 128, true, 100, 100, [&](const TunedRow&) {
    ++asked;
    return true;
  });
  EXPECT_EQ(r, &rows[0]);
  EXPECT_EQ(asked, 1);
}

TEST(Sm80TunedSelect, WellFormedTables) {
  EXPECT_TRUE(tuned_rows_well_formed(std::vector<TunedRow>{row(1024, 16), row(4096, 32), row(0, 48)}));
  EXPECT_TRUE(tuned_rows_well_formed(std::vector<TunedRow>{row(0, 16), row(0, 32, 90, kFp16)}));
  EXPECT_FALSE(tuned_rows_well_formed(std::vector<TunedRow>{row(1024, 16), row(1024, 32)}));
  EXPECT_FALSE(tuned_rows_well_formed(std::vector<TunedRow>{row(0, 16), row(0, 32)}));
  EXPECT_FALSE(tuned_rows_well_formed(std::vector<TunedRow>{row(-1, 16)}));
  static constexpr TunedRow kTable[] = {row(2048, 16), row(0, 32)};
  static_assert(tuned_rows_well_formed(kTable));
  static_assert(select_tuned_row(kTable, 90, kBf16, 128, true, 2048, 2, [](const TunedRow&) { return true; }) ==
                &kTable[0]);
}

// The shipped table (tuned_table.inc) against the library's kernel list (sm80/tuned_table.h), which
// the instantiation units fwd/instantiations/fwd_d*.cu instantiate: every row and every head-dim
// default must name an instantiated kernel, else dispatch would silently fall through to a wider
// bucket or fail.
namespace {

using flashattn::sm80::default_options;
using flashattn::sm80::dispatchable_kernels;
using flashattn::sm80::KernelKey;
using flashattn::sm80::kTunedRows;

std::vector<KernelKey> library_keys(int d) {
  auto to_vec = [](const auto& a) { return std::vector<KernelKey>(a.begin(), a.end()); };
  switch (d) {
    case 64: return to_vec(dispatchable_kernels<64>());
    case 128: return to_vec(dispatchable_kernels<128>());
    case 192: return to_vec(dispatchable_kernels<192>());
    case 256: return to_vec(dispatchable_kernels<256>());
    default: return {};
  }
}

// The library has the kernel of configuration o in dtype dt for the causal (or the non-causal) mask.
bool instantiated(const flashattn::sm80::Sm80FwdOptions& o, ElemType dt, bool causal) {
  for (const KernelKey& k : library_keys(o.head_dim)) {
    if (k.options == o && k.dtype == dt) return causal ? k.mask_causal : k.mask_none;
  }
  return false;
}

}  // namespace

TEST(Sm80TunedTable, EveryRowNamesAnInstantiatedKernel) {
  ASSERT_FALSE(kTunedRows.empty());
  for (const TunedRow& r : kTunedRows) {
    EXPECT_TRUE(instantiated(r.options(), r.dtype, r.causal))
        << "sm " << r.sm << " d" << r.head_dim << (r.causal ? " causal" : " full") << " max_seqlen " << r.max_seqlen
        << ": m" << r.block_m << "n" << r.block_n << "w" << r.warps << "_s" << r.frag_slice;
  }
}

TEST(Sm80TunedTable, EveryDefaultIsInstantiated) {
  for (int d : flashattn::sm80::kHeadDims) {
    EXPECT_EQ(default_options(d).head_dim, d);
    for (ElemType dt : {kFp16, kBf16})
      for (bool causal : {false, true}) EXPECT_TRUE(instantiated(default_options(d), dt, causal)) << "d" << d;
  }
}

TEST(Sm80TunedTable, UnknownDevicesGetTheDefault) {
  // A device with no row (here each listed sm the table does not name): every call falls to the
  // head dim's default, which EveryDefaultIsInstantiated checks.
  for (int sm : {75, 80, 86, 89, 100, 120}) {
    if (std::any_of(kTunedRows.begin(), kTunedRows.end(), [&](const TunedRow& r) { return r.sm == sm; })) continue;
    for (int d : flashattn::sm80::kHeadDims)
      for (ElemType dt : {kFp16, kBf16})
        for (bool causal : {false, true})
          for (int s : {1, 512, 4096, 100000})
            EXPECT_EQ(select_tuned_row(kTunedRows, sm, dt, d, causal, s, s, kAll), nullptr) << sm << " d" << d;
  }
}

TEST(Sm80TunedTable, LibraryShipsOnlyWhatDispatchCanPick) {
  // Each instantiated kernel's configuration is some row's (in either dtype) or the default, with
  // only the masks of those rows (both for the default), and no configuration is listed twice
  // per dtype.
  int total = 0;
  for (int d : flashattn::sm80::kHeadDims) {
    const std::vector<KernelKey> keys = library_keys(d);
    total += static_cast<int>(keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const KernelKey& k = keys[i];
      EXPECT_EQ(k.options.head_dim, d);
      EXPECT_EQ(std::count_if(keys.begin(), keys.end(),
                              [&](const KernelKey& o) { return o.options == k.options && o.dtype == k.dtype; }),
                1);
      const bool is_default = k.options == default_options(d);
      auto named_by_row = [&](bool causal) {
        return std::any_of(kTunedRows.begin(), kTunedRows.end(),
                           [&](const TunedRow& r) { return r.options() == k.options && r.causal == causal; });
      };
      EXPECT_TRUE(k.mask_none || k.mask_causal) << "d" << d << " entry " << i;
      EXPECT_TRUE(!k.mask_none || is_default || named_by_row(false)) << "d" << d << " entry " << i;
      EXPECT_TRUE(!k.mask_causal || is_default || named_by_row(true)) << "d" << d << " entry " << i;
    }
  }
  // Every row of a head dim the family does not build would be dead.
  for (const TunedRow& r : kTunedRows) {
    EXPECT_TRUE(std::count(std::begin(flashattn::sm80::kHeadDims), std::end(flashattn::sm80::kHeadDims), r.head_dim))
        << r.head_dim;
  }
  EXPECT_GT(total, 0);
}
