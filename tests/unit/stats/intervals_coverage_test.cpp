// Coverage of the 95 % intervals over thousands of simulated recordings drawn
// through the BPF program's countdown code, and rates past what a double counts.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "intervals_confidence.h"
#include "splitmix.h"
#include "stats/intervals.h"
#include "stats/sampling.h"

namespace allocscope {
namespace {

// ---- coverage by simulation ---------------------------------------------------

struct SimAlloc {
  uint32_t stack, thread;
  uint64_t size;
  bool freed;  // decided by the program, independent of sampling
};

struct Stream {
  uint32_t stacks = 1, threads = 1;
  std::vector<SimAlloc> allocs;
};

enum Measure { kAllocBytes, kAllocObjects, kLiveBytes, kLiveObjects, kMetrics };
const char* const kMetricNames[kMetrics] = {"alloc bytes", "alloc objects", "live bytes", "live objects"};
enum Way { kMidP, kConservative, kPlain, kNormal, kWays };
const char* const kWayNames[kWays] = {"mid-p", "conservative", "plain NB", "normal (HT)"};

struct Tally {
  int covered = 0, below = 0, above = 0;  // truth below the interval / above it
  double rel_width = 0;
  void add(Interval iv, double truth) {
    if (truth < iv.lo)
      ++below;
    else if (truth > iv.hi)
      ++above;
    else
      ++covered;
    if (truth > 0) rel_width += (iv.hi - iv.lo) / truth;
  }
};

struct TargetResult {
  double samples = 0;  // mean sampled allocations (random part + exact)
  std::array<std::array<Tally, kWays>, kMetrics> t;
};

struct Coverage {
  int runs = 0;
  std::vector<TargetResult> targets;  // stacks..., then the aggregate
  double seconds = 0;
  double coverage(size_t target, Measure m, Way w = kMidP) const {
    return double(targets[target].t[m][w].covered) / runs;
  }
  size_t aggregate() const { return targets.size() - 1; }
};

// Runs `runs` simulated recordings of the streams `make` builds (it is asked
// for stream `run`; it may return the same one every time), each through one
// Countdown per thread as the BPF program keeps one per thread.
Coverage simulate(const char* name, uint64_t rate, int runs, uint64_t seed,
                  const std::function<const Stream&(int run)>& make) {
  auto start = std::chrono::steady_clock::now();
  Log2Table table = make_log2_table();
  Coverage cov;
  cov.runs = runs;
  Rng seeds{seed};
  for (int run = 0; run < runs; ++run) {
    const Stream& s = make(run);
    const size_t n = s.stacks + 1;
    if (cov.targets.empty()) cov.targets.resize(n);
    std::vector<std::array<double, kMetrics>> truth(n, {0, 0, 0, 0});
    for (const SimAlloc& a : s.allocs)
      for (size_t k : {size_t(a.stack), n - 1}) {
        truth[k][kAllocBytes] += double(a.size);
        truth[k][kAllocObjects] += 1;
        if (!a.freed) {
          truth[k][kLiveBytes] += double(a.size);
          truth[k][kLiveObjects] += 1;
        }
      }
    std::vector<Countdown> threads;
    for (uint32_t t = 0; t < s.threads; ++t) threads.emplace_back(rate, table, seeds.next());
    std::vector<IntervalStats> alloc(n), live(n);
    for (const SimAlloc& a : s.allocs) {
      uint64_t offset;
      if (!threads[a.thread].sample(a.size, &offset)) continue;
      alloc[a.stack].add_sample(a.size, offset, rate);
      live[a.stack].add_sample(a.size, offset, rate);
      if (a.freed)  // the free de-attributes it, as Profile::on_free does
        live[a.stack].remove_sample(a.size, offset, rate);
    }
    for (uint32_t k = 0; k < s.stacks; ++k) {
      alloc[n - 1].merge(alloc[k]);
      live[n - 1].merge(live[k]);
    }
    for (size_t k = 0; k < n; ++k) {
      TargetResult& r = cov.targets[k];
      r.samples += double(alloc[k].samples + alloc[k].exact_objects) / runs;
      const IntervalMethod methods[] = {IntervalMethod::MidP, IntervalMethod::Conservative,
                                        IntervalMethod::PlainNegBin};
      for (int w = 0; w < 3; ++w) {
        r.t[kAllocBytes][w].add(bytes_interval(alloc[k], rate, kC, methods[w]), truth[k][kAllocBytes]);
        r.t[kAllocObjects][w].add(objects_interval(alloc[k], rate, kC, methods[w]), truth[k][kAllocObjects]);
        r.t[kLiveBytes][w].add(bytes_interval(live[k], rate, kC, methods[w]), truth[k][kLiveBytes]);
        r.t[kLiveObjects][w].add(
            objects_interval(live[k], rate, kC, methods[w], alloc[k].max_object_weight(rate)),
            truth[k][kLiveObjects]);
      }
      r.t[kAllocBytes][kNormal].add(normal_interval(alloc[k].bytes_estimate(), alloc[k].ht_var_bytes, kC),
                                    truth[k][kAllocBytes]);
      r.t[kAllocObjects][kNormal].add(
          normal_interval(alloc[k].objects_estimate(), alloc[k].ht_var_objects, kC), truth[k][kAllocObjects]);
      r.t[kLiveBytes][kNormal].add(normal_interval(live[k].bytes_estimate(), live[k].ht_var_bytes, kC),
                                   truth[k][kLiveBytes]);
      r.t[kLiveObjects][kNormal].add(normal_interval(live[k].objects_estimate(), live[k].ht_var_objects, kC),
                                     truth[k][kLiveObjects]);
    }
  }
  cov.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("  [%s] R=%lu, %d runs, %.2f s; coverage of the 95 %% interval (truth below/above it):\n", name,
              static_cast<unsigned long>(rate), runs, cov.seconds);
  for (size_t k = 0; k < cov.targets.size(); ++k) {
    const TargetResult& r = cov.targets[k];
    std::string label = k == cov.aggregate() ? "all stacks" : "stack " + std::to_string(k);
    std::printf("    %-10s E[samples] %7.2f\n", label.c_str(), r.samples);
    for (int m = 0; m < kMetrics; ++m) {
      const Tally& mid = r.t[m][kMidP];
      std::printf("      %-13s mid-p %5.1f %% (%4.1f/%4.1f) width %7.3f |", kMetricNames[m],
                  100.0 * mid.covered / runs, 100.0 * mid.below / runs, 100.0 * mid.above / runs,
                  mid.rel_width / runs);
      for (int w = 1; w < kWays; ++w)
        std::printf(" %s %5.1f", kWayNames[w], 100.0 * r.t[m][w].covered / runs);
      std::printf("\n");
    }
  }
  return cov;
}

// The 93-97 % band for the default (MidP) intervals: with 3000 runs the
// binomial standard error at 95 % is 0.4 %, and the seeds are fixed. The
// objects upper bound is deliberately Fay-Feuer's conservative one (mid-p
// there undercovers as soon as sizes differ, see docs/estimates.md); with
// similar sizes that puts its coverage at 96.5-97.1 % (12000-run figures),
// so objects get half a point more room above.
void expect_band(const Coverage& cov, size_t target, Measure m, const char* name) {
  double c = cov.coverage(target, m);
  bool objects = m == kAllocObjects || m == kLiveObjects;
  EXPECT_GE(c, 0.93) << name << " target " << target << " " << kMetricNames[m];
  EXPECT_LE(c, objects ? 0.975 : 0.97) << name << " target " << target << " " << kMetricNames[m];
}

// Every metric of the aggregate, and of every stack with at least
// `min_samples` expected samples.
void expect_all_in_band(const Coverage& cov, const char* name, double min_samples = 10) {
  for (size_t k = 0; k < cov.targets.size(); ++k) {
    if (k != cov.aggregate() && cov.targets[k].samples < min_samples) continue;
    for (int m = 0; m < kMetrics; ++m) expect_band(cov, k, Measure(m), name);
  }
}

// The probe sees each allocation's requested size; frees are the program's.
SimAlloc make_alloc(Rng& rng, uint32_t stack, uint32_t threads, uint64_t size, double free_fraction) {
  return {stack, uint32_t(rng.below(threads)), size, rng.uniform() < free_fraction};
}

void shuffle(std::vector<SimAlloc>& v, Rng& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.below(i)]);
}

