// GPU unit tests of the sm_90a arch wrappers (built for 90a only): mbarrier phases, TMA load/store
// of one 128B-swizzled box (with expect_tx), wgmma SS, RS (transposed B) and SS with both operands
// MN-major (the backward's dQ), 1-D bulk loads, bulk reduce-add f32, setmaxnreg, stmatrix. Each
// kernel is one small, fixed-shape use of a wrapper that mirrors how src/sm90 uses it; the host
// recomputes the expected result independently from fresh random inputs, and every output starts
// poisoned (0xFF bytes). Device waits are bounded (2 s) so a broken barrier fails, not hangs.
#include <cuda.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "arch/ldmatrix.h"
#include "arch/mbarrier.h"
#include "arch/regs.h"
#include "arch/smem.h"
#include "arch/timer.h"
#include "arch/tma.h"
#include "arch/wgmma.h"
#include "arch_test_util.h"
#include "sm90/tma_host.h"

// wgmma and setmaxnreg exist only under sm_90a; nvcc also runs a device pass with __CUDA_ARCH__
// but without the feature macro, where the kernel bodies are left empty (as in sm90/fwd/kernel.h).
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FLASHATTN_TEST_SM90A_BODY 1
#endif

namespace flashattn::testing::archtest {
namespace {

using namespace flashattn::arch;

// mbarrier_wait with a 2 s limit: false (and the caller reports it) instead of a hung test.
__device__ bool wait_bounded(uint32_t bar, uint32_t parity) {
  const uint64_t t0 = globaltimer_ns();
  while (!mbarrier_try_wait_parity(bar, parity))
    if (globaltimer_ns() - t0 > 2000000000ull) return false;
  return true;
}

// ---- mbarrier: two phases of 64 arrivals, observed by a waiter warp ----
// Threads 0..63 write 64 values and arrive on `full` (count 64); warp 2 waits for the phase and
// copies the values out, then arrives on `consumed` (count 32) so the writers may reuse the
// buffer for phase 1. flags: try_wait results at known points (see the test), then timeouts.
__global__ void mbarrier_kernel(const uint32_t* in, uint32_t* out, uint32_t* flags) {
#ifdef FLASHATTN_TEST_SM90A_BODY
  __shared__ alignas(8) uint64_t full, consumed;
  __shared__ uint32_t data[64];
  const int t = threadIdx.x;  // 96 threads
  const uint32_t sfull = smem_u32(&full), sconsumed = smem_u32(&consumed);
  if (t == 0) {
    mbarrier_init(sfull, 64);
    mbarrier_init(sconsumed, 32);
    fence_mbarrier_init();
  }
  __syncthreads();
  if (t == 64) {
    flags[0] = mbarrier_try_wait_parity(sfull, 0);  // no arrivals yet: phase 0 pending
    flags[1] = mbarrier_try_wait_parity(sfull, 1);  // a fresh barrier counts the phase "before 0" as done
  }
  __syncthreads();  // arrivals start only after those checks
  uint32_t timeouts = 0;
  if (t < 64) {
    for (int p = 0; p < 2; ++p) {
      if (p == 1 && !wait_bounded(sconsumed, 0)) ++timeouts;
      data[t] = in[p * 64 + t];
      mbarrier_arrive(sfull);
    }
  } else {
    const int lane = t - 64;
    for (int p = 0; p < 2; ++p) {
      if (!wait_bounded(sfull, p)) ++timeouts;
      out[p * 64 + lane] = data[lane];
      out[p * 64 + lane + 32] = data[lane + 32];
      if (p == 0) mbarrier_arrive(sconsumed);
    }
    if (lane == 0) {
      flags[2] = mbarrier_try_wait_parity(sfull, 1);  // phase 1 completed
      flags[3] = mbarrier_try_wait_parity(sfull, 0);  // phase 2 (parity 0) pending
    }
  }
  if (timeouts) atomicAdd(&flags[4], timeouts);
#endif
}

TEST(ArchSm90, MbarrierTwoPhases) {
  FLASHATTN_REQUIRE_SM90A();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 g(seed);
  std::vector<uint32_t> in(128);
  for (auto& x : in) x = g() | 1u;
  DeviceBuffer din(512), dout(512), dflags(5 * 4);
  upload(din, in);
  poison_bytes(dout);
  poison_bytes(dflags);
  ASSERT_EQ(cudaMemset(static_cast<uint32_t*>(dflags.ptr) + 4, 0, 4), cudaSuccess);  // timeout counter
  mbarrier_kernel<<<1, 96>>>(static_cast<const uint32_t*>(din.ptr), static_cast<uint32_t*>(dout.ptr),
                             static_cast<uint32_t*>(dflags.ptr));
  FLASHATTN_SYNC_OK();
  const auto out = download<uint32_t>(dout, 128), flags = download<uint32_t>(dflags, 5);
  EXPECT_EQ(flags[4], 0u) << "waits timed out";
  EXPECT_EQ(flags[0], 0u) << "try_wait(parity 0) before any arrival";
  EXPECT_EQ(flags[1], 1u) << "try_wait(parity 1) on a fresh barrier";
  EXPECT_EQ(flags[2], 1u) << "try_wait(parity 1) after two phases";
  EXPECT_EQ(flags[3], 0u) << "try_wait(parity 0) after two phases (phase 2 pending)";
  for (int i = 0; i < 128; ++i) ASSERT_EQ(out[i], in[i]) << "phase " << i / 64 << " value " << i % 64;
}

// ---- TMA: one 64x64 bf16 box, 128B swizzle, loaded, un-swizzled by hand, stored back ----
// CTA x loads rows 64x.. of the (b, h) slice (CTA 1's box runs past S: those rows read as zero),
// completing 8192 expected bytes on an mbarrier (arrive_expect_tx); every thread un-swizzles
// (16-B chunk c of row r sits at chunk c ^ (r % 8)) into `unswizzled` (128 x 64). Thread 0 then
// TMA-stores the smem box unchanged to the same coordinates of tmOut (rows past S clipped).
__global__ void tma_kernel(const __grid_constant__ CUtensorMap tmIn, const __grid_constant__ CUtensorMap tmOut,
                           int h, int b, uint4* unswizzled, uint32_t* errors) {
#ifdef FLASHATTN_TEST_SM90A_BODY
  __shared__ alignas(1024) uint8_t tile[64 * 128];
  __shared__ alignas(8) uint64_t bar;
  const int t = threadIdx.x;  // 128 threads
  const int row0 = 64 * blockIdx.x;
  const uint32_t sbar = smem_u32(&bar), stile = smem_u32(tile);
  if (t == 0) {
    if (stile & 1023) atomicAdd(errors, 1u);  // the swizzle pattern assumes a 1 KiB-aligned box
    prefetch_tensormap(&tmIn);
    mbarrier_init(sbar, 1);
    fence_mbarrier_init();
  }
  __syncthreads();
  if (t == 0) {
    mbarrier_arrive_expect_tx(sbar, 64 * 128);  // the full box, even past the tensor's end
    tma_load_4d(stile, &tmIn, sbar, 0, row0, h, b);
  }
  const bool ok = wait_bounded(sbar, 0);
  if (!ok) atomicAdd(errors, 1u);
  for (int i = t; ok && i < 64 * 8; i += 128) {
    const int r = i / 8, c = i % 8;
    unswizzled[(row0 + r) * 8 + c] = *reinterpret_cast<const uint4*>(tile + r * 128 + ((c ^ (r % 8)) << 4));
  }
  if (t == 0 && ok) {
    fence_proxy_async_shared_cta();
    tma_store_4d(&tmOut, stile, 0, row0, h, b);
    cp_async_bulk_commit_group();
    cp_async_bulk_wait_group_read0();  // smem must stay valid until the store has read it
  }
#endif
}

TEST(ArchSm90, TmaRoundTripSwizzle128) {
  FLASHATTN_REQUIRE_SM90A();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 g(seed);
  // (B, S, H, D) = (2, 100, 3, 64) contiguous bf16; the boxes are taken from slice (b=1, h=2),
  // the last one in memory, so a store not clipped at S would run into the guard after it.
  constexpr int B = 2, S = 100, H = 3, D = 64, kB = 1, kH = 2, kGuard = 8192;
  constexpr size_t kTotal = size_t(B) * S * H * D;
  const auto in = random_elems(g, kTotal, true);
  DeviceBuffer din(kTotal * 2), dout((kTotal + kGuard) * 2), dun(128 * 64 * 2), derr(4);
  upload(din, in);
  poison_bytes(dout);
  poison_bytes(dun);
  ASSERT_EQ(cudaMemset(derr.ptr, 0, 4), cudaSuccess);
  const detail::View4<const void> vin{din.ptr, int64_t(S) * H * D, int64_t(H) * D, D};
  const detail::View4<const void> vout{dout.ptr, int64_t(S) * H * D, int64_t(H) * D, D};
  CUtensorMap tm_in{}, tm_out{};
  ASSERT_TRUE(sm90::encode_bshd(&tm_in, vin, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, B, S, H, D, 64));
  ASSERT_TRUE(sm90::encode_bshd(&tm_out, vout, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, B, S, H, D, 64));
  tma_kernel<<<2, 128>>>(tm_in, tm_out, kH, kB, static_cast<uint4*>(dun.ptr), static_cast<uint32_t*>(derr.ptr));
  FLASHATTN_SYNC_OK();
  EXPECT_EQ(download<uint32_t>(derr, 1)[0], 0u) << "misaligned box or mbarrier timeout";
  const auto un = download<uint16_t>(dun, 128 * 64);
  auto at = [&](int b, int s, int h, int d) { return ((size_t(b) * S + s) * H + h) * D + d; };
  for (int r = 0; r < 128; ++r)
    for (int d = 0; d < D; ++d)
      ASSERT_EQ(un[r * 64 + d], r < S ? in[at(kB, r, kH, d)] : uint16_t(0)) << "loaded row " << r << " col " << d;
  // Stored: exactly the slice (b=1, h=2), rows < S; every other element and the guard keep the poison.
  const auto out = download<uint16_t>(dout, kTotal + kGuard);
  for (size_t i = 0; i < kTotal + kGuard; ++i) {
    const bool in_slice = i < kTotal && i / (size_t(S) * H * D) == kB && (i / D) % H == kH;
    ASSERT_EQ(out[i], in_slice ? in[i] : uint16_t(0xFFFF)) << "stored element " << i;
  }
}

// ---- wgmma accumulator layout (sm90/fwd/epilogue.h): register i = 4c + 2r + e of thread t
// (warp w = t / 32, lane l) is row 16w + l/4 + 8r, column 8c + 2(l%4) + e ----
template <int N>
__device__ void store_acc(const float (&acc)[N / 2], float* d) {
  const int t = threadIdx.x % 128, w = t / 32, l = t % 32;
#pragma unroll
  for (int c = 0; c < N / 8; ++c)
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int e = 0; e < 2; ++e) d[(16 * w + l / 4 + 8 * r) * N + 8 * c + 2 * (l % 4) + e] = acc[4 * c + 2 * r + e];
}

// NaN accumulators before the first k step: scale_d = 0 must overwrite them.
template <int N>
__device__ void poison_acc(float (&acc)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) acc[i] = __int_as_float(0x7fc00000);
}

