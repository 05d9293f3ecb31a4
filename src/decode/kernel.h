// KV-cache attention kernel (flash_attn_with_kvcache's attention part; decode when Sq is small).
// One CTA per (sequence b, KV head h, key split, M tile of 16 packed query rows). Packed row r
// of KV head h is query r / h_ratio of query head h * h_ratio + r % h_ratio, so a decode step
// (Sq = 1) with a GQA group fills the MMA's M rows with the group's heads.
//
// K/V blocks of kBlockN keys stream through a kStages-deep cp.async ring. The paged gather
// happens per 16-row group: page_size is a multiple of 16, so one block-table entry addresses a
// whole group, and each loader thread serves a single group (one lookup per block, prefetched
// one block ahead so its latency is off the issue path). Rows at or past the CTA's last visible
// key, columns at or past d / d_v, and rows of out-of-range pages are zero-filled (src-size 0:
// nothing is read), so no slot past a sequence's length can reach the result, NaN included.
//
// Each warp owns 16 keys of every block (and, at D=256, half of V's columns) and runs its own
// online softmax with mma.sync m16n8k16 (Q from registers, K/V by ldmatrix); the warps' (m, l, O)
// are merged once through shared memory at the end. With one split the CTA writes out and lse;
// with several it writes fp32 O normalized by its own sum and its lse (log2 units) for
// kvcache_combine_kernel.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "arch/convert.h"
#include "arch/cp_async.h"
#include "arch/fast_math.h"
#include "arch/ldmatrix.h"
#include "arch/mma_sm80.h"
#include "arch/smem.h"
#include "decode/config.h"
#include "decode/kernel_args.h"

