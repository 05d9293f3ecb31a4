// flashattn-sm80-tune: correctness sweep, ablation timing, auto-tuning and a timing grid for the
// sm80 kernel family. Modes (any combination, run in this order):
//   --check      every candidate and library (and ablation) kernel against the GPU reference on
//                awkward shapes, and the public entry point; the padded library kernels also on
//                head dims below their kernel head dim (40, 72, 136, 200, and q/k 192 with v 128)
//   --ablation   times the ablation variants (head dims 128 and 192, fp16)
//   --tune FILE  times every correct candidate per (dtype, head dim, causal) at each seqlen of the
//                standard grid and writes the winners as tuned_table.inc (the whole file), one row
//                per run of seqlen buckets with the same winner, for this device's sm
//   --grid       times sm80_forward (tuned dispatch) on the standard grid, CSV to stdout
//   --bwd        the backward's candidates (bwd_candidates.cu): a correctness gate against the GPU
//                reference backward (deterministic mode too), then times at S = 2k..16k, plain and
//                deterministic (bwd_tune.h); head dims 64, 128, 256
//   --dims LIST  (e.g. 192 or 128,192) limits --check, --tune, --grid and --bwd to these kernel head dims
//                (--check: the (d, d_v) pairs they serve); --tune then keeps the compiled-in
//                table's rows of every other head dim and device, so FILE is still the whole table
//   --match LIST candidates by name without the dtype (a comma list of substrings, "x$": ends with
//                x), plus each head dim's first: --check, --tune (whose table then picks among
//                them only) and --bwd on a few candidates
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "api/backends.h"
#include "api/validate.h"
#include "reference/device_check.h"
#include "sm80/registry.h"
#include "sm80/tuned_table.h"
#include "tune/bwd_tune.h"
#include "tune/problem.h"
#include "tune/tune_util.h"

namespace flashattn::sm80 {
std::span<const KernelEntry> ablation_kernels();
std::span<const KernelEntry> candidate_kernels_d64();
std::span<const KernelEntry> candidate_kernels_d128();
std::span<const KernelEntry> candidate_kernels_d192();
std::span<const KernelEntry> candidate_kernels_d256();
}

