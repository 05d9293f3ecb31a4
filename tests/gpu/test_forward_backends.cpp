// Every fast backend, through the public API, against the GPU references on the awkward grid
// (the correctness rule of docs/ARCHITECTURE.md, lse included), outputs poisoned, including strided views of packed qkv.
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "gpu_util.h"

using namespace flashattn;
using namespace flashattn::testing;

namespace {

struct Case {
  int b, sq, sk, hq, hkv, d;
  bool causal;
  DType dt;
  bool packed = false;  // q, k, v are slices of one (B, S, 3, H, D) tensor (needs sq == sk, hq == hkv)
  // out's heads are D + 8 elements apart (the API wants 16-byte multiples): the 8 gap elements
  // per head must stay untouched by every epilogue (direct or TMA store).
  bool padded_out = false;
  int dv = 0;  // v's and out's head dim; 0: d
  int vd() const { return dv ? dv : d; }
};

std::string name(const Case& c) {
  return "b" + std::to_string(c.b) + "_sq" + std::to_string(c.sq) + "_sk" + std::to_string(c.sk) +
         "_h" + std::to_string(c.hq) + "x" + std::to_string(c.hkv) + "_d" + std::to_string(c.d) +
         (c.dv ? "v" + std::to_string(c.dv) : "") + (c.causal ? "_causal" : "") + (c.dt == DType::kBFloat16 ? "_bf16" : "_fp16") +
         (c.packed ? "_packed" : "") + (c.padded_out ? "_paddedout" : "");
}

void PrintTo(const Case& c, std::ostream* os) { *os << name(c); }

std::vector<Case> grid() {
  std::vector<Case> cs;
  for (DType dt : {DType::kBFloat16, DType::kFloat16})
    for (int d : {64, 128, 256})
      for (bool causal : {false, true}) {
        cs.push_back({1, 1, 1, 4, 4, d, causal, dt});
        cs.push_back({2, 17, 17, 8, 2, d, causal, dt});
        cs.push_back({1, 113, 1000, 4, 1, d, causal, dt});   // Sq < Sk
        cs.push_back({1, 1000, 113, 8, 8, d, causal, dt});   // Sq > Sk: fully masked rows
        cs.push_back({1, 4097, 4097, 8, 2, d, causal, dt});
        cs.push_back({16, 256, 256, 4, 1, d, causal, dt});   // batch 16, MQA
        cs.push_back({1, 1000, 1000, 16, 2, d, causal, dt});  // GQA 8
      }
  // Stream-K tail (sm90, non-causal): few tiles with long keys split into many pieces per tile
  // (split-KV); the standard grid's 2k point splits the last wave's 68 tiles over 132 chunks.
  for (int d : {64, 128, 256}) {
    cs.push_back({1, 200, 6000, 2, 1, d, false, DType::kBFloat16});
    cs.push_back({2, 300, 3001, 3, 3, d, false, DType::kFloat16});
  }
  cs.push_back({8, 2048, 2048, 16, 16, 128, false, DType::kBFloat16});
  for (int d : {96, 192}) {
    cs.push_back({1, 1023, 1023, 4, 4, d, true, DType::kBFloat16});
    cs.push_back({2, 300, 517, 6, 2, d, false, DType::kFloat16});
  }
  // Head dims between the instantiated ones run on the covering kernel with zero-filled
  // columns; out's gap columns (padded_out) check that nothing past the head dim is written.
  for (int d : {8, 24, 40, 72, 80, 112, 136, 160, 200, 248}) {
    cs.push_back({2, 300, 517, 6, 2, d, d % 16 == 8, DType::kBFloat16, false, true});
    cs.push_back({1, 1000, 113, 4, 2, d, true, DType::kFloat16, false, true});
  }
  // Dv != D (DeepSeek-style 192/128 and others, both ways round).
  for (auto [d, dv] : {std::pair{192, 128}, {64, 128}, {128, 64}, {40, 24}, {256, 8}}) {
    for (bool causal : {false, true}) {
      cs.push_back({2, 777, 1000, 8, 2, d, causal, DType::kBFloat16, false, true, dv});
      cs.push_back({1, 1000, 113, 4, 4, d, causal, DType::kFloat16, false, false, dv});
    }
  }
  // D=96 runs on 64B-swizzled tiles and (192, 128) on its own pair kernel (K and V tiles of
  // different widths): the shapes that exercise the 128B kernels' GQA, long walks, stream-K
  // splits, many short tiles per CTA (Q slots and O staging wrapping), and strided views.
  for (auto [d, dv] : {std::pair{96, 0}, {192, 128}}) {
    for (bool causal : {false, true}) {
      cs.push_back({2, 17, 17, 8, 2, d, causal, DType::kBFloat16, false, false, dv});
      cs.push_back({1, 4097, 4097, 8, 2, d, causal, DType::kFloat16, false, false, dv});
      cs.push_back({1, 1000, 1000, 16, 2, d, causal, DType::kBFloat16, false, true, dv});
      cs.push_back({16, 512, 64, 8, 2, d, causal, DType::kBFloat16, false, true, dv});
      cs.push_back({1, 1000, 113, 4, 2, d, causal, DType::kFloat16, false, false, dv});
    }
    cs.push_back({1, 200, 6000, 2, 1, d, false, DType::kBFloat16, false, false, dv});
    cs.push_back({2, 300, 3001, 3, 3, d, false, DType::kFloat16, false, true, dv});
  }
  cs.push_back({2, 777, 777, 4, 4, 96, true, DType::kBFloat16, true});
  cs.push_back({1, 1000, 1000, 8, 8, 96, false, DType::kFloat16, true});
  for (auto [d, dv] : {std::pair{176, 128}, {136, 64}, {192, 96}, {184, 120}})
    cs.push_back({2, 333, 1000, 4, 2, d, d == 176, DType::kBFloat16, false, true, dv});
  for (int d : {64, 128, 256})
    for (bool causal : {false, true}) {
      cs.push_back({4, 1000, 1000, 8, 8, d, causal, DType::kBFloat16, false, true});
      cs.push_back({1, 1000, 113, 4, 2, d, causal, DType::kFloat16, false, true});  // rows without keys
      // Many short tiles per persistent CTA: the Q slots and O staging wrap several times; causal
      // with Sk < Sq gives whole tiles without keys between tiles with keys.
      cs.push_back({16, 512, 64, 8, 2, d, causal, DType::kBFloat16});
      cs.push_back({16, 512, 64, 8, 2, d, causal, DType::kBFloat16, false, true});
    }
  for (int d : {64, 128, 256}) {
    cs.push_back({2, 777, 777, 4, 4, d, true, DType::kBFloat16, true});
    cs.push_back({1, 1000, 1000, 8, 8, d, false, DType::kFloat16, true});
  }
  return cs;
}

class Backends : public ::testing::TestWithParam<std::tuple<Backend, Case>> {};

}  // namespace

