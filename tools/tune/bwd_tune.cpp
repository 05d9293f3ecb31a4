#include "tune/bwd_tune.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "api/backends.h"
#include "api/validate.h"
#include "reference/device_check.h"
#include "tune/bwd_candidates.h"
#include "tune/problem.h"
#include "tune/tune_util.h"

namespace flashattn::tune {
namespace {

using sm80::BwdCandidate;

// One device buffer freed on scope exit.
struct Buf {
  void* p = nullptr;
  explicit Buf(size_t bytes) {
    if (cudaMalloc(&p, bytes) != cudaSuccess) p = nullptr;
  }
  ~Buf() { cudaFree(p); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
};

// Inputs of one backward (the forward's random q, k, v with out and lse from the library's
// forward; a random dout) and `sets` sets of gradients.
struct BwdProblem {
  Problem fwd;
  int64_t nq, nk;
  Buf dout;
  std::vector<std::unique_ptr<Buf>> grads;  // dq, dk, dv of each set
  bool ok = false;

  BwdProblem(const Shape& s, int sets, uint64_t seed)
      : fwd(s, seed), nq(int64_t(s.b) * s.sq * s.hq * s.d), nk(int64_t(s.b) * s.sk * s.hkv * s.d), dout(nq * 2) {
    for (int i = 0; i < sets; ++i) {
      grads.push_back(std::make_unique<Buf>(nq * 2));
      grads.push_back(std::make_unique<Buf>(nk * 2));
      grads.push_back(std::make_unique<Buf>(nk * 2));
    }
    ok = fwd.ok && dout.p && std::all_of(grads.begin(), grads.end(), [](const auto& b) { return b->p != nullptr; });
    if (!ok) return;
    check::fill_random(dout.p, s.dt, nq, seed * 3 + 4, 0.5f, 1.0f, nullptr);
    ok = forward(fwd.args, nullptr).ok();
  }