namespace {

using namespace flashattn;
using flashattn::detail::ElemType;
using flashattn::sm80::KernelEntry;
using tune::dtype_name;
using tune::Problem;
using tune::Shape;
using tune::str;

// The head dims every mode walks: the family's kernel head dims (sm80/tuned_table.h), or those
// --dims names.
std::vector<int> g_dims = {64, 128, 192, 256};
bool g_dims_given = false;
std::vector<std::string> g_match;  // --match: candidates by name (forward: candidates(), backward: tune::run_bwd)
bool in_dims(int d) { return std::find(g_dims.begin(), g_dims.end(), d) != g_dims.end(); }

ElemType elem(DType d) { return d == DType::kBFloat16 ? ElemType::kBFloat16 : ElemType::kFloat16; }

// The tuning candidates (tools/tune/candidate_kernels_d*.cu), compiled into this executable.
// The forward's candidates; with --match only those it names and each head dim's first (its
// listed reference, both dtypes).
std::vector<const KernelEntry*> candidates() {
  std::vector<const KernelEntry*> v;
  for (auto s : {sm80::candidate_kernels_d64(), sm80::candidate_kernels_d128(), sm80::candidate_kernels_d192(),
                 sm80::candidate_kernels_d256()})
    for (const KernelEntry& e : s) {
      const std::string name = e.name(), base = name.substr(0, name.rfind('_'));  // without the dtype
      if (g_match.empty() || e.options == s.front().options || tune::name_matches(base, g_match)) v.push_back(&e);
    }
  return v;
}

// The candidates, then the library's kernels that are not among them (a hand-edited table may
// name one; every padded twin, since no candidate is padded), then with_ablation the ablation
// variants.
std::vector<const KernelEntry*> check_kernels(bool with_ablation) {
  std::vector<const KernelEntry*> v = candidates();
  const std::size_t n_cand = v.size();
  for (const KernelEntry& e : sm80::library_kernels()) {
    const bool known = std::any_of(v.begin(), v.begin() + n_cand, [&](const KernelEntry* c) {
      return c->options == e.options && c->dtype == e.dtype && c->padded == e.padded;
    });
    if (!known) v.push_back(&e);
  }
  if (with_ablation)
    for (const KernelEntry& e : sm80::ablation_kernels()) v.push_back(&e);
  return v;
}

double flops(const Shape& s) {
  double f = 4.0 * s.b * s.hq * double(s.sq) * s.sk * s.d;
  return (s.causal && s.sq == s.sk) ? f / 2 : f;
}

using tune::time_ms;

std::vector<Shape> check_shapes(int d, int dv, DType dt) {
  std::vector<Shape> v;
  for (bool c : {false, true}) {
    v.push_back({1, 1, 1, 2, 2, d, c, dt, dv});
    v.push_back({2, 17, 17, 4, 2, d, c, dt, dv});
    v.push_back({1, 113, 113, 3, 1, d, c, dt, dv});
    v.push_back({2, 1000, 1000, 2, 2, d, c, dt, dv});
    v.push_back({1, 113, 1000, 4, 4, d, c, dt, dv});   // sq < sk
    v.push_back({1, 1000, 113, 2, 1, d, c, dt, dv});   // sq > sk: causal rows fully masked
    v.push_back({1, 17, 4097, 2, 2, d, c, dt, dv});
    v.push_back({1, 4097, 4097, 1, 1, d, c, dt, dv});
    v.push_back({3, 256, 256, 6, 2, d, c, dt, dv});    // full tiles, GQA 3
  }
  return v;
}

// Whether entry e serves calls of head dims (d, dv): an unpadded kernel only its own head dim,
// a padded one any pair whose kernel head dim is its own (sm80::kernel_head_dim).
bool serves(const KernelEntry& e, int d, int dv) {
  if (e.padded) return sm80::kernel_head_dim(d, dv) == e.options.head_dim;
  return d == e.options.head_dim && dv == e.options.head_dim;
}

// The (d, d_v) pairs --check runs: every kernel head dim, then head dims the padded kernels
// serve (one below each kernel head dim, and v narrower than q/k).
constexpr std::pair<int, int> kCheckDims[] = {{64, 64}, {128, 128}, {192, 192}, {256, 256}, {40, 40},
                                              {72, 72},  {136, 136}, {200, 200}, {192, 128}};

int run_check(bool with_ablation) {
  int fails = 0, runs = 0;
  uint64_t seed = 1;
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    for (auto [d, dv] : kCheckDims) {
      if (!in_dims(sm80::kernel_head_dim(d, dv))) continue;
      for (const Shape& s : check_shapes(d, dv, dt)) {
        Problem pr(s, seed++);
        if (!pr.ok) { std::printf("FAIL setup %s\n", str(s).c_str()); ++fails; continue; }
        for (const KernelEntry* e : check_kernels(with_ablation)) {
          if (!serves(*e, d, dv) || e->dtype != elem(dt)) continue;
          if (e->launch_for(sm80::mask_kind(s.causal)) == nullptr) continue;
          pr.poison();
          Status st = sm80::launch_entry(*e, pr.p, nullptr);
          check::Report r;
          if (st.ok()) r = check::check_against_reference(pr.args, nullptr);
          ++runs;
          const bool pass = st.ok() && r.pass;
          fails += !pass;
          if (!pass || s.sq == 4097)
            std::printf("%s %-34s %-50s out_err %.3g (bound %.3g) lse_err %.3g %s\n", pass ? "ok  " : "FAIL",
                        e->name().c_str(), str(s).c_str(), r.out_err, r.out_bound, r.lse_err,
                        st.ok() ? r.message.c_str() : st.message().c_str());
        }
        // The public entry point (tuned dispatch) on the same shape.
        pr.poison();
        Status st = forward(pr.args, nullptr);
        check::Report r;
        if (st.ok()) r = check::check_against_reference(pr.args, nullptr);
        ++runs;
        if (!st.ok() || !r.pass) {
          ++fails;
          std::printf("FAIL forward(kSm80) %s: %s\n", str(s).c_str(), st.ok() ? r.message.c_str() : st.message().c_str());
        }
      }
    }
  }
  const cudaError_t e = cudaDeviceSynchronize();
  std::printf("check: %d runs, %d failures, cuda: %s\n", runs, fails, cudaGetErrorString(e));
  return fails == 0 && e == cudaSuccess ? 0 : 1;
}