// ---- wgmma SS: D(64x64) = A(64x64) * B(64x64)^T, both K-major in 128B-swizzled smem ----
// As sm90/fwd/mainloop.h issue_qk with d = 64 (one box): descriptors (base, 16, 1024), k16 step
// kk at +32 B inside the swizzled 128-B rows. The kernel builds the swizzled tiles itself.
template <bool kBf16>
__global__ void __launch_bounds__(128) wgmma_ss_kernel(const uint4* a, const uint4* b, float* d, uint32_t* errors) {
#ifdef FLASHATTN_TEST_SM90A_BODY
  __shared__ alignas(1024) uint8_t sA[64 * 128];
  __shared__ alignas(1024) uint8_t sB[64 * 128];
  const int t = threadIdx.x;
  if (t == 0 && ((smem_u32(sA) | smem_u32(sB)) & 1023)) atomicAdd(errors, 1u);
  for (int i = t; i < 64 * 8; i += 128) {  // 64 rows of 8 chunks; chunk c of row r -> c ^ (r % 8)
    const int r = i / 8, c = i % 8;
    const int off = r * 128 + ((c ^ (r % 8)) << 4);
    *reinterpret_cast<uint4*>(sA + off) = a[i];
    *reinterpret_cast<uint4*>(sB + off) = b[i];
  }
  fence_proxy_async_shared_cta();  // generic-proxy smem writes -> visible to wgmma
  __syncthreads();
  const uint64_t da = make_smem_desc<128>(smem_u32(sA), 16, 1024);
  const uint64_t db = make_smem_desc<128>(smem_u32(sB), 16, 1024);
  float acc[32];
  poison_acc(acc);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) wgmma_ss<64, kBf16>(acc, da + ((kk * 32) >> 4), db + ((kk * 32) >> 4), kk > 0 ? 1u : 0u);
  wgmma_commit_group();
  wgmma_wait_group<0>();
  reg_fence(acc);
  store_acc<64>(acc, d);