TEST_P(Backends, MatchesReference) {
  FLASHATTN_REQUIRE_GPU();
  const auto [backend, c] = GetParam();
  const int64_t nq = int64_t(c.b) * c.sq * c.hq * c.d, nk = int64_t(c.b) * c.sk * c.hkv * c.d;
  const int64_t nv = int64_t(c.b) * c.sk * c.hkv * c.vd();
  const int64_t nlse = int64_t(c.b) * c.hq * c.sq;
  const int od = c.padded_out ? c.vd() + 8 : c.vd();  // out's head stride
  const int64_t no = int64_t(c.b) * c.sq * c.hq * od;
  DeviceBuffer qkv(c.packed ? 3 * nq * 2 : 16), q(nq * 2), k(nk * 2), v(nv * 2), o(no * 2), lse(nlse * 4);
  ForwardArgs a;
  if (c.packed) {
    check::fill_random(qkv.ptr, c.dt, 3 * nq, 21 + c.sq, 0.1f, 1.f, nullptr);
    auto* base = static_cast<char*>(qkv.ptr);
    for (int i = 0; i < 3; ++i) {
      TensorRef t = make_contiguous(base + int64_t(i) * c.hq * c.d * 2, c.dt, c.b, c.sq, c.hq, c.d);
      t.stride[1] = 3 * int64_t(c.hq) * c.d;
      t.stride[0] = t.stride[1] * c.sq;
      (i == 0 ? a.q : i == 1 ? a.k : a.v) = t;
    }
  } else {
    check::fill_random(q.ptr, c.dt, nq, 31 + c.sq, 0.1f, 1.f, nullptr);
    check::fill_random(k.ptr, c.dt, nk, 32 + c.sk, 0.1f, 1.f, nullptr);
    check::fill_random(v.ptr, c.dt, nv, 33 + c.d, 0.2f, 1.f, nullptr);
    a.q = make_contiguous(q.ptr, c.dt, c.b, c.sq, c.hq, c.d);
    a.k = make_contiguous(k.ptr, c.dt, c.b, c.sk, c.hkv, c.d);
    a.v = make_contiguous(v.ptr, c.dt, c.b, c.sk, c.hkv, c.vd());
  }
  a.out = make_contiguous(o.ptr, c.dt, c.b, c.sq, c.hq, c.vd());
  a.out.stride[2] = od;
  a.out.stride[1] = int64_t(c.hq) * od;
  a.out.stride[0] = a.out.stride[1] * c.sq;
  a.lse = static_cast<float*>(lse.ptr);
  a.causal = c.causal;
  a.backend = backend;
  Backend chosen;
  const Status rs = resolve_backend(a, &chosen);
  if (rs.code() == StatusCode::kNotSupported) GTEST_SKIP() << rs.message();
  ASSERT_TRUE(rs.ok()) << rs.message();
  check::poison(o.ptr, c.dt, no, nullptr);
  check::poison(lse.ptr, DType::kFloat32, nlse, nullptr);
  const Status s = forward(a);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const check::Report r = check::check_against_reference(a, nullptr);
  EXPECT_TRUE(r.pass) << backend_name(chosen) << ": " << r.message;
  if (c.padded_out) {  // the gaps between heads still hold the poison (0xFFFF)
    std::vector<uint16_t> host(no);
    ASSERT_EQ(cudaMemcpy(host.data(), o.ptr, no * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    int64_t touched = 0;
    for (int64_t row = 0; row < int64_t(c.b) * c.sq * c.hq; ++row)
      for (int e = c.vd(); e < od; ++e) touched += host[row * od + e] != 0xFFFF;
    EXPECT_EQ(touched, 0) << "elements written between out's heads";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Grid, Backends,
    ::testing::Combine(::testing::Values(Backend::kSm90, Backend::kSm80, Backend::kAuto),
                       ::testing::ValuesIn(grid())),
    [](const auto& info) {
      return std::string(backend_name(std::get<0>(info.param))) + "_" + name(std::get<1>(info.param));
    });