int run_ablation() {
  std::printf("ablation (H=2048/D, fp16, median ms / TFLOPS)\n");
  for (bool causal : {false, true}) {
    for (int seq : {1024, 4096, 16384}) {
      // One problem per head dim of the variants (128, and 192 for the loader-mapping group).
      std::map<int, std::unique_ptr<Problem>> pr;
      for (const auto& e : sm80::ablation_kernels()) {
        const int d = e.options.head_dim;
        const Shape s{16384 / seq, seq, seq, 2048 / d, 2048 / d, d, causal, DType::kFloat16};
        auto& p = pr[d];
        if (!p) p = std::make_unique<Problem>(s, 7);
        Status st = Status::Ok();
        const double ms = time_ms([&] { st = sm80::launch_entry(e, p->p, nullptr); });
        std::printf("ablation,%s,%d,%s,%.4f,%.1f,%s\n", causal ? "causal" : "full", seq, e.name().c_str(), ms,
                    flops(s) / ms / 1e9, st.ok() ? "" : st.message().c_str());
      }
    }
  }
  return 0;
}

// The tuning seqlens; each is the measured point of one bucket of the table: max_seqlen = S for
// all but the last, whose bucket is unbounded (max_seqlen 0).
constexpr int kTuneSeqlens[] = {512, 1024, 2048, 4096, 8192, 16384};
constexpr int kNumTuneSeqlens = int(std::size(kTuneSeqlens));

// Winners of --tune in this process, keyed by (dtype, d, causal, seqlen): --grid then times
// exactly the kernels the new table will select at the grid's seqlens (which are the tuning
// seqlens), before it is checked in and compiled.
std::map<std::tuple<int, int, bool, int>, const KernelEntry*> g_winners;


// Row r as tuned_table.inc spells it: the FLASHATTN_SM80_TUNED(...) call, without its comment.
std::string tuned_row_call(const sm80::TunedRow& r) {
  auto b = [](bool v) { return v ? "true" : "false"; };
  char buf[160];
  std::snprintf(buf, sizeof buf, "FLASHATTN_SM80_TUNED(%d, %s, %d, %s, %d, %d, %d, %d, %d, %s, %s, %s)", r.sm,
                r.dtype == ElemType::kBFloat16 ? "kBFloat16" : "kFloat16", r.head_dim, b(r.causal), r.max_seqlen,
                r.block_m, r.block_n, r.warps, r.frag_slice, b(r.q_in_regs), b(r.rf_double_buffer), b(r.o_col_split));
  return buf;
}