#endif
}

template <bool kBf16>
void run_wgmma_ss() {
  FLASHATTN_REQUIRE_SM90A();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 g(seed);
  const auto a = random_elems(g, 64 * 64, kBf16), b = random_elems(g, 64 * 64, kBf16);
  DeviceBuffer da(8192), db(8192), dd(64 * 64 * 4), derr(4);
  upload(da, a);
  upload(db, b);
  poison_bytes(dd);
  ASSERT_EQ(cudaMemset(derr.ptr, 0, 4), cudaSuccess);
  wgmma_ss_kernel<kBf16><<<1, 128>>>(static_cast<const uint4*>(da.ptr), static_cast<const uint4*>(db.ptr),
                                     static_cast<float*>(dd.ptr), static_cast<uint32_t*>(derr.ptr));
  FLASHATTN_SYNC_OK();
  EXPECT_EQ(download<uint32_t>(derr, 1)[0], 0u) << "smem tiles not 1 KiB aligned";
  const auto d = download<float>(dd, 64 * 64);
  for (int m = 0; m < 64; ++m) {
    for (int n = 0; n < 64; ++n) {
      double want = 0, mag = 0;
      for (int k = 0; k < 64; ++k) {
        const double p = elem_value(a[m * 64 + k], kBf16) * elem_value(b[n * 64 + k], kBf16);
        want += p;
        mag += std::fabs(p);
      }
      // Exact products, fp32 sums: the error is a few fp32 ulps of the magnitude sum.
      ASSERT_NEAR(d[m * 64 + n], want, 1e-5 * mag) << "(" << m << ", " << n << ")";
    }
  }
}

