#include "bench_core.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace flashattn::bench {

int parse_options(int argc, const char* const* argv, Options* opt, std::string* out) {
  CLI::App app{"flashattn-bench: time one attention forward configuration"};
  app.add_option("-b,--batch", opt->batch, "batch size")->check(CLI::PositiveNumber);
  app.add_option("--heads", opt->heads, "query heads")->check(CLI::PositiveNumber);
  app.add_option("--heads-kv", opt->heads_kv, "key/value heads (default: heads)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("-s,--seqlen", opt->seqlen, "query sequence length")->check(CLI::PositiveNumber);
  app.add_option("--seqlen-k", opt->seqlen_k, "key sequence length (default: seqlen)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("-d,--hdim", opt->hdim, "head dimension")->check(CLI::IsMember({64, 96, 128, 192, 256}));
  app.add_option("--dtype", opt->dtype, "fp16 or bf16")->check(CLI::IsMember({"fp16", "bf16"}));
  app.add_flag("--causal", opt->causal, "causal mask (bottom-right aligned)");
  app.add_option("--backend", opt->backend, "auto, sm90, sm80 or reference")
      ->check(CLI::IsMember({"auto", "sm90", "sm80", "reference"}));
  app.add_option("--warmup", opt->warmup, "untimed iterations")->check(CLI::NonNegativeNumber);
  app.add_option("--iters", opt->iters, "timed iterations")->check(CLI::PositiveNumber);
  app.add_flag("--check", opt->check, "verify against the GPU reference before timing");
  app.add_option("--json", opt->json, "write the result as JSON to this file");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    *out = app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    *out = std::string(e.get_name()) + ": " + e.what();
    return e.get_exit_code() != 0 ? e.get_exit_code() : 2;
  }
  if (opt->heads % opt->kv_heads() != 0) {
    *out = "--heads-kv: " + std::to_string(opt->kv_heads()) + " must divide --heads " +
           std::to_string(opt->heads);
    return 2;
  }
  return -1;
}

DType dtype_of(const Options& o) { return o.dtype == "bf16" ? DType::kBFloat16 : DType::kFloat16; }

Backend backend_of(const Options& o) {
  if (o.backend == "sm90") return Backend::kSm90;
  if (o.backend == "sm80") return Backend::kSm80;
  if (o.backend == "reference") return Backend::kReference;
  return Backend::kAuto;
}

double forward_flops(const Options& o) {
  const double sq = o.seqlen, sk = o.kv_seqlen();
  double pairs = sq * sk;
  if (o.causal) {
    if (o.seqlen == o.kv_seqlen()) {
      pairs = sq * sk / 2;
    } else {  // row i sees min(sk, max(0, i + sk - sq + 1)) keys
      pairs = 0;
      for (int64_t i = 0; i < o.seqlen; ++i)
        pairs += double(std::clamp<int64_t>(i + o.kv_seqlen() - o.seqlen + 1, 0, o.kv_seqlen()));
    }
  }
  return 4.0 * o.batch * o.heads * pairs * o.hdim;
}

double forward_bytes(const Options& o, bool with_lse) {
  const double elem = 2.0;
  const double q = double(o.batch) * o.seqlen * o.heads * o.hdim;
  const double kv = double(o.batch) * o.kv_seqlen() * o.kv_heads() * o.hdim;
  double bytes = elem * (2 * q + 2 * kv);
  if (with_lse) bytes += 4.0 * o.batch * o.heads * o.seqlen;
  return bytes;
}

std::string format_config(const Options& o, const char* resolved_backend) {
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "Configuration: batch=%d heads=%d heads_kv=%d seqlen=%d seqlen_k=%d hdim=%d "
                "dtype=%s causal=%s backend=%s (%s) warmup=%d iters=%d\n",
                o.batch, o.heads, o.kv_heads(), o.seqlen, o.kv_seqlen(), o.hdim, o.dtype.c_str(),
                o.causal ? "yes" : "no", o.backend.c_str(), resolved_backend, o.warmup, o.iters);
  return buf;
}

std::string format_report(double total_seconds, int iters, double flops, double bytes) {
  const double per_step = total_seconds / iters;
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "Elapsed Time (total):      %.4f seconds\n"
                "Average Time Per Step:     %.3f ms\n"
                "Compute Performance:       %.2f TFLOPS\n"
                "Memory Throughput:         %.2f GB/s\n",
                total_seconds, per_step * 1e3, flops / per_step / 1e12, bytes / per_step / 1e9);
  return buf;
}

std::string to_json(const Options& o, const Result& r) {
  nlohmann::json j;
  j["config"] = {{"batch", o.batch},       {"heads", o.heads},   {"heads_kv", o.kv_heads()},
                 {"seqlen", o.seqlen},     {"seqlen_k", o.kv_seqlen()}, {"hdim", o.hdim},
                 {"dtype", o.dtype},       {"causal", o.causal}, {"backend", o.backend},
                 {"warmup", o.warmup},     {"iters", o.iters}};
  j["result"] = {{"backend", r.backend},   {"total_seconds", r.total_seconds},
                 {"avg_ms", r.avg_ms},     {"median_ms", r.median_ms},
                 {"tflops", r.tflops},     {"gbps", r.gbps}};
  if (r.checked)
    j["check"] = {{"passed", r.check_passed}, {"max_err", r.max_err}, {"bound", r.bound}};
  return j.dump(2);
}

}  // namespace flashattn::bench
