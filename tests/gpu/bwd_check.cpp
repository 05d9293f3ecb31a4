#include "bwd_check.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "gpu_util.h"
#include "reference/cpu_reference.h"
#include "reference/device_check.h"

namespace flashattn::testing {
namespace {

using Vec = std::vector<double>;

int64_t key_end(const ref::Problem& pr, int64_t i) {
  return pr.causal ? std::clamp<int64_t>(i + pr.sk - pr.sq + 1, 0, pr.sk) : pr.sk;
}

// Rows [s0, s1) of heads [h0, h0 + nh) of batch b of a contiguous (B, S, H, D) host tensor,
// as a contiguous (1, s1 - s0, nh, D) one.
Vec slice(const Vec& t, int S, int H, int D, int b, int h0, int nh, int s0, int s1) {
  Vec r(size_t(s1 - s0) * nh * D);
  for (int s = s0; s < s1; ++s)
    for (int h = 0; h < nh; ++h) {
      const double* src = t.data() + ((int64_t(b) * S + s) * H + h0 + h) * D;
      std::copy(src, src + D, r.data() + (int64_t(s - s0) * nh + h) * D);
    }
  return r;
}

// Runs the tasks on up to 16 threads (the fp64 row blocks and the lowp groups are independent).
void run_parallel(const std::vector<std::function<void()>>& tasks) {
  const unsigned n = std::clamp(std::thread::hardware_concurrency(), 1u, 16u);
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t t = next++; t < tasks.size(); t = next++) tasks[t]();
  };
  std::vector<std::thread> pool;
  for (unsigned i = 1; i < n; ++i) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
}

// One (batch, kv head) group's references, laid out like slice()'s output: dq as (Sq, ratio, D),
// dk and dv as (Sk, 1, D).
struct Group {
  const BwdHostData* h = nullptr;  // the problem (one of several for a varlen call)
  int b = 0, hk = 0;
  Vec dq64, dk64, dv64, dq_low, dk_low, dv_low;
  std::mutex mu;  // fp64 row blocks add their dk/dv partials under it
};

// Appends the fp64 tasks of group g: blocks of rows, each a sub-problem whose causal alignment
// keeps every row's visible keys (keys [0, sk') with sk' = r1 + sk - sq cover all its rows see).
// Summing the blocks' dk/dv partials in fp64 changes nothing that matters.
void fp64_tasks(const BwdHostData& h, Group* g, std::vector<std::function<void()>>* tasks) {
  const ref::Problem& pr = h.pr;
  const int ratio = pr.hq / pr.hkv;
  g->dq64.assign(size_t(pr.sq) * ratio * pr.d, 0.0);
  g->dk64.assign(size_t(pr.sk) * pr.d, 0.0);
  g->dv64.assign(size_t(pr.sk) * pr.value_dim(), 0.0);
  const int block = std::max(64, pr.sq / 32 + 1);
  for (int r0 = 0; r0 < pr.sq; r0 += block) {
    const int r1 = std::min(pr.sq, r0 + block);
    const int sk_sub = pr.causal ? int(std::clamp<int64_t>(int64_t(r1) + pr.sk - pr.sq, 0, pr.sk)) : pr.sk;
    if (sk_sub == 0) continue;  // no row of the block sees a key: dq stays 0
    tasks->push_back([&h, g, r0, r1, sk_sub, ratio] {
      ref::Problem sub = h.pr;
      sub.b = 1; sub.sq = r1 - r0; sub.sk = sk_sub; sub.hq = ratio; sub.hkv = 1;
      const int D = sub.d, Dv = sub.value_dim();
      const Vec q = slice(h.q, h.pr.sq, h.pr.hq, D, g->b, g->hk * ratio, ratio, r0, r1);
      const Vec dout = slice(h.dout, h.pr.sq, h.pr.hq, Dv, g->b, g->hk * ratio, ratio, r0, r1);
      const Vec k = slice(h.k, h.pr.sk, h.pr.hkv, D, g->b, g->hk, 1, 0, sk_sub);
      const Vec v = slice(h.v, h.pr.sk, h.pr.hkv, Dv, g->b, g->hk, 1, 0, sk_sub);
      Vec dq(q.size()), dk(k.size()), dv(v.size());
      ref::attention_backward_fp64(sub, q.data(), k.data(), v.data(), dout.data(), dq.data(),
                                   dk.data(), dv.data());
      std::copy(dq.begin(), dq.end(), g->dq64.begin() + int64_t(r0) * ratio * D);
      std::lock_guard<std::mutex> lock(g->mu);
      for (size_t e = 0; e < dk.size(); ++e) g->dk64[e] += dk[e];
      for (size_t e = 0; e < dv.size(); ++e) g->dv64[e] += dv[e];  // Dv may differ from D
    });
  }
}