TEST(ArchSm90, WgmmaSsF16) { run_wgmma_ss<false>(); }
TEST(ArchSm90, WgmmaSsBf16) { run_wgmma_ss<true>(); }

// ---- wgmma RS with transposed B: D(64xN) = A(64x32) * V(32xN), as O += P V in the mainloop ----
// A comes from registers in the P layout (mainloop.h convert_p: k step kk, register j holds
// rows +8(j%2), columns 16kk + 8(j/2) + 2(l%4), +1); V is (keys, N) with N contiguous, stored as
// N/64 boxes of 64 columns x 32 key rows (128B swizzle), descriptor (base, box bytes, 1024) and
// k16 step kk at +2048 B (16 key rows), exactly as Consumer::desc_v / issue_pv.
template <int N, bool kBf16>
__global__ void __launch_bounds__(128) wgmma_rs_kernel(const uint32_t* a, const uint4* v, float* d, uint32_t* errors) {
#ifdef FLASHATTN_TEST_SM90A_BODY
  constexpr int kK = 32, kBoxBytes = kK * 128;
  __shared__ alignas(1024) uint8_t sV[kBoxBytes * (N / 64)];
  const int t = threadIdx.x, w = t / 32, l = t % 32;
  if (t == 0 && (smem_u32(sV) & 1023)) atomicAdd(errors, 1u);
  for (int i = t; i < kK * (N / 8); i += 128) {  // key row k, 16-B chunk cn of N/8
    const int k = i / (N / 8), cn = i % (N / 8), c = cn % 8;
    *reinterpret_cast<uint4*>(sV + (cn / 8) * kBoxBytes + k * 128 + ((c ^ (k % 8)) << 4)) = v[i];
  }
  fence_proxy_async_shared_cta();
  __syncthreads();
  uint32_t ra[2][4];  // a: (64, 32) as pairs of 16-bit values, 16 pairs per row
#pragma unroll
  for (int kk = 0; kk < 2; ++kk)
#pragma unroll
    for (int j = 0; j < 4; ++j)
      ra[kk][j] = a[(16 * w + l / 4 + 8 * (j % 2)) * (kK / 2) + (16 * kk + 8 * (j / 2) + 2 * (l % 4)) / 2];
  const uint64_t dv = make_smem_desc<128>(smem_u32(sV), kBoxBytes, 1024);
  float acc[N / 2];
  poison_acc(acc);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 2; ++kk) wgmma_rs_tnspb<N, kBf16>(acc, ra[kk], dv + ((kk * 2048) >> 4), kk > 0 ? 1u : 0u);
  wgmma_commit_group();
  wgmma_wait_group<0>();
  reg_fence(acc);
  reg_fence(ra[0]);
  reg_fence(ra[1]);
  store_acc<N>(acc, d);
#endif
}

template <int N, bool kBf16>
void run_wgmma_rs() {
  FLASHATTN_REQUIRE_SM90A();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 g(seed);
  constexpr int kK = 32;
  const auto a = random_elems(g, 64 * kK, kBf16), v = random_elems(g, size_t(kK) * N, kBf16);
  DeviceBuffer da(a.size() * 2), dv(v.size() * 2), dd(64 * N * 4), derr(4);
  upload(da, a);
  upload(dv, v);
  poison_bytes(dd);
  ASSERT_EQ(cudaMemset(derr.ptr, 0, 4), cudaSuccess);
  wgmma_rs_kernel<N, kBf16><<<1, 128>>>(static_cast<const uint32_t*>(da.ptr), static_cast<const uint4*>(dv.ptr),
                                        static_cast<float*>(dd.ptr), static_cast<uint32_t*>(derr.ptr));
  FLASHATTN_SYNC_OK();
  EXPECT_EQ(download<uint32_t>(derr, 1)[0], 0u) << "smem tile not 1 KiB aligned";
  const auto d = download<float>(dd, 64 * N);
  for (int m = 0; m < 64; ++m) {
    for (int n = 0; n < N; ++n) {
      double want = 0, mag = 0;
      for (int k = 0; k < kK; ++k) {
        const double p = elem_value(a[m * kK + k], kBf16) * elem_value(v[k * N + n], kBf16);
        want += p;
        mag += std::fabs(p);
      }
      ASSERT_NEAR(d[m * N + n], want, 1e-5 * mag) << "(" << m << ", " << n << ")";
    }
  }
}

