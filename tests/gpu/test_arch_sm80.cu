// GPU unit tests of the arch wrappers that run on sm_80 and later (built for every listed arch):
// mma.sync + ldmatrix, cp.async, named barriers, ex2.approx, %globaltimer. Each kernel is one
// small, fixed-shape use of a wrapper; the host recomputes the expected result independently
// from fresh random inputs, and every output starts poisoned (0xFF bytes).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "arch/cp_async.h"
#include "arch/fast_math.h"
#include "arch/ldmatrix.h"
#include "arch/mma_sm80.h"
#include "arch/named_barrier.h"
#include "arch/smem.h"
#include "arch/timer.h"
#include "arch_test_util.h"

namespace flashattn::testing::archtest {
namespace {

using arch::smem_u32;

// ---- mma.sync m16n8k16 with ldmatrix_x4 / ldmatrix_x4_trans fragments ----
// One warp, 16x16 tiles, unswizzled rows of 32 B (two 16-B chunks). Lane addressing mirrors
// sm80/warp_gemm.h (q_addr for A, k_addr for K-contiguous B, v_addr for the .trans B):
//   dk = A * Bt^T + C   (Bt stored (n, k): plain ldmatrix, as K in S = Q K^T)
//   dv = A * V + C      (V stored (k, n): ldmatrix.trans, as V in O += P V)
// C is random, so the accumulate (D = A*B + D) is checked as well.
template <bool kBf16>
__global__ void mma_ldmatrix_kernel(const uint16_t* a, const uint16_t* bt, const uint16_t* v, const float* c,
                                    float* dk, float* dv) {
  __shared__ alignas(16) uint16_t sA[256], sB[256], sV[256];
  const int lane = threadIdx.x;
  for (int i = lane; i < 256; i += 32) {
    sA[i] = a[i];
    sB[i] = bt[i];
    sV[i] = v[i];
  }
  __syncwarp();
  uint32_t ra[4], rb[4], rv[4];
  // A matrices: (rows 0-7, k 0-7) (rows 8-15, k 0-7) (rows 0-7, k 8-15) (rows 8-15, k 8-15) = a[0..3].
  arch::ldmatrix_x4(ra, smem_u32(sA) + ((lane & 7) + 8 * ((lane >> 3) & 1)) * 32 + (lane >> 4) * 16);
  // Bt matrices: (n 0-7, k 0-7) (n 0-7, k 8-15) (n 8-15, k 0-7) (n 8-15, k 8-15): n tile t = rb[2t..2t+1].
  arch::ldmatrix_x4(rb, smem_u32(sB) + ((lane & 7) + 8 * (lane >> 4)) * 32 + ((lane >> 3) & 1) * 16);
  // V matrices (rows are k): (k 0-7, n 0-7) (k 8-15, n 0-7) (k 0-7, n 8-15) (k 8-15, n 8-15),
  // transposed on load, so the registers play the same roles as rb.
  arch::ldmatrix_x4_trans(rv, smem_u32(sV) + ((lane & 7) + 8 * ((lane >> 3) & 1)) * 32 + (lane >> 4) * 16);
  const int r = lane / 4, q = lane % 4;
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
    // C fragment: c[0..1] = (r, 8nt + 2q..+1), c[2..3] = (r + 8, same columns).
    const int i0 = r * 16 + 8 * nt + 2 * q, i1 = i0 + 8 * 16;
    float acc_k[4] = {c[i0], c[i0 + 1], c[i1], c[i1 + 1]};
    float acc_v[4] = {c[i0], c[i0 + 1], c[i1], c[i1 + 1]};
    const uint32_t bk[2] = {rb[2 * nt], rb[2 * nt + 1]};
    const uint32_t bv[2] = {rv[2 * nt], rv[2 * nt + 1]};
    arch::mma_m16n8k16_f32<kBf16>(acc_k, ra, bk);
    arch::mma_m16n8k16_f32<kBf16>(acc_v, ra, bv);
    dk[i0] = acc_k[0];
    dk[i0 + 1] = acc_k[1];
    dk[i1] = acc_k[2];
    dk[i1 + 1] = acc_k[3];
    dv[i0] = acc_v[0];
    dv[i0 + 1] = acc_v[1];
    dv[i1] = acc_v[2];
    dv[i1 + 1] = acc_v[3];
  }
}

template <bool kBf16>
void run_mma_ldmatrix() {
  FLASHATTN_REQUIRE_SM80();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 g(seed);
  const auto a = random_elems(g, 256, kBf16), bt = random_elems(g, 256, kBf16), v = random_elems(g, 256, kBf16);
  std::vector<float> c(256);
  std::uniform_real_distribution<float> cd(0.25f, 2.f);
  for (auto& x : c) x = (g() & 1) ? cd(g) : -cd(g);
  DeviceBuffer da(512), dbt(512), dvv(512), dc(1024), dk(1024), dv(1024);
  upload(da, a);
  upload(dbt, bt);
  upload(dvv, v);
  upload(dc, c);
  poison_bytes(dk);
  poison_bytes(dv);
  mma_ldmatrix_kernel<kBf16><<<1, 32>>>(static_cast<const uint16_t*>(da.ptr), static_cast<const uint16_t*>(dbt.ptr),
                                        static_cast<const uint16_t*>(dvv.ptr), static_cast<const float*>(dc.ptr),
                                        static_cast<float*>(dk.ptr), static_cast<float*>(dv.ptr));
  FLASHATTN_SYNC_OK();
  const auto hk = download<float>(dk, 256), hv = download<float>(dv, 256);
  for (int m = 0; m < 16; ++m) {
    for (int n = 0; n < 16; ++n) {
      double ek = c[m * 16 + n], ev = c[m * 16 + n], mag_k = std::fabs(ek), mag_v = std::fabs(ev);
      for (int k = 0; k < 16; ++k) {
        const double x = elem_value(a[m * 16 + k], kBf16);
        const double pk = x * elem_value(bt[n * 16 + k], kBf16), pv = x * elem_value(v[k * 16 + n], kBf16);
        ek += pk;
        ev += pv;
        mag_k += std::fabs(pk);
        mag_v += std::fabs(pv);
      }
      // Products of 16-bit values are exact in fp32; only the fp32 sums round.
      EXPECT_NEAR(hk[m * 16 + n], ek, 1e-5 * mag_k) << "A*Bt^T at (" << m << ", " << n << ")";
      EXPECT_NEAR(hv[m * 16 + n], ev, 1e-5 * mag_v) << "A*V at (" << m << ", " << n << ")";
    }
  }
}

TEST(ArchSm80, MmaLdmatrixF16) { run_mma_ldmatrix<false>(); }
TEST(ArchSm80, MmaLdmatrixBf16) { run_mma_ldmatrix<true>(); }

// ---- cp.async: 512 chunks of 16 B, gmem -> smem -> gmem, two commit groups ----
// Group 0 (chunks 0..255, cp_async_cg_16): after wait<1> each thread reads back its own chunks.
// Group 1 (chunks 256..511, cp_async_cg_16_zfill, chunk % 3 == 0 invalid -> 16 zero bytes over
// the poison): after wait<0> + __syncthreads each thread reads chunks another thread copied.
__global__ void cp_async_kernel(const uint4* in, uint4* out) {
  __shared__ uint4 s[512];
  const int t = threadIdx.x;  // 128 threads
  for (int i = t; i < 512; i += 128) s[i] = make_uint4(~0u, ~0u, ~0u, ~0u);
  __syncthreads();
  arch::cp_async_cg_16(smem_u32(&s[t]), &in[t]);
  arch::cp_async_cg_16(smem_u32(&s[t + 128]), &in[t + 128]);
  arch::cp_async_commit();
  for (int i = 256 + t; i < 512; i += 128) arch::cp_async_cg_16_zfill(smem_u32(&s[i]), &in[i], i % 3 != 0);
  arch::cp_async_commit();
  arch::cp_async_wait<1>();
  out[t] = s[t];
  out[t + 128] = s[t + 128];
  arch::cp_async_wait<0>();
  __syncthreads();
  for (int i = 256 + (127 - t); i < 512; i += 128) out[i] = s[i];  // copied by thread 127 - t
}

TEST(ArchSm80, CpAsync) {
  FLASHATTN_REQUIRE_SM80();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 g(seed);
  std::vector<uint32_t> in(2048);
  for (auto& x : in) x = g() | 1u;  // never zero: zero-filled chunks must stand out
  DeviceBuffer din(8192), dout(8192);
  upload(din, in);
  poison_bytes(dout);
  cp_async_kernel<<<1, 128>>>(static_cast<const uint4*>(din.ptr), static_cast<uint4*>(dout.ptr));
  FLASHATTN_SYNC_OK();
  const auto out = download<uint32_t>(dout, 2048);
  for (int i = 0; i < 2048; ++i) {
    const int chunk = i / 4;
    const uint32_t want = (chunk >= 256 && chunk % 3 == 0) ? 0u : in[i];
    ASSERT_EQ(out[i], want) << "word " << i << " (chunk " << chunk << ")";
  }
}

// ---- named barriers: warpgroup 0 hands 128 values per round to warpgroup 1 through smem ----
// Barrier 1: "buffer full" (producer arrives, consumer syncs); barrier 2: "buffer free" (consumer
// arrives, producer syncs before overwriting). A missing ordering shows as a stale round's values.
__global__ void named_barrier_kernel(const uint32_t* in, uint32_t* out, int rounds) {
  __shared__ uint32_t buf[128];
  const int t = threadIdx.x;  // 256 threads
  for (int r = 0; r < rounds; ++r) {
    if (t < 128) {
      if (r > 0) arch::named_barrier_sync<2, 256>();
      buf[t] = in[r * 128 + t];
      arch::named_barrier_arrive<1, 256>();
    } else {
      const int c = t - 128;
      arch::named_barrier_sync<1, 256>();
      out[r * 128 + c] = buf[127 - c];  // written by another thread, in another warpgroup
      if (r + 1 < rounds) arch::named_barrier_arrive<2, 256>();
    }
  }
}

TEST(ArchCommon, NamedBarrierHandoff) {
  FLASHATTN_REQUIRE_SM80();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 g(seed);
  constexpr int kRounds = 6;
  std::vector<uint32_t> in(kRounds * 128);
  for (auto& x : in) x = g() | 1u;
  DeviceBuffer din(in.size() * 4), dout(in.size() * 4);
  upload(din, in);
  poison_bytes(dout);
  named_barrier_kernel<<<1, 256>>>(static_cast<const uint32_t*>(din.ptr), static_cast<uint32_t*>(dout.ptr), kRounds);
  FLASHATTN_SYNC_OK();
  const auto out = download<uint32_t>(dout, in.size());
  for (int r = 0; r < kRounds; ++r)
    for (int c = 0; c < 128; ++c) ASSERT_EQ(out[r * 128 + c], in[r * 128 + 127 - c]) << "round " << r << " slot " << c;
}

// ---- ex2.approx.ftz vs std::exp2 ----
__global__ void ex2_kernel(const float* in, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = arch::ex2_approx_ftz(in[i]);
}

TEST(ArchCommon, Ex2Approx) {
  FLASHATTN_REQUIRE_SM80();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> xd(-100.f, 100.f);  // results stay normal fp32
  std::vector<float> in(4096);
  for (auto& x : in) x = xd(g);
  // Specials: -inf -> +0 (the online softmax relies on it); 2^-140 is subnormal -> flushed to +0.
  in[0] = -INFINITY;
  in[1] = -140.f;
  DeviceBuffer din(in.size() * 4), dout(in.size() * 4);
  upload(din, in);
  poison_bytes(dout);
  ex2_kernel<<<int(in.size() / 256), 256>>>(static_cast<const float*>(din.ptr), static_cast<float*>(dout.ptr),
                                            int(in.size()));
  FLASHATTN_SYNC_OK();
  const auto out = download<float>(dout, in.size());
  EXPECT_EQ(out[0], 0.f);
  EXPECT_FALSE(std::signbit(out[0]));
  EXPECT_EQ(out[1], 0.f);
  // PTX/CUDA document ex2.approx.f32 at about 2 ulp (relative 2^-22); allow twice that.
  for (size_t i = 2; i < in.size(); ++i) {
    const double want = std::exp2(double(in[i]));
    ASSERT_LE(std::fabs(out[i] - want), std::ldexp(want, -21)) << "x = " << in[i];
  }
}

// ---- %globaltimer: per-thread samples never go back; a ~2M-cycle spin takes 0.1 ms .. 1 s ----
__global__ void globaltimer_kernel(unsigned long long* out) {
  constexpr int kSamples = 64;
  unsigned long long* mine = out + threadIdx.x * kSamples;
  for (int i = 0; i < kSamples - 1; ++i) mine[i] = arch::globaltimer_ns();
  const long long c0 = clock64();
  while (clock64() - c0 < 2000000) {
  }
  mine[kSamples - 1] = arch::globaltimer_ns();
}

TEST(ArchCommon, GlobalTimerMonotonic) {
  FLASHATTN_REQUIRE_SM80();
  constexpr int kThreads = 32, kSamples = 64;
  DeviceBuffer dout(kThreads * kSamples * 8);
  poison_bytes(dout);
  globaltimer_kernel<<<1, kThreads>>>(static_cast<unsigned long long*>(dout.ptr));
  FLASHATTN_SYNC_OK();
  const auto out = download<unsigned long long>(dout, kThreads * kSamples);
  for (int t = 0; t < kThreads; ++t) {
    const unsigned long long* s = &out[t * kSamples];
    for (int i = 1; i < kSamples; ++i) ASSERT_LE(s[i - 1], s[i]) << "thread " << t << " sample " << i;
    // 2M cycles at any clock up to 20 GHz exceed 0.1 ms (resolution is 1 us or finer).
    EXPECT_GE(s[kSamples - 1] - s[0], 100000ull) << "thread " << t;
    EXPECT_LE(s[kSamples - 1] - s[0], 1000000000ull) << "thread " << t;
  }
}

}  // namespace
}  // namespace flashattn::testing::archtest