TEST(Coverage, SmallAllocations) {
  // All 32 B, two stacks, ~40 expected samples in all. R = 64 KiB keeps the
  // stream short; 32 B is still 1/2048 of R, the small-allocation regime.
  const uint64_t rate = 64 * 1024;
  Stream s;
  s.stacks = 2;
  Rng rng{1};
  for (uint64_t i = 0; i < 40 * rate / 32; ++i)
    s.allocs.push_back(make_alloc(rng, i % 5 < 3 ? 0 : 1, 1, 32, 0.5));
  Coverage cov = simulate("small: 32 B", rate, 3000, 101, [&](int) -> const Stream& { return s; });
  expect_all_in_band(cov, "small");
}

// Power-of-4 size classes 16 B .. 64 KiB, the same bytes in each class (so
// objects are mostly 16 B ones and every class is sampled alike), three
// stacks by size, two threads.
Stream mixed_stream(double expected_samples, uint64_t rate, uint64_t seed, double free_fraction) {
  Stream s;
  s.stacks = 3;
  s.threads = 2;
  Rng rng{seed};
  const uint64_t sizes[] = {16, 64, 256, 1024, 4096, 16384, 65536};
  const double per_class = expected_samples * double(rate) / std::size(sizes);
  for (uint64_t size : sizes) {
    uint32_t stack = size <= 64 ? 0 : size <= 4096 ? 1 : 2;
    for (uint64_t i = 0; i < uint64_t(per_class / double(size)); ++i)
      s.allocs.push_back(make_alloc(rng, stack, s.threads, size, free_fraction));
  }
  shuffle(s.allocs, rng);
  return s;
}