// The lowp backward rounds dk/dv once, after the whole group: it runs as one task.
void lowp_task(const BwdHostData& h, Group* g, std::vector<std::function<void()>>* tasks) {
  tasks->push_back([&h, g] {
    const ref::Problem& pr = h.pr;
    const int ratio = pr.hq / pr.hkv, D = pr.d, Dv = pr.value_dim();
    ref::Problem sub = pr;
    sub.b = 1; sub.hq = ratio; sub.hkv = 1;
    const int h0 = g->hk * ratio;
    const Vec q = slice(h.q, pr.sq, pr.hq, D, g->b, h0, ratio, 0, pr.sq);
    const Vec dout = slice(h.dout, pr.sq, pr.hq, Dv, g->b, h0, ratio, 0, pr.sq);
    const Vec out = slice(h.out, pr.sq, pr.hq, Dv, g->b, h0, ratio, 0, pr.sq);
    const Vec k = slice(h.k, pr.sk, pr.hkv, D, g->b, g->hk, 1, 0, pr.sk);
    const Vec v = slice(h.v, pr.sk, pr.hkv, Dv, g->b, g->hk, 1, 0, pr.sk);
    // lse is (B, Hq, Sq): the group's heads are adjacent.
    const auto l0 = h.lse.begin() + (int64_t(g->b) * pr.hq + h0) * pr.sq;
    const Vec lse(l0, l0 + int64_t(ratio) * pr.sq);
    g->dq_low.resize(q.size());
    g->dk_low.resize(k.size());
    g->dv_low.resize(v.size());
    ref::attention_backward_lowp(sub, h.dt, q.data(), k.data(), v.data(), out.data(), lse.data(),
                                 dout.data(), g->dq_low.data(), g->dk_low.data(), g->dv_low.data());
  });
}

// Groups to check: all when they fit the budget, else 0, G-1, 1, G-2, ... as far as it goes.
std::vector<int> pick_groups(const ref::Problem& pr, double budget) {
  const int total = pr.b * pr.hkv;
  double pairs = 0;
  for (int i = 0; i < pr.sq; ++i) pairs += double(key_end(pr, i));
  const double cost = std::max(1.0, pairs * (pr.hq / pr.hkv) * (pr.d + pr.value_dim()) / 2);
  const int fit = budget <= 0 ? 0 : std::clamp(int(budget / cost), 1, total);
  std::vector<int> picked;
  for (int lo = 0, hi = total - 1; int(picked.size()) < fit; ++lo, --hi) {
    picked.push_back(lo);
    if (hi != lo && int(picked.size()) < fit) picked.push_back(hi);
  }
  return picked;
}

std::string num(double x) { return std::to_string(x); }

}  // namespace

BwdReport check_backward(const BackwardArgs& a, double budget) {
  BwdHostData h;
  h.dt = a.q.dtype;
  ref::Problem& pr = h.pr;
  pr.b = int(a.q.shape[0]); pr.sq = int(a.q.shape[1]); pr.hq = int(a.q.shape[2]);
  pr.d = int(a.q.shape[3]); pr.sk = int(a.k.shape[1]); pr.hkv = int(a.k.shape[2]);
  pr.dv = int(a.v.shape[3]);
  pr.causal = a.causal;
  pr.scale = a.softmax_scale;
  h.q = to_host(a.q); h.k = to_host(a.k); h.v = to_host(a.v);
  h.dout = to_host(a.dout); h.out = to_host(a.out);
  h.dq = to_host(a.dq); h.dk = to_host(a.dk); h.dv = to_host(a.dv);
  std::vector<float> lse(size_t(pr.b) * pr.hq * pr.sq);
  EXPECT_EQ(cudaMemcpy(lse.data(), a.lse, lse.size() * sizeof(float), cudaMemcpyDeviceToHost),
            cudaSuccess);
  h.lse.assign(lse.begin(), lse.end());
  return check_backward_host(h, budget);
}