TEST(ArchSm90, WgmmaRsTnspBN64F16) { run_wgmma_rs<64, false>(); }
TEST(ArchSm90, WgmmaRsTnspBN64Bf16) { run_wgmma_rs<64, true>(); }
TEST(ArchSm90, WgmmaRsTnspBN128Bf16) { run_wgmma_rs<128, true>(); }  // two boxes: checks the LBO

// ---- wgmma SS with both operands MN-major: D(64xN) = A(64x16) * B(16xN), as dQ = dS K in the
// backward (sm90/bwd/mainloop.h). Both tiles are K rows of 128 B (64 M- or N-elements, 128B
// swizzle), N/64 boxes of 32 rows for B (one box, half used, for N = 32), descriptor
// (base, box bytes, 1024); the second k16 step is at +2048 B (16 rows) and accumulates. ----

// Byte offset of element (k, x) in a tile of 64-column boxes of box_bytes each: 16-B chunk
// (x % 64) / 8 of row k sits at chunk ((x % 64) / 8) ^ (k % 8).
__device__ int mn_major_offset(int k, int x, int box_bytes) {
  return (x / 64) * box_bytes + k * 128 + ((((x % 64) / 8) ^ (k % 8)) << 4) + (x % 8) * 2;
}

// a: (K, 64) with M contiguous, b: (K, N) with N contiguous. d1 = A B over k < 16 (one step,
// scale_d = 0 over NaN accumulators), d2 = A B over k < 32 (the second step added to d1).
// Columns N..63 of a half-used B box hold NaN: an instruction that read them would show it.
template <int N, bool kBf16>
__global__ void __launch_bounds__(128)
    wgmma_ss_tnspab_kernel(const uint16_t* a, const uint16_t* b, float* d1, float* d2, uint32_t* errors) {
#ifdef FLASHATTN_TEST_SM90A_BODY
  constexpr int kK = 32, kBoxBytes = kK * 128, kBBoxes = (N + 63) / 64;
  __shared__ alignas(1024) uint8_t sA[kBoxBytes];
  __shared__ alignas(1024) uint8_t sB[kBoxBytes * kBBoxes];
  const int t = threadIdx.x;
  if (t == 0 && ((smem_u32(sA) | smem_u32(sB)) & 1023)) atomicAdd(errors, 1u);
  for (int i = t; i < kK * 64; i += 128) {
    const int k = i / 64, m = i % 64;
    *reinterpret_cast<uint16_t*>(sA + mn_major_offset(k, m, kBoxBytes)) = a[k * 64 + m];
  }
  for (int i = t; i < kK * 64 * kBBoxes; i += 128) {
    const int k = i / (64 * kBBoxes), n = i % (64 * kBBoxes);
    *reinterpret_cast<uint16_t*>(sB + mn_major_offset(k, n, kBoxBytes)) = n < N ? b[k * N + n] : uint16_t(0xFFFF);
  }
  fence_proxy_async_shared_cta();  // generic-proxy smem writes -> visible to wgmma
  __syncthreads();
  const uint64_t da = make_smem_desc<128>(smem_u32(sA), kBoxBytes, 1024);
  const uint64_t db = make_smem_desc<128>(smem_u32(sB), kBoxBytes, 1024);
  float acc[N / 2];
  poison_acc(acc);
  wgmma_fence();
  wgmma_ss_tnspab<N, kBf16>(acc, da, db, 0u);
  wgmma_commit_group();
  wgmma_wait_group<0>();
  reg_fence(acc);
  store_acc<N>(acc, d1);
  wgmma_fence();
  wgmma_ss_tnspab<N, kBf16>(acc, da + (2048 >> 4), db + (2048 >> 4), 1u);
  wgmma_commit_group();
  wgmma_wait_group<0>();
  reg_fence(acc);
  store_acc<N>(acc, d2);
#endif
}