TEST(Coverage, MixedSizes) {
  const uint64_t rate = kDefaultRate;
  Stream s = mixed_stream(40, rate, 2, 0.4);
  Coverage cov = simulate("mixed: 16 B..64 KiB", rate, 3000, 202, [&](int) -> const Stream& { return s; });
  expect_all_in_band(cov, "mixed");
}

TEST(Coverage, HugeAllocations) {
  // 4 x 1 GiB (2048 R: exact), 20 x 2 MiB (p = 0.98) and 100 x 256 KiB
  // (p = 0.39) in a second stack, 64 B ones in a third.
  const uint64_t rate = kDefaultRate;
  Stream s;
  s.stacks = 3;
  Rng rng{3};
  for (int i = 0; i < 4; ++i) s.allocs.push_back({0, 0, 1ull << 30, i % 2 == 0});
  for (int i = 0; i < 20; ++i) s.allocs.push_back(make_alloc(rng, 1, 1, 2ull << 20, 0.5));
  for (int i = 0; i < 100; ++i) s.allocs.push_back(make_alloc(rng, 1, 1, 256ull << 10, 0.5));
  for (uint64_t i = 0; i < 12 * rate / 64; ++i) s.allocs.push_back(make_alloc(rng, 2, 1, 64, 0.5));
  shuffle(s.allocs, rng);
  Coverage cov = simulate("huge: 1 GiB + 2 MiB + 256 KiB + 64 B", rate, 3000, 303,
                          [&](int) -> const Stream& { return s; });
  expect_all_in_band(cov, "huge");
  // The exact stack: always covered, zero width.
  for (int m = 0; m < kMetrics; ++m) {
    EXPECT_EQ(cov.coverage(0, Measure(m)), 1.0);
    EXPECT_EQ(cov.targets[0].t[m][kMidP].rel_width, 0);
  }
  // The aggregate's bytes are dominated by the exact GiBs: tight.
  EXPECT_LT(cov.targets[cov.aggregate()].t[kAllocBytes][kMidP].rel_width / cov.runs, 0.01);
}