  // The parameters of a backward into gradient set i (validated as the public entry point does).
  bool params(int i, detail::BwdParams* p, bool deterministic = false) const {
    const Shape& s = fwd.s;
    BackwardArgs a;
    a.dout = make_contiguous(dout.p, s.dt, s.b, s.sq, s.hq, s.d);
    a.q = fwd.args.q;
    a.k = fwd.args.k;
    a.v = fwd.args.v;
    a.out = fwd.args.out;
    a.lse = fwd.args.lse;
    a.dq = make_contiguous(grads[3 * i]->p, s.dt, s.b, s.sq, s.hq, s.d);
    a.dk = make_contiguous(grads[3 * i + 1]->p, s.dt, s.b, s.sk, s.hkv, s.d);
    a.dv = make_contiguous(grads[3 * i + 2]->p, s.dt, s.b, s.sk, s.hkv, s.d);
    a.causal = s.causal;
    a.deterministic = deterministic;
    a.backend = Backend::kSm80;
    bool empty = false;
    return detail::validate_and_convert(a, p, &empty).ok() && !empty;
  }
  int64_t count(int t) const { return t == 0 ? nq : nk; }  // elements of dq (t = 0), dk, dv
};

std::vector<double> to_host(const void* dev, int64_t n, DType dt) {
  std::vector<uint16_t> raw(n);
  cudaMemcpy(raw.data(), dev, n * 2, cudaMemcpyDeviceToHost);
  std::vector<double> out(n);
  for (int64_t i = 0; i < n; ++i) out[i] = check::half_bits_to_double(raw[i], dt);
  return out;
}

// Whether n bytes at two device addresses differ.
bool bytes_differ(const void* a, const void* b, int64_t n) {
  std::vector<unsigned char> x(n), y(n);
  cudaMemcpy(x.data(), a, n, cudaMemcpyDeviceToHost);
  cudaMemcpy(y.data(), b, n, cudaMemcpyDeviceToHost);
  return x != y;
}

double max_err(const std::vector<double>& a, const std::vector<double>& b) {
  double e = 0;
  for (size_t i = 0; i < a.size(); ++i) e = std::max(e, std::isnan(a[i]) ? INFINITY : std::fabs(a[i] - b[i]));
  return e;
}

// The gate: a candidate passes on a shape when dq, dk and dv each meet the rule against the
// GPU fp32 reference, with the input-precision reference as the yardstick, and in deterministic
// mode (gradient sets 3 and 4, the second on another stream) meet it too and agree bitwise.
bool gate(const BwdCandidate& c, const Shape& s, uint64_t seed) {
  BwdProblem pr(s, 5, seed);
  detail::BwdParams pc, pref, plow, pdet[2];
  if (!pr.ok || !pr.params(0, &pc) || !pr.params(1, &pref) || !pr.params(2, &plow) ||
      !pr.params(3, &pdet[0], true) || !pr.params(4, &pdet[1], true)) {
    std::printf("bwd gate: setup failed for %s\n", str(s).c_str());
    return false;
  }
  for (int i : {0, 1, 2, 9, 10, 11, 12, 13, 14}) check::poison(pr.grads[i]->p, s.dt, pr.count(i % 3), nullptr);
  cudaStream_t side = nullptr;
  cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
  Status st = c.run(pc, nullptr);
  if (st.ok()) st = c.run(pdet[0], nullptr);
  if (st.ok() && cudaDeviceSynchronize() == cudaSuccess) st = c.run(pdet[1], side);
  if (side != nullptr) {
    cudaStreamSynchronize(side);
    cudaStreamDestroy(side);
  }
  const bool refs = detail::reference_backward(pref, nullptr).ok() && detail::reference_backward_lowp(plow, nullptr).ok();
  if (!st.ok() || !refs || cudaDeviceSynchronize() != cudaSuccess) {
    std::printf("FAIL %s %s: %s\n", c.name().c_str(), str(s).c_str(),
                !st.ok() ? st.message().c_str() : refs ? cudaGetErrorString(cudaGetLastError()) : "reference failed");
    return false;
  }
  bool pass = true;
  std::string msg;
  const char* names[] = {"dq", "dk", "dv"};
  for (int t = 0; t < 3; ++t) {
    const auto ref = to_host(pr.grads[3 + t]->p, pr.count(t), s.dt);
    const auto low = to_host(pr.grads[6 + t]->p, pr.count(t), s.dt);
    const double bound = 2 * max_err(low, ref) + check::default_atol(s.dt);
    const auto det = to_host(pr.grads[9 + t]->p, pr.count(t), s.dt);
    for (int set : {0, 3}) {
      const double e = max_err(set == 0 ? to_host(pr.grads[t]->p, pr.count(t), s.dt) : det, ref);
      if (!(e <= bound)) {
        pass = false;
        char b[96];
        std::snprintf(b, sizeof b, " %s%s %.3g > %.3g", names[t], set == 0 ? "" : " (deterministic)", e, bound);
        msg += b;
      }
    }
    // Bitwise: the raw 16-bit words of the two deterministic runs.
    if (bytes_differ(pr.grads[9 + t]->p, pr.grads[12 + t]->p, pr.count(t) * 2)) {
      pass = false;
      msg += std::string(" ") + names[t] + " differs between two deterministic runs";
    }
  }
  if (!pass) std::printf("FAIL %s %s:%s\n", c.name().c_str(), str(s).c_str(), msg.c_str());
  return pass;
}

}  // namespace

int run_bwd(const std::vector<int>& dims, const std::vector<std::string>& match) {
  int rejected = 0, dev = 0, smem_optin = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  std::printf("mode,d,causal,seqlen,candidate,smem,ms,tflops\n");
  for (int d : dims) {
    if (d != 64 && d != 128 && d != 256) continue;
    for (bool causal : {false, true}) {
      std::vector<const BwdCandidate*> pass;
      uint64_t seed = 100;
      const sm80::Sm80BwdOptions* first = nullptr;
      for (const BwdCandidate& c : sm80::bwd_candidates()) {
        if (c.options.head_dim != d) continue;
        if (first == nullptr) first = &c.options;
        const std::string name = c.name(), base = name.substr(0, name.rfind('_'));  // without the dtype
        if (!match.empty() && !(c.options == *first) && !name_matches(base, match)) continue;
        if (c.smem_bytes > smem_optin) {  // e.g. 192 KB tiles on an A100 (163 KB)
          if (!causal && c.bf16) std::printf("bwd: %s skipped: %d B of shared memory, the device allows %d\n",
                                             c.name().c_str(), c.smem_bytes, smem_optin);
          continue;
        }
        const DType dt = c.bf16 ? DType::kBFloat16 : DType::kFloat16;
        const Shape shapes[] = {{2, 300, 333, 4, 2, d, causal, dt},
                                   {1, 113, 1000, 4, 1, d, causal, dt},
                                   {1, 1000, 113, 2, 2, d, causal, dt},
                                   {1, 17, 17, 2, 2, d, causal, dt}};
        bool ok = true;
        for (const Shape& s : shapes) ok = gate(c, s, seed++) && ok;
        if (ok && c.bf16) pass.push_back(&c);
        rejected += !ok;
      }
      for (int seq : {2048, 4096, 8192, 16384}) {
        const Shape s{16384 / seq, seq, seq, 2048 / d, 2048 / d, d, causal, DType::kBFloat16};
        BwdProblem pr(s, 1, 7);
        detail::BwdParams p, pdet;
        if (!pr.ok || !pr.params(0, &p) || !pr.params(0, &pdet, true)) {
          std::printf("bwd: setup failed at seqlen %d\n", seq);
          continue;
        }
        double flops = 2.5 * 4.0 * s.b * s.hq * double(seq) * seq * d;
        if (causal) flops /= 2;
        for (bool det : {false, true}) {  // the "bwd-det" rows: deterministic mode
          const char* mode = det ? "bwd-det" : "bwd";
          const BwdCandidate* best = nullptr;
          double best_ms = 1e30;
          for (const BwdCandidate* c : pass) {
            Status st = Status::Ok();
            const double ms = time_ms([&] { st = c->run(det ? pdet : p, nullptr); });
            std::printf("%s,%d,%s,%d,%s,%d,%.4f,%.1f%s\n", mode, d, causal ? "causal" : "full", seq, c->name().c_str(),
                        c->smem_bytes, ms, flops / ms / 1e9, st.ok() ? "" : ",launch failed");
            if (st.ok() && ms < best_ms) best_ms = ms, best = c;
          }
          if (best != nullptr)
            std::printf("%s best: d%d %s S=%d %s %.4f ms %.1f TFLOPS\n", mode, d, causal ? "causal" : "full", seq,
                        best->name().c_str(), best_ms, flops / best_ms / 1e9);
        }
      }
    }
  }
  std::printf("bwd: %d candidate(s) rejected by the gate\n", rejected);
  return rejected == 0 ? 0 : 1;
}

}  // namespace flashattn::tune
