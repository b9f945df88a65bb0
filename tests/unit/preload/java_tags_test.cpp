// The JVM agent's outstanding tags (user/preload/java_tags.c): a death is
// told exactly once, whoever clears its bit first (the JVM's own posting,
// or the lookup at the JVM's end); the end's walk sees each outstanding tag
// once, in order, in batches; sampling's end forgets them all.
extern "C" {
#include "preload/java_tags.h"
}

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

namespace {

int collect(const uint64_t* tags, uint32_t n, void* out) {
  auto& v = *static_cast<std::vector<std::vector<uint64_t>>*>(out);
  v.emplace_back(tags, tags + n);
  return 1;
}

TEST(JavaTags, EachDeathIsToldOnceAndTheEndSeesTheRestInBatches) {
  as_java_tags_forget();
  const uint64_t far = (uint64_t(1) << AS_JAVA_TAG_CHUNK_SHIFT) + 5;  // in the second chunk
  for (uint64_t t : {1, 2, 3, 64, 65, 1000}) ASSERT_TRUE(as_java_tag_mark(t));
  ASSERT_TRUE(as_java_tag_mark(far));
  EXPECT_FALSE(as_java_tag_mark(uint64_t(AS_JAVA_TAG_CHUNKS) << AS_JAVA_TAG_CHUNK_SHIFT))
      << "past the chunks";
  EXPECT_TRUE(as_java_tag_clear(2));
  EXPECT_FALSE(as_java_tag_clear(2)) << "told once";
  EXPECT_FALSE(as_java_tag_clear(4)) << "never sampled";

  std::vector<std::vector<uint64_t>> batches;
  uint64_t batch[2];
  as_java_tags_each(far, batch, 2, collect, &batches);
  EXPECT_EQ(batches, (std::vector<std::vector<uint64_t>>{{1, 3}, {64, 65}, {1000, far}}));
  batches.clear();
  as_java_tags_each(1000, batch, 2, collect, &batches);
  EXPECT_EQ(batches.back().back(), 1000u) << "tags past `last` are left (their chunk not walked)";

  as_java_tags_forget();
  batches.clear();
  as_java_tags_each(far, batch, 2, collect, &batches);
  EXPECT_TRUE(batches.empty());
}

TEST(JavaTags, TwoThreadsClearingTheSameTagsTellEachOnce) {
  as_java_tags_forget();
  constexpr uint64_t kTags = 100000;
  for (uint64_t t = 1; t <= kTags; ++t) ASSERT_TRUE(as_java_tag_mark(t));
  uint64_t told[2] = {0, 0};
  auto clear_all = [&](int who) {
    for (uint64_t t = 1; t <= kTags; ++t) told[who] += as_java_tag_clear(t);
  };
  std::thread a(clear_all, 0), b(clear_all, 1);
  a.join();
  b.join();
  EXPECT_EQ(told[0] + told[1], kTags);
}

}  // namespace