template <int N, bool kBf16>
void run_wgmma_ss_tnspab() {
  FLASHATTN_REQUIRE_SM90A();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 g(seed);
  constexpr int kK = 32;
  const auto a = random_elems(g, size_t(kK) * 64, kBf16), b = random_elems(g, size_t(kK) * N, kBf16);
  DeviceBuffer da(a.size() * 2), db(b.size() * 2), dd1(64 * N * 4), dd2(64 * N * 4), derr(4);
  upload(da, a);
  upload(db, b);
  poison_bytes(dd1);
  poison_bytes(dd2);
  ASSERT_EQ(cudaMemset(derr.ptr, 0, 4), cudaSuccess);
  wgmma_ss_tnspab_kernel<N, kBf16><<<1, 128>>>(static_cast<const uint16_t*>(da.ptr), static_cast<const uint16_t*>(db.ptr),
                                               static_cast<float*>(dd1.ptr), static_cast<float*>(dd2.ptr),
                                               static_cast<uint32_t*>(derr.ptr));
  FLASHATTN_SYNC_OK();
  EXPECT_EQ(download<uint32_t>(derr, 1)[0], 0u) << "smem tiles not 1 KiB aligned";
  const auto d1 = download<float>(dd1, 64 * N), d2 = download<float>(dd2, 64 * N);
  for (int m = 0; m < 64; ++m) {
    for (int n = 0; n < N; ++n) {
      double want = 0, mag = 0;
      for (int k = 0; k < kK; ++k) {
        const double p = elem_value(a[k * 64 + m], kBf16) * elem_value(b[k * N + n], kBf16);
        want += p;
        mag += std::fabs(p);
        // Exact products, fp32 sums: the error is a few fp32 ulps of the magnitude sum.
        if (k == 15) ASSERT_NEAR(d1[m * N + n], want, 1e-5 * mag) << "one k16 step, (" << m << ", " << n << ")";
      }
      ASSERT_NEAR(d2[m * N + n], want, 1e-5 * mag) << "two k16 steps, (" << m << ", " << n << ")";
    }
  }
}

TEST(ArchSm90, WgmmaSsTnspAbN32F16) { run_wgmma_ss_tnspab<32, false>(); }
TEST(ArchSm90, WgmmaSsTnspAbN32Bf16) { run_wgmma_ss_tnspab<32, true>(); }
TEST(ArchSm90, WgmmaSsTnspAbN64F16) { run_wgmma_ss_tnspab<64, false>(); }
TEST(ArchSm90, WgmmaSsTnspAbN64Bf16) { run_wgmma_ss_tnspab<64, true>(); }
TEST(ArchSm90, WgmmaSsTnspAbN128F16) { run_wgmma_ss_tnspab<128, false>(); }  // two B boxes: checks the LBO
TEST(ArchSm90, WgmmaSsTnspAbN128Bf16) { run_wgmma_ss_tnspab<128, true>(); }

// ---- 1-D bulk copy: two loads of `bytes` completing on one mbarrier (expect_tx 2 * bytes), as
// the backward's producer loads lse and dsum of a step. Sources sit at 16-B (not 128-B) aligned
// offsets; smem starts as 0xFF (generic writes, then the proxy fence) and is copied out whole,
// so bytes past each load must keep it. ----
constexpr int kBulkRegion = 1024;  // smem bytes per destination
// Source byte offset of load r (0 or 1).
__host__ __device__ constexpr int bulk_src_off(int r) { return r == 0 ? 48 : 1024 + 272; }

__global__ void bulk_load_kernel(const uint8_t* src, uint32_t bytes, uint4* out, uint32_t* errors) {
#ifdef FLASHATTN_TEST_SM90A_BODY
  __shared__ alignas(128) uint8_t buf[2 * kBulkRegion];
  __shared__ alignas(8) uint64_t bar;
  const int t = threadIdx.x;  // 128 threads
  const uint32_t sbar = smem_u32(&bar), sbuf = smem_u32(buf);
  for (int i = t; i < 2 * kBulkRegion / 16; i += 128) reinterpret_cast<uint4*>(buf)[i] = make_uint4(~0u, ~0u, ~0u, ~0u);
  fence_proxy_async_shared_cta();  // the poison lands before the bulk copies write
  if (t == 0) {
    mbarrier_init(sbar, 1);
    fence_mbarrier_init();
  }
  __syncthreads();
  if (t == 0) {
    mbarrier_arrive_expect_tx(sbar, 2 * bytes);
    bulk_load_1d(sbuf, src + bulk_src_off(0), bytes, sbar);
    bulk_load_1d(sbuf + kBulkRegion, src + bulk_src_off(1), bytes, sbar);
  }
  const bool ok = wait_bounded(sbar, 0);
  if (!ok) atomicAdd(errors, 1u);
  for (int i = t; ok && i < 2 * kBulkRegion / 16; i += 128) out[i] = reinterpret_cast<const uint4*>(buf)[i];
#endif
}

