// The kernel's features kept for the boot: what is written reads back the
// same, anything else (another boot or build, a feature this build does not
// know or lacks) is probed again, and the file is trusted only where root
// alone could have written it.
#include "probe/features/feature_cache.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include "probe/parallel_release.h"

namespace allocscope {
namespace {

KernelFeatures sample_features() {
  KernelFeatures k;
  k.release = "6.1.0-27-amd64";
  for (FeatureState& s : k.states) s = {Presence::Present, ""};
  k.states[size_t(Feature::UprobeSession)] = {Presence::Missing,
                                              "attach uprobe session: Invalid argument\n(22)"};
  k.session_kfunc_takes_ctx = true;
  return k;
}

TEST(FeatureCache, WhatIsWrittenReadsBackUnderTheSameKey) {
  KernelFeatures k = sample_features();
  auto back = decode_features(encode_features(k, "boot b1 exe 1:2"), "boot b1 exe 1:2");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->release, k.release);
  EXPECT_TRUE(back->session_kfunc_takes_ctx);
  for (size_t i = 0; i < kFeatureCount; ++i) {
    EXPECT_EQ(back->states[i].presence, k.states[i].presence) << feature_specs()[i].key;
    EXPECT_EQ(back->states[i].error, 0);
  }
  EXPECT_EQ(back->state(Feature::UprobeSession).detail, "attach uprobe session: Invalid argument (22)");
}

TEST(FeatureCache, AnotherBootOrBuildIsNotTrusted) {
  std::string text = encode_features(sample_features(), "boot b1 exe 1:2");
  EXPECT_FALSE(decode_features(text, "boot b2 exe 1:2"));
  EXPECT_FALSE(decode_features(text, "boot b1 exe 1:3"));
}

TEST(FeatureCache, AFileWithoutEveryFeatureOrWithAnUnknownOneIsNotTrusted) {
  std::string text = encode_features(sample_features(), "k");
  std::string without_last = text.substr(0, text.rfind('\n', text.size() - 2) + 1);
  EXPECT_FALSE(decode_features(without_last, "k"));
  EXPECT_FALSE(decode_features(text + "time_travel present\n", "k"));
  EXPECT_FALSE(decode_features(text + "bpf_loop maybe\n", "k"));
  EXPECT_FALSE(decode_features("", "k"));
}

TEST(FeatureCache, TheKeyNamesThisBootAndThisExecutable) {
  auto key = feature_cache_key();
  ASSERT_TRUE(key) << key.error();
  std::string boot;
  std::getline(std::ifstream("/proc/sys/kernel/random/boot_id"), boot);
  EXPECT_NE(key->find("boot " + boot), std::string::npos) << *key;
  struct stat exe;
  ASSERT_EQ(stat("/proc/self/exe", &exe), 0);
  EXPECT_NE(key->find(":" + std::to_string(exe.st_ino) + " "), std::string::npos) << *key;
}

class FeatureCacheFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "only root keeps the features";
    char tmpl[] = "/tmp/allocscope-features-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    parent_ = tmpl;
    dir_ = parent_ + "/cache";
  }
  void TearDown() override {
    if (!parent_.empty()) std::system(("rm -rf '" + parent_ + "'").c_str());
  }
  std::string parent_, dir_;
};

TEST_F(FeatureCacheFiles, StoredThenLoadedInADirectoryOfRootsAlone) {
  ASSERT_TRUE(store_cached_features(dir_, "k", sample_features()));
  struct stat st;
  ASSERT_EQ(lstat(dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  auto back = load_cached_features(dir_, "k");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->release, "6.1.0-27-amd64");
  EXPECT_FALSE(load_cached_features(dir_, "another key"));
}

TEST_F(FeatureCacheFiles, AnUnknownFeatureIsNotKept) {
  KernelFeatures k = sample_features();
  k.states[size_t(Feature::Loop)] = {Presence::Unknown, "no privileges", 1};
  EXPECT_FALSE(store_cached_features(dir_, "k", k));
  EXPECT_FALSE(load_cached_features(dir_, "k"));
}

TEST_F(FeatureCacheFiles, AFileOthersCouldWriteOrASymlinkIsNotRead) {
  ASSERT_TRUE(store_cached_features(dir_, "k", sample_features()));
  std::string file = dir_ + "/kernel-features";
  ASSERT_EQ(chmod(file.c_str(), 0620), 0);
  EXPECT_FALSE(load_cached_features(dir_, "k")) << "group-writable file";
  ASSERT_EQ(chmod(file.c_str(), 0600), 0);
  ASSERT_EQ(chmod(dir_.c_str(), 0777), 0);
  EXPECT_FALSE(load_cached_features(dir_, "k")) << "world-writable directory";
  ASSERT_EQ(chmod(dir_.c_str(), 0700), 0);
  ASSERT_EQ(rename(file.c_str(), (parent_ + "/elsewhere").c_str()), 0);
  ASSERT_EQ(symlink((parent_ + "/elsewhere").c_str(), file.c_str()), 0);
  EXPECT_FALSE(load_cached_features(dir_, "k")) << "symlinked file";
  std::string linked_dir = parent_ + "/linked";
  ASSERT_EQ(symlink(dir_.c_str(), linked_dir.c_str()), 0);
  EXPECT_FALSE(load_cached_features(linked_dir, "k")) << "symlinked directory";
}

TEST(ParallelRelease, EveryElementOfEveryVectorIsReleasedAndTheVectorsEmptied) {
  std::atomic<int> released{0};
  struct Counted {
    explicit Counted(std::atomic<int>* counter) : n(counter) {}
    ~Counted() { ++*n; }
    std::atomic<int>* n;
  };
  std::vector<std::unique_ptr<Counted>> a, b;
  for (int i = 0; i < 100; ++i) a.push_back(std::make_unique<Counted>(&released));
  for (int i = 0; i < 3; ++i) b.push_back(std::make_unique<Counted>(&released));
  release_in_parallel(a, b);
  EXPECT_EQ(released.load(), 103);
  EXPECT_TRUE(a.empty() && b.empty());
  release_in_parallel(a);  // nothing to do
  EXPECT_EQ(released.load(), 103);
}

}  // namespace
}  // namespace allocscope