namespace flashattn::decode {

// Byte offset of 16-B chunk `c` of row `r` in a swizzled tile (chunk position c ^ (r % 8)):
// the 8 rows an ldmatrix reads at one chunk hit 8 different bank groups.
template <int kRowBytes>
__device__ __forceinline__ uint32_t swizzled(int r, int c) {
  return static_cast<uint32_t>(r * kRowBytes + ((c ^ (r & 7)) << 4));
}

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

constexpr float kLn2 = 0.6931471805599453f;

template <class Cfg, bool kBf16>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocksPerSm)
    kvcache_attn_kernel(const __grid_constant__ DecodeArgs args) {
  using namespace flashattn::arch;
  constexpr int kD = Cfg::kHeadDim, kBlockN = Cfg::kBlockN, kStages = Cfg::kStages;
  constexpr int kRowBytes = Cfg::kRowBytes, kChunks = Cfg::kChunks;
  constexpr float kNegInf = -__builtin_huge_valf();
  extern __shared__ __align__(128) unsigned char smem[];
  const detail::KvCacheParams& p = args.p;
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int kw = warp / Cfg::kWarpsD;   // this warp's 16 keys of each block
  const int kdw = warp % Cfg::kWarpsD;  // this warp's slice of V's columns

  // CTA -> (b, h, split, m tile), m tile fastest: the M tiles of one (b, h, split) read the same
  // keys at about the same time, so all but the first find them in L2.
  int bid = static_cast<int>(blockIdx.x);
  const int mt = bid % args.m_tiles;
  bid /= args.m_tiles;
  const int split = bid % args.splits;
  bid /= args.splits;
  const int h = bid % p.hkv, b = bid / p.hkv;

  const int L = seq_lens(p, b).visible;
  const int rows = p.sq * p.h_ratio;  // packed rows of this KV head
  const int row0 = mt * Cfg::kBlockM;
  // Keys [kmin_of(r), kmax_of(r)] packed row r sees, bottom-right against L: query i sees j
  // in [i + L - Sq - left, i + L - Sq + right] (causal: right 0; -1: unbounded side).
  const int right = p.causal ? 0 : p.window_right;
  auto kmax_of = [&](int r) {
    const int qi = r / p.h_ratio;
    return right >= 0 ? min(qi + L - p.sq + right, L - 1) : L - 1;
  };
  auto kmin_of = [&](int r) {
    const int qi = r / p.h_ratio;
    return p.window_left >= 0 ? max(qi + L - p.sq - p.window_left, 0) : 0;
  };
  const int n_keys = kmax_of(min(row0 + Cfg::kBlockM, rows) - 1) + 1;  // keys any row sees; may be <= 0
  const int kmax_first = kmax_of(row0);  // blocks past it need the mask
  const int kmin_last = kmin_of(min(row0 + Cfg::kBlockM, rows) - 1);  // blocks before it need the mask
  const int n_blocks = n_keys > 0 ? (n_keys + kBlockN - 1) / kBlockN : 0;
  // A window's left edge: blocks no row of the tile sees are never loaded.
  const int first_blk = min(kmin_of(row0) / kBlockN, n_blocks);
  const int blk_begin = first_blk + static_cast<int>(int64_t(n_blocks - first_blk) * split / args.splits);
  const int blk_end = first_blk + static_cast<int>(int64_t(n_blocks - first_blk) * (split + 1) / args.splits);

  // ---- loader: thread group g loads rows [16g, 16g + 16) of each block, chunk lc of rows lr + i * kRowsPerPass
  const int g = tid / Cfg::kGroupThreads, gt = tid % Cfg::kGroupThreads;
  const int lc = gt % kChunks, lr = gt / kChunks;
  const bool k_col = lc * 8 < p.d, v_col = lc * 8 < p.d_v;
  const char* k_base = static_cast<const char*>(p.k.ptr) + 2 * (int64_t(h) * p.k.sh + lc * 8);
  const char* v_base = static_cast<const char*>(p.v.ptr) + 2 * (int64_t(h) * p.v.sh + lc * 8);
  const int64_t k_sb = 2 * p.k.sb, k_ss = 2 * p.k.ss, v_sb = 2 * p.v.sb, v_ss = 2 * p.v.ss;
  const bool paged = p.block_table != nullptr;
  const int* bt_row = paged ? p.block_table + int64_t(b) * p.block_table_stride : nullptr;
  const uint32_t smem_base = smem_u32(smem);

  // Block-table entry of this thread's group of block `blk` (only looked up for a group with
  // visible keys: past them the index could run off the table's row).
  auto page_entry = [&](int blk) -> int {
    const int key0 = blk * kBlockN + g * 16;
    return (paged && key0 < n_keys) ? __ldg(bt_row + key0 / p.page_size) : 0;
  };
  auto load_block = [&](int blk, int slot, int entry) {
    const int key0 = blk * kBlockN + g * 16;
    int64_t page = b;
    int prow = key0;
    bool page_ok = true;
    if (paged) {
      page_ok = entry >= 0 && entry < p.num_pages;  // a bad entry reads nothing (zero rows)
      page = page_ok ? entry : 0;
      prow = key0 % p.page_size;
    }
    const char* ks = k_base + page * k_sb + int64_t(prow + lr) * k_ss;
    const char* vs = v_base + page * v_sb + int64_t(prow + lr) * v_ss;
    const uint32_t sk = smem_base + slot * Cfg::kStageBytes, sv = sk + Cfg::kTileBytes;
    FLASHATTN_UNROLL
    for (int i = 0; i < Cfg::kPasses; ++i) {
      const int r = lr + i * Cfg::kRowsPerPass;
      const bool row_ok = page_ok && key0 + r < n_keys;
      const uint32_t off = swizzled<kRowBytes>(g * 16 + r, lc);
      const bool kv = row_ok && k_col, vv = row_ok && v_col;
      cp_async_cg_16_zfill(sk + off, kv ? ks + i * Cfg::kRowsPerPass * k_ss : p.k.ptr, kv);
      cp_async_cg_16_zfill(sv + off, vv ? vs + i * Cfg::kRowsPerPass * v_ss : p.v.ptr, vv);
    }
  };

  // ---- Q: 16 packed rows into the last stage's slot (its own cp.async group, waited first)
  const uint32_t sq_tile = smem_base + Cfg::kQOffset;
  for (int i = tid; i < Cfg::kBlockM * kChunks; i += Cfg::kThreads) {
    const int r = i / kChunks, c = i % kChunks, row = row0 + r;
    const bool ok = row < rows && c * 8 < p.d;
    const char* src = static_cast<const char*>(p.q.ptr);
    if (ok) {
      const int qi = row / p.h_ratio, head = h * p.h_ratio + row % p.h_ratio;
      src += 2 * (int64_t(b) * p.q.sb + int64_t(qi) * p.q.ss + int64_t(head) * p.q.sh + c * 8);
    }
    cp_async_cg_16_zfill(sq_tile + swizzled<kRowBytes>(r, c), src, ok);
  }
  cp_async_commit();
  FLASHATTN_UNROLL
  for (int s = 0; s < kStages - 1; ++s) {  // one group per stage, empty ones included (fixed counting)
    if (blk_begin + s < blk_end) load_block(blk_begin + s, s, page_entry(blk_begin + s));
    cp_async_commit();
  }
  int entry_next = blk_begin + kStages - 1 < blk_end ? page_entry(blk_begin + kStages - 1) : 0;

  // ldmatrix lane addressing. Q (A operand) and V (B, transposed) take matrices (rows 0-7,
  // chunk c), (rows 8-15, c), (0-7, c+1), (8-15, c+1); K (B operand) (keys 0-7, c), (0-7, c+1),
  // (8-15, c), (8-15, c+1). Rows keep lane % 8 as their swizzle term.
  const int sw = lane & 7;
  const int qv_row = sw + ((lane >> 3) & 1) * 8, qv_cb = lane >> 4;
  const int k_row = sw + (lane >> 4) * 8, k_cb = (lane >> 3) & 1;

  cp_async_wait<kStages - 1>();  // Q landed
  __syncthreads();
  uint32_t q_frag[kD / 16][4];
  FLASHATTN_UNROLL
  for (int ks = 0; ks < kD / 16; ++ks)
    ldmatrix_x4(q_frag[ks], sq_tile + qv_row * kRowBytes + (((2 * ks + qv_cb) ^ sw) << 4));

  // This lane's accumulator rows: row0 + lane/4 ("a") and + 8 ("b").
  const int kmax_a = kmax_of(row0 + (lane >> 2)), kmax_b = kmax_of(row0 + (lane >> 2) + 8);
  const int kmin_a = kmin_of(row0 + (lane >> 2)), kmin_b = kmin_of(row0 + (lane >> 2) + 8);
  // Softcap: S -> tanh(S * scale / cap), the exponent then in units of cap. ALiBi: per row (its
  // query head), -slope * log2(e) per key of distance from the row's diagonal L - Sq + i.
  const bool softcap = p.softcap > 0.f;
  const float cap_scale = p.softcap_scale();
  const float s_log2 = p.exp2_scale();
  float alibi_a = 0.f, alibi_b = 0.f;
  int diag_a = 0, diag_b = 0;
  if (p.alibi_slopes != nullptr) {
    const int ra = row0 + (lane >> 2), rb = ra + 8;
    const float* sl = p.alibi_slopes + int64_t(b) * p.alibi_batch_stride + h * p.h_ratio;
    alibi_a = -sl[ra % p.h_ratio] * detail::kLog2e;
    alibi_b = -sl[rb % p.h_ratio] * detail::kLog2e;
    diag_a = ra / p.h_ratio + L - p.sq;
    diag_b = rb / p.h_ratio + L - p.sq;
  }
  constexpr int kNTiles = Cfg::kDimsPerWarp / 8;
  const int vc0 = kdw * (Cfg::kDimsPerWarp / 8);  // first V chunk of this warp
  float o[kNTiles][4];
  FLASHATTN_UNROLL
  for (int j = 0; j < kNTiles; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  float m_a = kNegInf, m_b = kNegInf, l_a = 0.f, l_b = 0.f;  // running max (log2 units), lane-partial sums

  int slot = 0, fill_slot = kStages - 1;
  for (int blk = blk_begin; blk < blk_end; ++blk) {
    cp_async_wait<kStages - 2>();  // block blk landed (this thread's copies) ...
    __syncthreads();               // ... everyone's, and every warp is done with fill_slot
    const int fill = blk + kStages - 1;
    if (fill < blk_end) {
      load_block(fill, fill_slot, entry_next);
      if (fill + 1 < blk_end) entry_next = page_entry(fill + 1);  // used one iteration later
    }
    cp_async_commit();
    if (++fill_slot == kStages) fill_slot = 0;

    // S = Q K^T over this warp's 16 keys (k-steps past d are all zeros: skipped). One accumulator
    // chain per n-tile: even/odd k-step chains summed after were slower on an H200 (paged D=128
    // decode 4.23 vs 4.34 TB/s; one CTA per SM 0.76 vs 0.57 ms).
    const uint32_t sk = smem_base + slot * Cfg::kStageBytes, sv = sk + Cfg::kTileBytes;
    float s[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
    const uint32_t k_lane = sk + (kw * 16 + k_row) * kRowBytes;
    FLASHATTN_UNROLL
    for (int ks = 0; ks < kD / 16; ++ks) {
      if (ks * 16 < p.d) {
        uint32_t kb[4];
        ldmatrix_x4(kb, k_lane + (((2 * ks + k_cb) ^ sw) << 4));
        const uint32_t b0[2] = {kb[0], kb[1]}, b1[2] = {kb[2], kb[3]};
        mma_m16n8k16_f32<kBf16>(s[0], q_frag[ks], b0);
        mma_m16n8k16_f32<kBf16>(s[1], q_frag[ks], b1);
      }
    }

    // Online softmax in log2 units. s[nt][e] is (row a, key 8nt + 2(lane%4) + e), s[nt][2+e] row b.
    const bool need_mask = (blk + 1) * kBlockN - 1 > kmax_first || blk * kBlockN < kmin_last;
    const int key_lane = blk * kBlockN + kw * 16 + 2 * (lane & 3);
    if (softcap) {
      FLASHATTN_UNROLL
      for (int nt = 0; nt < 2; ++nt)
        FLASHATTN_UNROLL
        for (int e = 0; e < 4; ++e) s[nt][e] = tanh_approx(s[nt][e] * cap_scale);
    }
    FLASHATTN_UNROLL
    for (int nt = 0; nt < 2; ++nt) {
      FLASHATTN_UNROLL
      for (int e = 0; e < 2; ++e) {
        const int key = key_lane + nt * 8 + e;
        float bias_a = 0.f, bias_b = 0.f;
        if (alibi_a != 0.f || alibi_b != 0.f) {
          bias_a = alibi_a * static_cast<float>(abs(diag_a - key));
          bias_b = alibi_b * static_cast<float>(abs(diag_b - key));
        }
        s[nt][e] = (need_mask && (key > kmax_a || key < kmin_a)) ? kNegInf : fmaf(s[nt][e], s_log2, bias_a);
        s[nt][2 + e] = (need_mask && (key > kmax_b || key < kmin_b)) ? kNegInf : fmaf(s[nt][2 + e], s_log2, bias_b);
      }
    }
    const float mx_a = quad_max(fmaxf(fmaxf(s[0][0], s[0][1]), fmaxf(s[1][0], s[1][1])));
    const float mx_b = quad_max(fmaxf(fmaxf(s[0][2], s[0][3]), fmaxf(s[1][2], s[1][3])));
    const float mn_a = fmaxf(m_a, mx_a), mn_b = fmaxf(m_b, mx_b);
    // A row that has seen no key yet keeps m = -inf; subtracting 0 instead keeps exp2 at 0, not NaN.
    const float mu_a = mn_a == kNegInf ? 0.f : mn_a, mu_b = mn_b == kNegInf ? 0.f : mn_b;
    const float alpha_a = ex2_approx_ftz(m_a - mu_a), alpha_b = ex2_approx_ftz(m_b - mu_b);
    m_a = mn_a;
    m_b = mn_b;
    FLASHATTN_UNROLL
    for (int nt = 0; nt < 2; ++nt) {
      s[nt][0] = ex2_approx_ftz(s[nt][0] - mu_a);
      s[nt][1] = ex2_approx_ftz(s[nt][1] - mu_a);
      s[nt][2] = ex2_approx_ftz(s[nt][2] - mu_b);
      s[nt][3] = ex2_approx_ftz(s[nt][3] - mu_b);
    }
    l_a = l_a * alpha_a + (s[0][0] + s[0][1] + s[1][0] + s[1][1]);
    l_b = l_b * alpha_b + (s[0][2] + s[0][3] + s[1][2] + s[1][3]);
    FLASHATTN_UNROLL
    for (int j = 0; j < kNTiles; ++j) {
      o[j][0] *= alpha_a;
      o[j][1] *= alpha_a;
      o[j][2] *= alpha_b;
      o[j][3] *= alpha_b;
    }

    // O += P V: the S accumulator is P's A fragment for k16 (keys 0-7 in tile 0, 8-15 in tile 1)
    const uint32_t pa[4] = {pack_f32x2<kBf16>(s[0][0], s[0][1]), pack_f32x2<kBf16>(s[0][2], s[0][3]),
                            pack_f32x2<kBf16>(s[1][0], s[1][1]), pack_f32x2<kBf16>(s[1][2], s[1][3])};
    const uint32_t v_lane = sv + (kw * 16 + qv_row) * kRowBytes;
    FLASHATTN_UNROLL
    for (int j = 0; j < kNTiles / 2; ++j) {
      const int c = vc0 + 2 * j;
      if (c * 8 < p.d_v) {  // V's zero columns past d_v: nothing to add
        uint32_t vb[4];
        ldmatrix_x4_trans(vb, v_lane + (((c + qv_cb) ^ sw) << 4));
        const uint32_t b0[2] = {vb[0], vb[1]}, b1[2] = {vb[2], vb[3]};
        mma_m16n8k16_f32<kBf16>(o[2 * j], pa, b0);
        mma_m16n8k16_f32<kBf16>(o[2 * j + 1], pa, b1);
      }
    }
    if (++slot == kStages) slot = 0;
  }

  // ---- merge the warps' partial softmaxes through shared memory (the ring is drained first)
  l_a = quad_sum(l_a);
  l_b = quad_sum(l_b);
  cp_async_wait<0>();
  __syncthreads();
  constexpr int kMRF = Cfg::kMergeRowFloats;
  float* s_o = reinterpret_cast<float*>(smem);  // (kWarpsN, kBlockM, kMRF)
  float* s_m = s_o + Cfg::kWarpsN * Cfg::kBlockM * kMRF;
  float* s_l = s_m + Cfg::kWarpsN * Cfg::kBlockM;
  {
    const int ra = lane >> 2;
    float* mine = s_o + (kw * Cfg::kBlockM + ra) * kMRF + vc0 * 8 + 2 * (lane & 3);
    FLASHATTN_UNROLL
    for (int j = 0; j < kNTiles; ++j) {
      *reinterpret_cast<float2*>(mine + j * 8) = make_float2(o[j][0], o[j][1]);
      *reinterpret_cast<float2*>(mine + 8 * kMRF + j * 8) = make_float2(o[j][2], o[j][3]);
    }
    if (kdw == 0 && (lane & 3) == 0) {
      s_m[kw * Cfg::kBlockM + ra] = m_a;
      s_m[kw * Cfg::kBlockM + ra + 8] = m_b;
      s_l[kw * Cfg::kBlockM + ra] = l_a;
      s_l[kw * Cfg::kBlockM + ra + 8] = l_b;
    }
  }
  __syncthreads();

  // ---- epilogue: 8 columns of one row per item; rows past the group and columns past d_v are
  // never written.
  for (int i = tid; i < Cfg::kBlockM * kChunks; i += Cfg::kThreads) {
    const int r = i / kChunks, c = i % kChunks, row = row0 + r;
    if (row >= rows || c * 8 >= p.d_v) continue;
    float mx = kNegInf;
    FLASHATTN_UNROLL
    for (int w = 0; w < Cfg::kWarpsN; ++w) mx = fmaxf(mx, s_m[w * Cfg::kBlockM + r]);
    const float mu = mx == kNegInf ? 0.f : mx;
    float sum = 0.f, acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    FLASHATTN_UNROLL
    for (int w = 0; w < Cfg::kWarpsN; ++w) {
      const float sc = ex2_approx_ftz(s_m[w * Cfg::kBlockM + r] - mu);
      sum += s_l[w * Cfg::kBlockM + r] * sc;
      const float4* src = reinterpret_cast<const float4*>(s_o + (w * Cfg::kBlockM + r) * kMRF + c * 8);
      const float4 x0 = src[0], x1 = src[1];
      acc[0] += sc * x0.x; acc[1] += sc * x0.y; acc[2] += sc * x0.z; acc[3] += sc * x0.w;
      acc[4] += sc * x1.x; acc[5] += sc * x1.y; acc[6] += sc * x1.z; acc[7] += sc * x1.w;
    }
    const float inv = sum > 0.f ? 1.f / sum : 0.f;  // a row without keys: out 0, lse -inf
    const int qi = row / p.h_ratio, head = h * p.h_ratio + row % p.h_ratio;
    const int64_t orow = (int64_t(b) * p.hq + head) * p.sq + qi;  // lse's (B, Hq, Sq) order
    const float lse2 = sum > 0.f ? mx + log2f(sum) : kNegInf;
    if (args.splits == 1) {
      uint4 v;
      v.x = pack_f32x2<kBf16>(acc[0] * inv, acc[1] * inv);
      v.y = pack_f32x2<kBf16>(acc[2] * inv, acc[3] * inv);
      v.z = pack_f32x2<kBf16>(acc[4] * inv, acc[5] * inv);
      v.w = pack_f32x2<kBf16>(acc[6] * inv, acc[7] * inv);
      char* dst = static_cast<char*>(p.o.ptr) +
                  2 * (int64_t(b) * p.o.sb + int64_t(qi) * p.o.ss + int64_t(head) * p.o.sh + c * 8);
      *reinterpret_cast<uint4*>(dst) = v;
      if (c == 0 && p.lse != nullptr) p.lse[orow] = lse2 * kLn2;
    } else {
      float4* dst = reinterpret_cast<float4*>(args.o_part + (int64_t(split) * args.rows + orow) * p.d_v + c * 8);
      dst[0] = make_float4(acc[0] * inv, acc[1] * inv, acc[2] * inv, acc[3] * inv);
      dst[1] = make_float4(acc[4] * inv, acc[5] * inv, acc[6] * inv, acc[7] * inv);
      if (c == 0) args.lse_part[int64_t(split) * args.rows + orow] = lse2;
    }
  }
}

}  // namespace flashattn::decode