TEST(Coverage, FewSamples) {
  // ~3 expected samples: every run is another small stack, sizes uniform
  // 16 B..64 KiB, whose live allocations make 2-4 expected samples and whose
  // freed ones 0-1 more. At one fixed expected count coverage is a saw-tooth
  // of the Poisson count (Coverage.PoissonSawTooth); over a population of
  // small stacks it averages out, and that is what this measures.
  const uint64_t rate = kDefaultRate;
  Rng rng{4};
  Stream s;
  Coverage cov = simulate("few: ~3 samples", rate, 4000, 404, [&](int) -> const Stream& {
    s.allocs.clear();
    for (auto [freed, low, high] : {std::tuple{false, 2.0, 4.0}, std::tuple{true, 0.0, 1.0}}) {
      double target = (low + (high - low) * rng.uniform()) * double(rate), total = 0;
      while (total < target) {
        uint64_t size = 16 + rng.below(65536 - 16 + 1);
        s.allocs.push_back({0, 0, size, freed});
        total += double(size);
      }
    }
    shuffle(s.allocs, rng);
    return s;
  });
  EXPECT_NEAR(cov.targets[0].samples, 3.5, 0.3);
  expect_all_in_band(cov, "few");
}

TEST(Coverage, ManySamples) {
  // ~500 expected samples, sizes uniform 16 B..64 KiB, three stacks by size.
  const uint64_t rate = kDefaultRate;
  Stream s;
  s.stacks = 3;
  s.threads = 2;
  Rng rng{5};
  for (double total = 0; total < 500.0 * rate;) {
    uint64_t size = 16 + rng.below(65536 - 16 + 1);
    s.allocs.push_back(make_alloc(rng, size < 256 ? 0 : size < 4096 ? 1 : 2, 2, size, 0.4));
    total += double(size);
  }
  Coverage cov = simulate("many: ~500 samples", rate, 3000, 505, [&](int) -> const Stream& { return s; });
  EXPECT_NEAR(cov.targets[cov.aggregate()].samples, 500, 25);
  expect_all_in_band(cov, "many");
}

TEST(Coverage, ExactModeEqualsTheTruth) {
  Stream s = mixed_stream(0.05, kDefaultRate, 6, 0.5);
  s.allocs.push_back({2, 0, 3ull << 30, false});
  s.allocs.push_back({1, 1, 0, false});  // malloc(0) counts as an object
  Coverage cov = simulate("exact mode: R = 1", 1, 3, 606, [&](int) -> const Stream& { return s; });
  for (const TargetResult& r : cov.targets)
    for (int m = 0; m < kMetrics; ++m) {
      EXPECT_EQ(r.t[m][kMidP].covered, cov.runs) << kMetricNames[m];
      EXPECT_EQ(r.t[m][kMidP].rel_width, 0) << kMetricNames[m];
    }
}

