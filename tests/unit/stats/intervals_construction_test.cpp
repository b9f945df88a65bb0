// How intervals are built: bytes and objects bounds, methods that nest, the
// split of exact allocations from sampled ones, and statistics that merge.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <utility>
#include <vector>

#include "intervals_confidence.h"
#include "stats/intervals.h"
#include "stats/sampling.h"

namespace allocscope {
namespace {

// ---- interval construction --------------------------------------------------

TEST(IntervalBytes, NoSamplesGiveTheOneSidedBound) {
  const uint64_t rate = 512 * 1024;
  const double q = std::exp(-1.0 / rate);
  for (auto [method, tail] :
       {std::pair{IntervalMethod::MidP, 1 - kC}, std::pair{IntervalMethod::PlainNegBin, 1 - kC},
        std::pair{IntervalMethod::Conservative, (1 - kC) / 2}}) {
    Interval iv = bytes_interval(0, 0, rate, kC, method);
    EXPECT_EQ(iv.lo, 0);
    // Smallest k with P(no sample in k + 1 bytes) = q^(k+1) <= tail.
    EXPECT_LE(std::pow(q, iv.hi + 1), tail);
    EXPECT_GT(std::pow(q, iv.hi), tail);
    EXPECT_NEAR(iv.hi, rate * std::log(1 / tail), 2);
  }
}

TEST(IntervalBytes, ExactModeIsZeroWidth) {
  for (uint64_t rate : {0, 1}) {
    Interval iv = bytes_interval(12, 4096, rate, kC);
    EXPECT_EQ(iv.lo, 4096);
    EXPECT_EQ(iv.hi, 4096);
    IntervalStats st;
    for (uint64_t size : {0, 1, 24, 1 << 20}) st.add_sample(size, 0, rate);
    EXPECT_EQ(st.samples, 0u);
    EXPECT_EQ(st.exact_objects, 4u);
    EXPECT_EQ(st.exact_bytes, (1u << 20) + 25);
    Interval b = bytes_interval(st, rate, kC), o = objects_interval(st, rate, kC);
    EXPECT_EQ(b.lo, (1u << 20) + 25);
    EXPECT_EQ(b.hi, b.lo);
    EXPECT_EQ(o.lo, 4);
    EXPECT_EQ(o.hi, 4);
  }
}

TEST(IntervalBytes, MethodsNestAndBoundsGrowWithSamples) {
  const uint64_t rate = 512 * 1024;
  Interval before{0, 0};
  for (uint64_t s : {1, 2, 3, 5, 10, 50, 300, 5000}) {
    Interval plain = bytes_interval(s, 0, rate, kC, IntervalMethod::PlainNegBin);
    Interval midp = bytes_interval(s, 0, rate, kC);
    Interval cons = bytes_interval(s, 0, rate, kC, IntervalMethod::Conservative);
    EXPECT_EQ(plain.lo, cons.lo) << s;
    EXPECT_LT(plain.lo, midp.lo) << s;
    EXPECT_LT(plain.hi, midp.hi) << s;
    EXPECT_LT(midp.hi, cons.hi) << s;
    EXPECT_LT(midp.lo, s * double(rate));
    EXPECT_GT(midp.hi, s * double(rate));
    EXPECT_GT(midp.lo, before.lo);
    EXPECT_GT(midp.hi, before.hi);
    before = midp;
    // u shifts the interval, nothing else.
    Interval shifted = bytes_interval(s, 12345, rate, kC);
    EXPECT_EQ(shifted.lo, midp.lo + 12345);
    EXPECT_EQ(shifted.hi, midp.hi + 12345);
  }
  // 95 % nests inside 99 %.
  Interval i95 = bytes_interval(20, 0, rate, 0.95), i99 = bytes_interval(20, 0, rate, 0.99);
  EXPECT_LT(i99.lo, i95.lo);
  EXPECT_GT(i99.hi, i95.hi);
}

TEST(IntervalStats, MergeRemoveAndTheExactSplit) {
  const uint64_t rate = 512 * 1024;
  struct S {
    uint64_t size, offset;
  };
  const std::vector<S> a = {{32, 5}, {4096, 4000}, {100000, 0}, {30ull * rate, 777}};
  const std::vector<S> b = {{64, 63}, {1ull << 30, 400000}, {700000, 123456}};
  IntervalStats sa, sb, all;
  for (S s : a) {
    sa.add_sample(s.size, s.offset, rate);
    all.add_sample(s.size, s.offset, rate);
  }
  for (S s : b) {
    sb.add_sample(s.size, s.offset, rate);
    all.add_sample(s.size, s.offset, rate);
  }
  IntervalStats merged = sa;
  merged.merge(sb);
  EXPECT_EQ(merged.samples, all.samples);
  EXPECT_EQ(merged.u_bytes, all.u_bytes);
  EXPECT_EQ(merged.exact_objects, all.exact_objects);
  EXPECT_EQ(merged.exact_bytes, all.exact_bytes);
  EXPECT_DOUBLE_EQ(merged.ht_bytes, all.ht_bytes);
  EXPECT_DOUBLE_EQ(merged.ht_var_objects, all.ht_var_objects);
  EXPECT_EQ(merged.min_size, all.min_size);
  EXPECT_EQ(merged.min_size_count, all.min_size_count);
  // 30 R and 1 GiB (2048 R) are exact; the rest is the random part.
  EXPECT_EQ(all.exact_objects, 2u);
  EXPECT_EQ(all.exact_bytes, 30ull * rate + (1ull << 30));
  EXPECT_EQ(all.samples, 5u);
  EXPECT_EQ(all.u_bytes, (32 - 5) + (4096 - 4000) + 100000 + (64 - 63) + (700000 - 123456));
  EXPECT_NEAR(all.bytes_estimate(),
              30.0 * rate + (1ull << 30) + 32 / sample_probability(32, rate) +
                  4096 / sample_probability(4096, rate) + 100000 / sample_probability(100000, rate) +
                  64 / sample_probability(64, rate) + 700000 / sample_probability(700000, rate),
              1e-3);
  EXPECT_EQ(all.min_size, 32u);
  EXPECT_EQ(all.min_size_count, 1u);
  EXPECT_EQ(all.max_object_weight(rate), 1 / sample_probability(32, rate));
  // remove_sample undoes add_sample.
  IntervalStats live = all;
  for (S s : b) live.remove_sample(s.size, s.offset, rate);
  EXPECT_EQ(live.min_size, 32u);
  EXPECT_EQ(live.min_size_count, 1u);
  EXPECT_EQ(live.samples, sa.samples);
  EXPECT_EQ(live.u_bytes, sa.u_bytes);
  EXPECT_EQ(live.exact_objects, sa.exact_objects);
  EXPECT_EQ(live.exact_bytes, sa.exact_bytes);
  EXPECT_NEAR(live.ht_objects, sa.ht_objects, 1e-9 * sa.ht_objects);
  EXPECT_NEAR(live.ht_var_bytes, sa.ht_var_bytes, 1e-9 * sa.ht_var_bytes);
  for (S s : a) live.remove_sample(s.size, s.offset, rate);
  EXPECT_EQ(live.samples, 0u);
  EXPECT_EQ(live.ht_objects, 0);
  EXPECT_EQ(live.ht_var_objects, 0);
  EXPECT_EQ(live.exact_bytes, 0u);
  Interval empty = bytes_interval(live, rate, kC);
  EXPECT_EQ(empty.lo, 0);
  EXPECT_NEAR(empty.hi, rate * std::log(20.0), 2);
  // The smallest size stays as a bound once its last sample is gone, and
  // sizes the objects bound of the emptied set: 32 B objects, not 1 B ones.
  EXPECT_EQ(live.min_size, 32u);
  EXPECT_EQ(live.min_size_count, 0u);
  Interval empty_objects = objects_interval(live, rate, kC);
  EXPECT_EQ(empty_objects.lo, 0);
  EXPECT_NEAR(empty_objects.hi, std::log(0.05) / std::log1p(-sample_probability(32, rate)), 1e-6);
  EXPECT_NEAR(empty_objects.hi, rate * std::log(20.0) / 32, 2);
}

TEST(IntervalHuge, GiBAllocationsAtDefaultRateAreExactAndTight) {
  const uint64_t rate = kDefaultRate;
  const uint64_t gib = 1ull << 30;
  Log2Table table = make_log2_table();
  Countdown cd(rate, table, 42);
  IntervalStats st;
  uint64_t samples = 0, u = 0;
  for (int i = 0; i < 4; ++i) {
    uint64_t offset = 0;
    ASSERT_TRUE(cd.sample(gib, &offset));  // P(not) = exp(-2048)
    st.add_sample(gib, offset, rate);
    ++samples;
    u += gib - offset;
  }
  Interval b = bytes_interval(st, rate, kC), o = objects_interval(st, rate, kC);
  EXPECT_EQ(b.lo, 4.0 * gib);
  EXPECT_EQ(b.hi, 4.0 * gib);
  EXPECT_EQ(o.lo, 4);
  EXPECT_EQ(o.hi, 4);
  // Without the split, the negative binomial alone would still be tight:
  // only the ~R bytes before each sampled byte are uncertain.
  Interval nb = bytes_interval(samples, double(u), rate, kC);
  std::printf("  4 x 1 GiB at R = 512 KiB: exact split [%.0f; %.0f]; NB alone [%.0f; %.0f] (width %.3f %%)\n",
              b.lo, b.hi, nb.lo, nb.hi, 100 * (nb.hi - nb.lo) / (4.0 * gib));
  EXPECT_LE(nb.lo, 4.0 * gib + 1);
  EXPECT_GE(nb.hi, 4.0 * gib - 20.0 * rate);
  EXPECT_LT((nb.hi - nb.lo) / (4.0 * gib), 0.005);
  // 8 MiB (16 R) allocations: p = 1 - 1e-7, in the random part but tight.
  IntervalStats mid;
  for (int i = 0; i < 10; ++i) {
    uint64_t offset = 0;
    ASSERT_TRUE(cd.sample(8ull << 20, &offset));
    mid.add_sample(8ull << 20, offset, rate);
  }
  Interval mo = objects_interval(mid, rate, kC);
  EXPECT_NEAR(mo.lo, 10, 0.01);
  EXPECT_NEAR(mo.hi, 10, 0.01);
}

TEST(IntervalObjects, EqualSizesMatchTheBytesIntervalOverTheSize) {
  const uint64_t rate = kDefaultRate;
  for (uint64_t s : {1, 3, 8, 40, 400}) {
    IntervalStats st;
    for (uint64_t i = 0; i < s; ++i) st.add_sample(32, 16, rate);
    Interval o = objects_interval(st, rate, kC);
    Interval b = bytes_interval(st, rate, kC);
    Interval bc = bytes_interval(st, rate, kC, IntervalMethod::Conservative);
    Interval oc = objects_interval(st, rate, kC, IntervalMethod::Conservative);
    EXPECT_NEAR(o.lo, b.lo / 32, 0.01 * b.lo / 32 + 1) << s;    // mid-p lower
    EXPECT_NEAR(o.hi, bc.hi / 32, 0.01 * bc.hi / 32 + 1) << s;  // Fay-Feuer upper
    EXPECT_NEAR(oc.lo, bc.lo / 32, 0.01 * bc.lo / 32 + 1) << s;
    EXPECT_EQ(oc.hi, o.hi) << s;
  }
  IntervalStats none;
  Interval o = objects_interval(none, rate, kC);
  EXPECT_EQ(o.lo, 0);
  EXPECT_NEAR(o.hi, rate * std::log(20.0), 1);  // 1-byte objects: weight ~R
  // A hint of weight 100 (p = 1/100): the largest n with 0.99^n >= 0.05.
  Interval hinted = objects_interval(none, rate, kC, IntervalMethod::MidP, 100);
  EXPECT_NEAR(hinted.hi, std::log(0.05) / std::log(0.99), 1e-9);
}

}  // namespace
}  // namespace allocscope
