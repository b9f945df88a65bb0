// What deep_cxx.cpp allocates, shared with the tests that check allocscope
// against it: two sites at the bottom of deep template recursions.
#pragma once

#include <cstddef>

// Level<N>::run frames between main and each site (N down to 0: N + 1 frames).
inline constexpr int kChurnDepth = 70;
inline constexpr int kKeptDepth = 90;
// The churn site allocates and frees at once, cycling through these sizes.
inline constexpr size_t kChurnSizes[] = {48, 64, 80, 96};
inline constexpr long kChurnDefault = 200000;
// The kept site allocates blocks it holds until exit (inuse at exit).
inline constexpr size_t kKeptSize = 256;
inline constexpr long kKeptDefault = 5000;

// Bytes the churn site allocates in n calls.
inline constexpr size_t churn_bytes(long n) {
  size_t total = 0;
  for (long i = 0; i < n; ++i) total += kChurnSizes[i % 4];
  return total;
}