TEST(Coverage, WideSizeRangeObjectsAreALimitation) {
  // Counts log-uniform over 16 B..64 KiB: half the objects are below 256 B
  // but carry 0.4 % of the bytes, so with ~60 samples they are usually not
  // sampled at all and no interval built from the samples can see them. The
  // bytes stay covered; the objects figure is reported, not asserted
  // (docs/estimates.md, "Where it breaks").
  const uint64_t rate = kDefaultRate;
  Stream s;
  s.stacks = 3;
  s.threads = 2;
  Rng rng{7};
  for (double total = 0; total < 60.0 * rate;) {
    auto size = uint64_t(std::exp(std::log(16.0) + rng.uniform() * std::log(4096.0)));
    s.allocs.push_back(make_alloc(rng, size < 256 ? 0 : size < 4096 ? 1 : 2, 2, size, 0.4));
    total += double(size);
  }
  Coverage cov =
      simulate("wide: log-uniform 16 B..64 KiB", rate, 2000, 707, [&](int) -> const Stream& { return s; });
  expect_band(cov, cov.aggregate(), kAllocBytes, "wide");
  expect_band(cov, cov.aggregate(), kLiveBytes, "wide");
}

TEST(Coverage, PoissonSawTooth) {
  // Small allocations make the sample count Poisson(mu = bytes / R); the
  // coverage at a fixed mu is then an exact sum over counts. Printed for the
  // documentation; asserted: the mid-p interval's average over each window.
  const uint64_t rate = 1ull << 20;
  std::vector<Interval> iv[3];
  const IntervalMethod methods[] = {IntervalMethod::MidP, IntervalMethod::Conservative,
                                    IntervalMethod::PlainNegBin};
  for (int m = 0; m < 3; ++m)
    for (uint64_t k = 0; k < 400; ++k) iv[m].push_back(bytes_interval(k, 0, rate, kC, methods[m]));
  auto coverage = [&](int m, double mu) {
    double c = 0, pk = std::exp(-mu);
    for (uint64_t k = 0; k < 400; ++k) {
      if (k > 0) pk *= mu / double(k);
      if (iv[m][k].lo <= mu * rate && mu * rate <= iv[m][k].hi) c += pk;
    }
    return c;
  };
  const double windows[][2] = {{0.5, 2}, {2, 4}, {3, 6}, {6, 12}, {12, 30}, {30, 100}, {100, 200}};
  std::printf("  exact coverage for Poisson(mu) samples (min / mean / max over mu in the window):\n");
  for (auto [lo, hi] : windows) {
    std::printf("    mu in [%5.1f, %5.1f]:", lo, hi);
    for (int m = 0; m < 3; ++m) {
      double mn = 1, mx = 0, mean = 0;
      const int n = 2000;
      for (int i = 0; i < n; ++i) {
        double c = coverage(m, lo + (hi - lo) * (i + 0.5) / n);
        mn = std::min(mn, c);
        mx = std::max(mx, c);
        mean += c / n;
      }
      std::printf("  %s %.3f / %.3f / %.3f", kWayNames[m], mn, mean, mx);
      if (m == 0 && lo >= 2) {
        EXPECT_GE(mean, 0.94) << lo;
        EXPECT_LE(mean, 0.97) << lo;
      }
    }
    std::printf("\n");
  }
  std::printf("    mid-p at mu = 2.8 / 2.9 / 3.0 / 3.2 / 3.5: %.3f %.3f %.3f %.3f %.3f\n", coverage(0, 2.8),
              coverage(0, 2.9), coverage(0, 3.0), coverage(0, 3.2), coverage(0, 3.5));
}

// A crafted profile can claim any rate: past 2^53 a double cannot split the
// quantile search's bracket, and the search must end all the same.
TEST(BytesInterval, EndsForRatesAndTotalsPastWhatADoubleCounts) {
  for (uint64_t rate : {uint64_t{1} << 53, uint64_t{1} << 60, ~uint64_t{0}}) {
    for (uint64_t samples : {uint64_t{0}, uint64_t{1}, uint64_t{1000}}) {
      Interval i = bytes_interval(samples, double(samples) * 1e15, rate, 0.95);
      EXPECT_LE(i.lo, i.hi) << rate << " " << samples;
    }
  }
  EXPECT_GE(negbin_quantile(3, 1e-18, 0.975), 0u);
}

}  // namespace
}  // namespace allocscope