void run_bulk_load_1d(uint32_t bytes) {
  FLASHATTN_REQUIRE_SM90A();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 g(seed);
  std::vector<uint8_t> src(4096);
  for (auto& x : src) x = static_cast<uint8_t>(g());
  DeviceBuffer dsrc(src.size()), dout(2 * kBulkRegion), derr(4);
  upload(dsrc, src);
  poison_bytes(dout);
  ASSERT_EQ(cudaMemset(derr.ptr, 0, 4), cudaSuccess);
  bulk_load_kernel<<<1, 128>>>(static_cast<const uint8_t*>(dsrc.ptr), bytes, static_cast<uint4*>(dout.ptr),
                               static_cast<uint32_t*>(derr.ptr));
  FLASHATTN_SYNC_OK();
  EXPECT_EQ(download<uint32_t>(derr, 1)[0], 0u) << "mbarrier timeout (transaction bytes never completed)";
  const auto out = download<uint8_t>(dout, 2 * kBulkRegion);
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < kBulkRegion; ++i)
      ASSERT_EQ(int(out[r * kBulkRegion + i]), uint32_t(i) < bytes ? int(src[bulk_src_off(r) + i]) : 0xFF)
          << "load " << r << " byte " << i;
}

// ---- stmatrix x4: one warp stores four 8x8 b16 matrices from registers. Matrix i's rows go
// to rows 8i..8i+7 of a 32-row, 64-byte-pitch buffer, at a 16-byte column chosen per row (so
// each lane's row address matters, as in the backward's swizzled dS^T); the rest stays poisoned. ----
__host__ __device__ constexpr int stsm_col_bytes(int row) { return 16 * ((row * 5 + 1) % 4); }

__global__ void stmatrix_kernel(const uint32_t* in, uint4* out) {
#ifdef FLASHATTN_TEST_SM90A_BODY
  __shared__ alignas(16) uint8_t buf[32 * 64];
  const int t = threadIdx.x;  // 32 threads
  for (int i = t; i < 32 * 64 / 16; i += 32) reinterpret_cast<uint4*>(buf)[i] = make_uint4(~0u, ~0u, ~0u, ~0u);
  __syncwarp();
  const uint32_t r[4] = {in[4 * t], in[4 * t + 1], in[4 * t + 2], in[4 * t + 3]};
  const int row = t;  // lane t: row t % 8 of matrix t / 8
  stmatrix_x4(smem_u32(buf) + row * 64 + stsm_col_bytes(row), r);
  __syncwarp();
  for (int i = t; i < 32 * 64 / 16; i += 32) out[i] = reinterpret_cast<const uint4*>(buf)[i];
#endif
}

TEST(ArchSm90, StmatrixX4) {
  FLASHATTN_REQUIRE_SM90A();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 g(seed);
  std::vector<uint32_t> in(128);
  for (auto& x : in) x = g();
  DeviceBuffer din(in.size() * 4), dout(32 * 64);
  upload(din, in);
  poison_bytes(dout);
  stmatrix_kernel<<<1, 32>>>(static_cast<const uint32_t*>(din.ptr), static_cast<uint4*>(dout.ptr));
  FLASHATTN_SYNC_OK();
  const auto out = download<uint16_t>(dout, 32 * 32);
  for (int row = 0; row < 32; ++row)
    for (int c = 0; c < 32; ++c) {  // b16 column of the 64-byte row
      const int c0 = stsm_col_bytes(row) / 2;
      uint32_t want = 0xFFFF;
      if (c >= c0 && c < c0 + 8) {
        // Matrix row / 8, its row row % 8, column c - c0: held by lane 4 (row % 8) + (c - c0) / 2,
        // register row / 8, low half for an even column.
        const uint32_t reg = in[4 * (4 * (row % 8) + (c - c0) / 2) + row / 8];
        want = ((c - c0) % 2 == 0) ? (reg & 0xFFFF) : (reg >> 16);
      }
      ASSERT_EQ(uint32_t(out[row * 32 + c]), want) << "row " << row << " column " << c;
    }
}

TEST(ArchSm90, BulkLoad1d256) { run_bulk_load_1d(256); }
TEST(ArchSm90, BulkLoad1d512) { run_bulk_load_1d(512); }

// ---- Bulk reduce-add f32: each of kReduceCtas CTAs writes 8 KB of small integers to smem
// (generic stores, proxy fence) and one thread adds them into a shared global array (all CTAs at
// once, as dQ blocks do) and into its own private slice, then waits for full completion
// (wait_group 0, not .read) and reads its private slice back. Sums of small integers are exact
// in fp32, so every result is compared exactly; guard floats around the shared array must keep
// their values. ----
constexpr int kReduceCtas = 8, kReduceFloats = 2048, kReduceGuard = 4;

