// Host-only pieces of flashattn-bench (options, FLOP/byte counts, report), kept apart from
// the GPU driver so CPU tests can check them.
#pragma once

#include <string>
#include <vector>

#include "flashattn/flashattn.h"

namespace flashattn::bench {

struct Options {
  int batch = 1;
  int heads = 64;
  int heads_kv = 0;  // 0: same as heads
  int seqlen = 1024;
  int seqlen_k = 0;  // 0: same as seqlen
  int hdim = 128;
  std::string dtype = "fp16";
  bool causal = false;
  std::string backend = "auto";
  int warmup = 10;
  int iters = 100;
  bool check = false;
  std::string json;

  int kv_heads() const { return heads_kv > 0 ? heads_kv : heads; }
  int kv_seqlen() const { return seqlen_k > 0 ? seqlen_k : seqlen; }
};

// Parses argv. Returns -1 to go on, else an exit code (0 after --help, non-zero on error);
// the message for the user goes to *out.
int parse_options(int argc, const char* const* argv, Options* opt, std::string* out);

DType dtype_of(const Options& o);
Backend backend_of(const Options& o);

// docs/ARCHITECTURE.md: FLOPs = 4*B*Hq*Sq*Sk*D, halved for causal with Sq == Sk; for causal with
// Sq != Sk the visible (bottom-right) part of the score matrix is counted exactly.
double forward_flops(const Options& o);
// Minimum HBM traffic: read Q, K, V once, write O (and lse when requested).
double forward_bytes(const Options& o, bool with_lse);

std::string format_config(const Options& o, const char* resolved_backend);
// The seeds' report: elapsed total, average per step, TFLOPS, GB/s.
std::string format_report(double total_seconds, int iters, double flops, double bytes);

struct Result {
  std::string backend;
  double total_seconds = 0, avg_ms = 0, median_ms = 0, tflops = 0, gbps = 0;
  bool checked = false, check_passed = false;
  double max_err = 0, bound = 0;
};
std::string to_json(const Options& o, const Result& r);

}  // namespace flashattn::bench
