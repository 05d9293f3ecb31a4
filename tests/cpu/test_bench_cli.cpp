// flashattn-bench's option parsing, FLOP/byte counts and report format.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <regex>

#include "bench_core.h"

using namespace flashattn::bench;

namespace {
int parse(std::vector<const char*> args, Options* o, std::string* out) {
  args.insert(args.begin(), "flashattn-bench");
  return parse_options(int(args.size()), args.data(), o, out);
}
}  // namespace

TEST(BenchCli, DefaultsAreTheSeedShape) {
  Options o;
  std::string out;
  ASSERT_EQ(parse({}, &o, &out), -1) << out;
  EXPECT_EQ(o.batch, 1); EXPECT_EQ(o.heads, 64); EXPECT_EQ(o.seqlen, 1024); EXPECT_EQ(o.hdim, 128);
  EXPECT_EQ(o.dtype, "fp16"); EXPECT_FALSE(o.causal);
  EXPECT_DOUBLE_EQ(forward_flops(o), 4.0 * 64 * 1024 * 1024 * 128);  // 34.36 GFLOP, as the seed
}

TEST(BenchCli, ParsesEveryOption) {
  Options o;
  std::string out;
  ASSERT_EQ(parse({"--batch", "2", "--heads", "16", "--heads-kv", "4", "--seqlen", "300", "--seqlen-k",
                   "500", "--hdim", "256", "--dtype", "bf16", "--causal", "--backend", "sm80",
                   "--warmup", "3", "--iters", "7", "--check", "--json", "x.json"},
                  &o, &out), -1) << out;
  EXPECT_EQ(o.batch, 2); EXPECT_EQ(o.kv_heads(), 4); EXPECT_EQ(o.kv_seqlen(), 500);
  EXPECT_EQ(o.hdim, 256); EXPECT_EQ(o.dtype, "bf16"); EXPECT_TRUE(o.causal);
  EXPECT_EQ(backend_of(o), flashattn::Backend::kSm80); EXPECT_EQ(o.iters, 7);
  EXPECT_TRUE(o.check); EXPECT_EQ(o.json, "x.json");
}

TEST(BenchCli, RejectsBadValues) {
  std::string out;
  for (auto bad : std::vector<std::vector<const char*>>{{"--hdim", "100"}, {"--dtype", "fp8"},
                                                        {"--iters", "0"}, {"--backend", "cuda"},
                                                        {"--heads", "6", "--heads-kv", "4"},
                                                        {"--bogus"}}) {
    Options o;
    EXPECT_GT(parse(bad, &o, &out), 0) << bad[0];
    EXPECT_FALSE(out.empty());
  }
}

TEST(BenchCli, CausalFlopsCountVisiblePairs) {
  Options o;
  o.causal = true;
  EXPECT_DOUBLE_EQ(forward_flops(o), 2.0 * 64 * 1024 * 1024 * 128);
  o.seqlen = 2; o.seqlen_k = 4; o.heads = 1; o.hdim = 64;  // rows see 3 and 4 keys
  EXPECT_DOUBLE_EQ(forward_flops(o), 4.0 * 7 * 64);
}

TEST(BenchCli, ReportHasTheSeedFormat) {
  const std::string r = format_report(0.0097, 100, 34.36e9, 64e6);
  EXPECT_TRUE(std::regex_search(r, std::regex(R"(Elapsed Time \(total\):\s+0\.0097 seconds)"))) << r;
  EXPECT_TRUE(std::regex_search(r, std::regex(R"(Average Time Per Step:\s+0\.097 ms)"))) << r;
  EXPECT_TRUE(std::regex_search(r, std::regex(R"(Compute Performance:\s+354\.23 TFLOPS)"))) << r;
  EXPECT_TRUE(std::regex_search(r, std::regex(R"(Memory Throughput:\s+659\.79 GB/s)"))) << r;
}

TEST(BenchCli, JsonHasConfigAndResult) {
  Options o;
  Result r;
  r.backend = "sm90"; r.tflops = 500; r.checked = true; r.check_passed = true;
  const auto j = nlohmann::json::parse(to_json(o, r));
  EXPECT_EQ(j["config"]["hdim"], 128);
  EXPECT_EQ(j["result"]["backend"], "sm90");
  EXPECT_EQ(j["check"]["passed"], true);
}
