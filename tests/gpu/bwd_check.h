// The correctness rule for gradients, evaluated on the host: dq, dk, dv written by a backward
// under test against the CPU fp64 backward (ref::attention_backward_fp64), with the CPU
// low-precision backward fed the same out and lse as the yardstick:
//   max|ours - fp64| <= 2 max|lowp - fp64| + atol   per gradient tensor.
#pragma once

#include <string>
#include <vector>

#include "flashattn/flashattn.h"
#include "reference/cpu_reference.h"

namespace flashattn::testing {

struct BwdReport {
  bool pass = false;
  std::string message;  // every failed check with its numbers; empty on success
  int groups_checked = 0, groups_total = 0;
};

// Reads every tensor of `a` (device memory, any strides; the backward must have finished).
// Whole-tensor checks, always: no NaN in dq, dk, dv; dq exactly 0 on every row that sees no key.
// The rule is evaluated on (batch, kv head) groups, each one whole (its query heads' dq, its
// dk and dv over every row and key): all groups when their CPU cost fits `budget` (query-key
// pairs times head dim), else a deterministic spread of them (the first and last first), and at
// least one unless budget is 0.
BwdReport check_backward(const BackwardArgs& a, double budget = 3e9);

// Host copies of one call: contiguous (B, S, H, D) values, lse as (B, Hq, Sq).
struct BwdHostData {
  ref::Problem pr;
  DType dt = DType::kFloat16;
  std::vector<double> q, k, v, dout, out, lse, dq, dk, dv;
};
// check_backward once the tensors are on the host (also lets the checks themselves be tested
// without a device).
BwdReport check_backward_host(const BwdHostData& h, double budget = 3e9);
// The same over several problems at once (the sequences of a varlen call): each problem's
// whole-tensor checks, its groups picked under `budget`, and the rule once per gradient over
// every checked group of every problem.
BwdReport check_backward_hosts(const std::vector<const BwdHostData*>& problems, double budget = 3e9);

// A varlen call (a.cu_seqlens_q set; cu_q / cu_k the host copies of its offsets): each sequence
// cut from the packed tensors as a dense B = 1 problem (lse gathered from (Hq, total_q)), all
// checked together by check_backward_hosts. Rows outside every sequence are not looked at (the
// caller checks that they kept their contents).
BwdReport check_backward_varlen(const BackwardArgs& a, const std::vector<int>& cu_q, const std::vector<int>& cu_k,
                                double budget = 3e9);

}  // namespace flashattn::testing