__global__ void bulk_reduce_kernel(const float* vals, float* shared_dst, float* own_dst, float* readback) {
#ifdef FLASHATTN_TEST_SM90A_BODY
  __shared__ alignas(128) float buf[kReduceFloats];
  const int t = threadIdx.x, c = blockIdx.x;  // 128 threads
  for (int i = t; i < kReduceFloats; i += 128) buf[i] = vals[c * kReduceFloats + i];
  fence_proxy_async_shared_cta();  // generic smem writes -> visible to the bulk reduction
  __syncthreads();
  if (t == 0) {
    const uint32_t sbuf = smem_u32(buf);
    bulk_reduce_add_f32(shared_dst, sbuf, kReduceFloats * 4);
    bulk_reduce_add_f32(own_dst + c * kReduceFloats, sbuf, kReduceFloats * 4);
    cp_async_bulk_commit_group();
    cp_async_bulk_wait_group0();
    fence_proxy_async_global();  // the reductions' global writes before this thread's loads
    for (int i = 0; i < kReduceFloats; ++i) readback[c * kReduceFloats + i] = __ldcg(own_dst + c * kReduceFloats + i);
  }
#endif
}

TEST(ArchSm90, BulkReduceAddF32) {
  FLASHATTN_REQUIRE_SM90A();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> small(-64, 64);
  constexpr int kAll = kReduceCtas * kReduceFloats;
  std::vector<float> vals(kAll), shared0(kReduceFloats + 2 * kReduceGuard), own0(kAll);
  for (auto& x : vals) x = float(small(g));
  for (auto& x : shared0) x = float(small(g));
  for (auto& x : own0) x = float(small(g));
  DeviceBuffer dvals(kAll * 4), dshared(shared0.size() * 4), down(kAll * 4), dread(kAll * 4);
  upload(dvals, vals);
  upload(dshared, shared0);
  upload(down, own0);
  poison_bytes(dread);
  float* shared_dst = static_cast<float*>(dshared.ptr) + kReduceGuard;  // 16-B aligned
  bulk_reduce_kernel<<<kReduceCtas, 128>>>(static_cast<const float*>(dvals.ptr), shared_dst,
                                           static_cast<float*>(down.ptr), static_cast<float*>(dread.ptr));
  FLASHATTN_SYNC_OK();
  const auto shared = download<float>(dshared, shared0.size());
  const auto own = download<float>(down, kAll), readback = download<float>(dread, kAll);
  for (size_t i = 0; i < shared0.size(); ++i) {
    float want = shared0[i];
    const bool guard = i < size_t(kReduceGuard) || i >= size_t(kReduceGuard + kReduceFloats);
    if (!guard)
      for (int c = 0; c < kReduceCtas; ++c) want += vals[c * kReduceFloats + (i - kReduceGuard)];
    ASSERT_EQ(shared[i], want) << (guard ? "guard float " : "shared element ") << i;
  }
  for (int i = 0; i < kAll; ++i) {
    ASSERT_EQ(own[i], own0[i] + vals[i]) << "CTA " << i / kReduceFloats << " private element " << i % kReduceFloats;
    ASSERT_EQ(readback[i], own0[i] + vals[i])
        << "CTA " << i / kReduceFloats << " read back after wait_group 0, element " << i % kReduceFloats;
  }
}

// ---- setmaxnreg: the forward kernel's split (producer warpgroup to 24, two consumers to 240) ----
// The measured property is only that the kernel runs through both and computes the right values.
__global__ void __launch_bounds__(384, 1) setmaxnreg_kernel(const uint32_t* in, uint32_t* out) {
#ifdef FLASHATTN_TEST_SM90A_BODY
  const int t = threadIdx.x;
  if (t < 128) {
    setmaxnreg_dec<24>();
    out[t] = in[t] * 3u + 1u;
  } else {
    setmaxnreg_inc<240>();
    uint32_t s = 0;
    for (int i = 0; i < 64; ++i) s += in[(t + i) % 384] * uint32_t(i + 1);
    out[t] = s;
  }
#endif
}

TEST(ArchSm90, SetmaxnregSplit) {
  FLASHATTN_REQUIRE_SM90A();
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 g(seed);
  std::vector<uint32_t> in(384);
  for (auto& x : in) x = g() | 1u;
  DeviceBuffer din(384 * 4), dout(384 * 4);
  upload(din, in);
  poison_bytes(dout);
  setmaxnreg_kernel<<<1, 384>>>(static_cast<const uint32_t*>(din.ptr), static_cast<uint32_t*>(dout.ptr));
  FLASHATTN_SYNC_OK();
  const auto out = download<uint32_t>(dout, 384);
  for (int t = 0; t < 384; ++t) {
    uint32_t want = in[t] * 3u + 1u;
    if (t >= 128) {
      want = 0;
      for (int i = 0; i < 64; ++i) want += in[(t + i) % 384] * uint32_t(i + 1);
    }
    ASSERT_EQ(out[t], want) << "thread " << t;
  }
}

}  // namespace
}  // namespace flashattn::testing::archtest