int run_tune(const std::string& path) {
  int dev = 0, major = 0, minor = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, dev);
  const int sm = major * 10 + minor;
  std::ofstream out(path);
  // The whole file, so the output can replace src/sm80/tuned_table.inc as it is.
  out << "// Tuned sm80-family configurations, written by `flashattn-sm80-tune --tune FILE` (tools/tune) and\n"
         "// read by sm80/tuned_table.h. Row: FLASHATTN_SM80_TUNED(sm (major*10+minor), dtype, head_dim, causal,\n"
         "//   max_seqlen, block_m, block_n, warps, frag_slice, q_in_regs, rf_double_buffer, o_col_split)\n"
         "// A row applies when max(Sq, Sk) <= max_seqlen (0 = unbounded); for a call, dispatch takes the\n"
         "// matching row with the smallest such bound (sequence-length buckets; see sm80/tuned_select.h).\n"
         "// The library instantiates the kernel of every row (and the head-dim defaults; sm80/tuned_table.h),\n"
         "// so a row may name any valid configuration; rebuild after replacing this file. Devices not listed\n"
         "// use the defaults in sm80/tuned_table.h.\n"
      << "// Tuned by flashattn-sm80-tune on " << prop.name << " (sm " << sm
      << "): per (dtype, D, causal), the fastest correct candidate (median of 10) at each seqlen\n"
         "// {512, 1024, ..., 16384}, Sq = Sk, B = 16384 / S, H = 2048 / D. The winner at S serves max(Sq, Sk)\n"
         "// in (previous S, S] (512 also serves everything shorter; 16384 everything above 8192, as\n"
         "// max_seqlen 0); adjacent buckets with the same winner share one row.\n";
  std::printf("tune,dtype,d,causal,seqlen,kernel,ms\n");
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    for (int d : g_dims) {
      for (bool causal : {false, true}) {
        // Correctness gate on an awkward shape first.
        std::vector<const KernelEntry*> cands;
        for (const KernelEntry* e : candidates()) {
          if (e->options.head_dim != d || e->dtype != elem(dt)) continue;
          if (e->launch_for(sm80::mask_kind(causal)) == nullptr) continue;
          Problem small({2, 300, 333, 4, 2, d, causal, dt}, 11);
          small.poison();
          Status st = sm80::launch_entry(*e, small.p, nullptr);
          if (!st.ok() || !check::check_against_reference(small.args, nullptr).pass) {
            std::printf("tune: %s rejected (%s)\n", e->name().c_str(), st.ok() ? "wrong result" : st.message().c_str());
            continue;
          }
          cands.push_back(e);
        }
        if (cands.empty()) continue;
        // Every candidate timed on the same inputs per seqlen; a failed launch never wins.
        const KernelEntry* win[kNumTuneSeqlens] = {};
        double win_ms[kNumTuneSeqlens] = {};
        for (int i = 0; i < kNumTuneSeqlens; ++i) {
          const int seq = kTuneSeqlens[i];
          Problem pr({16384 / seq, seq, seq, 2048 / d, 2048 / d, d, causal, dt}, 5);
          if (!pr.ok) { std::printf("tune: setup failed at seqlen %d\n", seq); continue; }
          win_ms[i] = 1e30;
          for (const KernelEntry* e : cands) {
            Status st = Status::Ok();
            const double ms = time_ms([&] { st = sm80::launch_entry(*e, pr.p, nullptr); });
            std::printf("tune,%s,%d,%s,%d,%s,%.4f%s\n", dtype_name(dt), d, causal ? "causal" : "full", seq,
                        e->name().c_str(), ms, st.ok() ? "" : ",launch failed");
            if (st.ok() && ms < win_ms[i]) { win_ms[i] = ms; win[i] = e; }
          }
          if (win[i] != nullptr) g_winners[{int(dt), d, causal, seq}] = win[i];
        }
        // One row per run of adjacent buckets with the same winner; the run's bound is its last
        // bucket's (0 for the last bucket). A seqlen with no winner ends a run and emits nothing,
        // so its bucket falls through to the next wider row.
        for (int i = 0; i < kNumTuneSeqlens; ++i) {
          const KernelEntry* best = win[i];
          if (best == nullptr) continue;
          int j = i;
          while (j + 1 < kNumTuneSeqlens && win[j + 1] == best) ++j;
          const int max_seqlen = j == kNumTuneSeqlens - 1 ? 0 : kTuneSeqlens[j];
          std::string times;
          for (int k = i; k <= j; ++k) {
            char t[48];
            std::snprintf(t, sizeof t, "%s%d: %.3f", k == i ? "" : ", ", kTuneSeqlens[k], win_ms[k]);
            times += t;
          }
          const sm80::Sm80FwdOptions& o = best->options;
          const sm80::TunedRow row{sm, elem(dt), d, causal, max_seqlen, o.block_m, o.block_n, o.warps,
                                   o.frag_slice, o.q_in_regs, o.rf_double_buffer, o.o_col_split};
          const std::string line = tuned_row_call(row) + "  // " + best->name() + " ms at S " + times + "\n";
          out << line;
          std::printf("best: %s", line.c_str());
          i = j;
        }
      }
    }
  }
  // --dims: the compiled-in table's rows this run did not re-tune (other head dims, or other
  // devices), unchanged.
  if (g_dims_given) {
    for (const sm80::TunedRow& r : sm80::kTunedRows) {
      if (r.sm == sm && in_dims(r.head_dim)) continue;
      out << tuned_row_call(r) << "  // kept from the previous table\n";
    }
  }
  return out.good() ? 0 : 1;
}