BwdReport check_backward_varlen(const BackwardArgs& a, const std::vector<int>& cu_q, const std::vector<int>& cu_k,
                                 double budget) {
  const int hq = int(a.q.shape[2]), hkv = int(a.k.shape[2]), d = int(a.q.shape[3]), dv = int(a.v.shape[3]);
  const int total_q = int(a.q.shape[1]);
  const Vec q = to_host(a.q), k = to_host(a.k), v = to_host(a.v), dout = to_host(a.dout), out = to_host(a.out),
            dq = to_host(a.dq), dk = to_host(a.dk), dv_ = to_host(a.dv);
  std::vector<float> lse(size_t(hq) * total_q);
  EXPECT_EQ(cudaMemcpy(lse.data(), a.lse, lse.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  const int n = int(cu_q.size()) - 1;
  std::vector<BwdHostData> seqs(n);
  // Rows [r0, r0 + len) of a packed (total, H, width) host tensor.
  auto rows = [](const Vec& t, int r0, int len, int width) {
    return Vec(t.begin() + int64_t(r0) * width, t.begin() + int64_t(r0 + len) * width);
  };
  for (int i = 0; i < n; ++i) {
    BwdHostData& h = seqs[i];
    const int q0 = cu_q[i], k0 = cu_k[i], sq = cu_q[i + 1] - q0, sk = cu_k[i + 1] - k0;
    h.dt = a.q.dtype;
    h.pr.b = 1; h.pr.sq = sq; h.pr.sk = sk; h.pr.hq = hq; h.pr.hkv = hkv; h.pr.d = d; h.pr.dv = dv;
    h.pr.causal = a.causal;
    h.pr.scale = a.softmax_scale;
    h.q = rows(q, q0, sq, hq * d); h.dout = rows(dout, q0, sq, hq * dv); h.out = rows(out, q0, sq, hq * dv);
    h.dq = rows(dq, q0, sq, hq * d);
    h.k = rows(k, k0, sk, hkv * d); h.v = rows(v, k0, sk, hkv * dv);
    h.dk = rows(dk, k0, sk, hkv * d); h.dv = rows(dv_, k0, sk, hkv * dv);
    h.lse.resize(size_t(hq) * sq);  // (1, Hq, Sq) from (Hq, total_q)
    for (int hh = 0; hh < hq; ++hh)
      for (int r = 0; r < sq; ++r) h.lse[size_t(hh) * sq + r] = lse[size_t(hh) * total_q + q0 + r];
  }
  std::vector<const BwdHostData*> ptrs;
  for (const BwdHostData& h : seqs) ptrs.push_back(&h);
  return check_backward_hosts(ptrs, budget);
}

BwdReport check_backward_host(const BwdHostData& h, double budget) { return check_backward_hosts({&h}, budget); }

BwdReport check_backward_hosts(const std::vector<const BwdHostData*>& problems, double budget) {
  BwdReport rep;
  const char* names[] = {"dq", "dk", "dv"};
  int64_t nans[3] = {0, 0, 0}, nonzero = 0;
  for (const BwdHostData* hp : problems) {
    const BwdHostData& h = *hp;
    const ref::Problem& pr = h.pr;
    const Vec* grads[] = {&h.dq, &h.dk, &h.dv};
    for (int t = 0; t < 3; ++t)
      nans[t] += std::count_if(grads[t]->begin(), grads[t]->end(), [](double x) { return std::isnan(x); });
    for (int b = 0; b < pr.b; ++b)
      for (int i = 0; i < pr.sq && key_end(pr, i) == 0; ++i)  // such rows are a prefix
        for (int hq = 0; hq < pr.hq; ++hq)
          for (int e = 0; e < pr.d; ++e)
            nonzero += h.dq[((int64_t(b) * pr.sq + i) * pr.hq + hq) * pr.d + e] != 0.0;
  }
  for (int t = 0; t < 3; ++t)
    if (nans[t] > 0) rep.message += std::string(names[t]) + ": " + std::to_string(nans[t]) + " NaN; ";
  if (nonzero > 0)
    rep.message += "dq: " + std::to_string(nonzero) + " nonzero elements on rows without keys; ";

  // Groups of every problem (the budget applies to each), all in one pool.
  std::vector<std::pair<const BwdHostData*, int>> picked;
  for (const BwdHostData* hp : problems) {
    for (int g : pick_groups(hp->pr, budget)) picked.push_back({hp, g});
    rep.groups_total += hp->pr.b * hp->pr.hkv;
  }
  rep.groups_checked = int(picked.size());
  std::vector<Group> groups(picked.size());
  std::vector<std::function<void()>> tasks;
  for (size_t n = 0; n < picked.size(); ++n) {  // the long lowp tasks first
    const BwdHostData* hp = picked[n].first;
    groups[n].h = hp;
    groups[n].b = picked[n].second / hp->pr.hkv;
    groups[n].hk = picked[n].second % hp->pr.hkv;
    lowp_task(*hp, &groups[n], &tasks);
  }
  for (auto& g : groups) fp64_tasks(*g.h, &g, &tasks);
  run_parallel(tasks);

  // Gather each gradient over the checked groups, ours beside the two references.
  const DType dt = problems.empty() ? DType::kFloat16 : problems.front()->dt;
  Vec ours[3], ref64[3], low[3];
  for (const Group& g : groups) {
    const BwdHostData& h = *g.h;
    const ref::Problem& pr = h.pr;
    const int ratio = pr.hq / pr.hkv;
    const Vec dq = slice(h.dq, pr.sq, pr.hq, pr.d, g.b, g.hk * ratio, ratio, 0, pr.sq);
    const Vec dk = slice(h.dk, pr.sk, pr.hkv, pr.d, g.b, g.hk, 1, 0, pr.sk);
    const Vec dv = slice(h.dv, pr.sk, pr.hkv, pr.value_dim(), g.b, g.hk, 1, 0, pr.sk);
    const Vec* mine[3] = {&dq, &dk, &dv};
    const Vec* exact[3] = {&g.dq64, &g.dk64, &g.dv64};
    const Vec* lowp[3] = {&g.dq_low, &g.dk_low, &g.dv_low};
    for (int t = 0; t < 3; ++t) {
      ours[t].insert(ours[t].end(), mine[t]->begin(), mine[t]->end());
      ref64[t].insert(ref64[t].end(), exact[t]->begin(), exact[t]->end());
      low[t].insert(low[t].end(), lowp[t]->begin(), lowp[t]->end());
    }
  }
  double mags[3] = {0, 0, 0};
  for (int t = 0; t < 3; ++t)
    for (double x : ref64[t]) mags[t] = std::max(mags[t], std::fabs(x));
  for (int t = 0; t < 3 && !groups.empty(); ++t) {
    // atol scales with the tensor: gradients of long rows reach tens, where the dtype's
    // absolute tolerance alone would be below one unit in the last place. dK takes dV's
    // magnitude too: both sum the same rows' P-weighted terms, and where dS = P (dP - dsum)
    // cancels (one key: dP == dsum exactly), dK is 0 while every tensor-core implementation
    // leaves fp32 accumulation noise of the size of those terms (measured 5.6e-4 at Sq = 4097,
    // Sk = 1 against a dV of thousands; the CPU lowp reference cancels exactly).
    const double mag = t == 1 ? std::max(mags[1], mags[2]) : mags[t];
    const double atol = check::default_atol(dt) * std::max(1.0, mag);
    const ref::RuleResult r = ref::check_rule(ours[t], ref64[t], low[t], atol);
    if (!r.pass)
      rep.message += std::string(names[t]) + ": err " + num(r.err) + " > bound " +
                     num(r.bound) + " (lowp err " + num(r.lowp_err) + ", max|ref| " + num(mag) +
                     "); ";
  }
  if (!rep.message.empty())
    rep.message += std::to_string(rep.groups_checked) + "/" + std::to_string(rep.groups_total) +
                   " groups checked";
  rep.pass = rep.message.empty();
  return rep;
}

}  // namespace flashattn::testing