int run_grid() {
  std::printf("grid,dtype,d,causal,seqlen,batch,heads,kernel,ms,tflops\n");
  int dev = 0, major = 0, minor = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  for (DType dt : {DType::kBFloat16, DType::kFloat16}) {
    for (int d : g_dims) {
      for (bool causal : {false, true}) {
        for (int seq : kTuneSeqlens) {
          const Shape s{16384 / seq, seq, seq, 2048 / d, 2048 / d, d, causal, dt};
          Problem pr(s, 3);
          const auto w = g_winners.find({int(dt), d, causal, seq});
          const KernelEntry* e = w != g_winners.end() ? w->second : detail::sm80_select(pr.p, major * 10 + minor);
          Status st = Status::Ok();
          const double ms = time_ms([&] { st = sm80::launch_entry(*e, pr.p, nullptr); }, 5, 20);
          std::printf("grid,%s,%d,%s,%d,%d,%d,%s,%.4f,%.1f%s\n", dtype_name(dt), d,
                      causal ? "causal" : "full", seq, s.b, s.hq, e ? e->name().c_str() : "?", ms,
                      flops(s) / ms / 1e9, st.ok() ? "" : st.message().c_str());
        }
      }
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bool check = false, ablation = false, grid = false, abl_check = false, bwd = false;
  std::string tune;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--check") check = true;
    else if (a == "--check-ablation") check = abl_check = true;
    else if (a == "--ablation") ablation = true;
    else if (a == "--grid") grid = true;
    else if (a == "--bwd") bwd = true;
    else if (a == "--dims" && i + 1 < argc) {
      g_dims.clear();
      g_dims_given = true;
      const std::string list = argv[++i];
      for (std::size_t pos = 0; pos <= list.size();) {
        const std::size_t comma = std::min(list.find(',', pos), list.size());
        const int d = std::atoi(list.substr(pos, comma - pos).c_str());
        if (d != 64 && d != 128 && d != 192 && d != 256) {
          std::fprintf(stderr, "--dims: %s is not a kernel head dim (64, 128, 192, 256)\n", list.c_str());
          return 2;
        }
        g_dims.push_back(d);
        pos = comma + 1;
      }
    }
    else if (a == "--tune" && i + 1 < argc) tune = argv[++i];
    else if (a == "--match" && i + 1 < argc) {
      const std::string list = argv[++i];
      for (std::size_t pos = 0; pos <= list.size();) {
        const std::size_t comma = std::min(list.find(',', pos), list.size());
        if (comma > pos) g_match.push_back(list.substr(pos, comma - pos));
        pos = comma + 1;
      }
    }
    else {
      std::fprintf(stderr, "usage: %s [--check|--check-ablation] [--ablation] [--tune FILE] [--grid] [--bwd] [--dims LIST] [--match LIST]\n", argv[0]);
      return 2;
    }
  }
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::fprintf(stderr, "flashattn-sm80-tune: no CUDA device\n");
    return 3;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  int drv = 0;
  cudaDriverGetVersion(&drv);
  std::printf("device: %s (sm %d%d), %d SMs, driver API %d\n", prop.name, prop.major, prop.minor,
              prop.multiProcessorCount, drv);
  int rc = 0;
  if (check) rc |= run_check(abl_check);
  if (ablation) rc |= run_ablation();
  if (!tune.empty()) rc |= run_tune(tune);
  if (grid) rc |= run_grid();
  if (bwd) rc |= tune::run_bwd(g_dims, g_match);
  std::fflush(stdout);
  return rc;
}
