// Probe placement on hand-assembled x86-64 prologues.
#include "probe/placement/probe_placement.h"

#include <gtest/gtest.h>

#include <vector>

namespace allocscope {
namespace {

constexpr uint64_t kBase = 0x1000;

TEST(KernelEmulates, PushAndNops) {
  EXPECT_TRUE(kernel_emulates(std::vector<uint8_t>{0x55}));              // push rbp
  EXPECT_TRUE(kernel_emulates(std::vector<uint8_t>{0x41, 0x54}));        // push r12
  EXPECT_TRUE(kernel_emulates(std::vector<uint8_t>{0x90}));              // nop
  EXPECT_TRUE(kernel_emulates(std::vector<uint8_t>{0x0f, 0x1f, 0x00}));  // nopl (rax)
  EXPECT_TRUE(kernel_emulates(std::vector<uint8_t>{0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00}));
  EXPECT_FALSE(kernel_emulates(std::vector<uint8_t>{0x48, 0x85, 0xff}));  // test rdi, rdi
  EXPECT_FALSE(kernel_emulates(std::vector<uint8_t>{0x48, 0x89, 0xe5}));  // mov rbp, rsp
  EXPECT_FALSE(kernel_emulates(std::vector<uint8_t>{0x41, 0x58}));        // pop r8
  EXPECT_FALSE(kernel_emulates(std::vector<uint8_t>{}));
  EXPECT_TRUE(kernel_emulates(std::vector<uint8_t>{0x74, 0x10}));                          // je rel8
  EXPECT_TRUE(kernel_emulates(std::vector<uint8_t>{0x0f, 0x85, 0x8a, 0x00, 0x00, 0x00}));  // jne rel32
  EXPECT_TRUE(kernel_emulates(std::vector<uint8_t>{0xe8, 0x00, 0x00, 0x00, 0x00}));        // call rel32
  EXPECT_FALSE(kernel_emulates(std::vector<uint8_t>{0xff, 0xd0}));                         // call rax
}

// glibc 2.36's free: test rdi,rdi; je <ret>; push rbp; ...
std::vector<uint8_t> free_like(uint8_t exit_byte) {
  std::vector<uint8_t> code = {0x48, 0x85, 0xff,                    // test rdi, rdi
                               0x0f, 0x84, 0x10, 0x00, 0x00, 0x00,  // je +0x10 -> 0x19
                               0x55,                                // push rbp
                               0x48, 0x8d, 0x77, 0xf0,              // lea rsi, [rdi - 0x10]
                               0x53};                               // push rbx
  code.resize(0x19, 0x90);
  code.push_back(exit_byte);  // the branch target
  code.resize(64, 0x90);
  return code;
}

TEST(PlaceProbe, SkipsTheNullCheckToThePush) {
  Placement p = place_probe(free_like(0xc3), kBase, false);
  EXPECT_EQ(p.offset, 9u);
  EXPECT_TRUE(p.emulated);
  EXPECT_EQ(p.instruction, "push rbp");
}

TEST(PlaceProbe, EntryOnlyStaysAtTheEntry) {
  Placement p = place_probe(free_like(0xc3), kBase, true);
  EXPECT_EQ(p.offset, 0u);
  EXPECT_FALSE(p.emulated);
}

TEST(PlaceProbe, BranchToRealWorkIsProbedItself) {
  // The branch target calls something instead of returning: both paths do
  // work, so the probe goes on the branch, which every call executes.
  std::vector<uint8_t> code = free_like(0xe8);
  Placement p = place_probe(code, kBase, false);
  EXPECT_EQ(p.offset, 3u);
  EXPECT_TRUE(p.emulated);
  EXPECT_EQ(p.instruction, "je 0x1019");
}

TEST(PlaceProbe, EmulatedEntryIsKept) {
  std::vector<uint8_t> code = {0x41, 0x54, 0x55, 0x53, 0x48, 0x89, 0xfb, 0xc3};  // push r12; push rbp; ...
  Placement p = place_probe(code, kBase, false);
  EXPECT_EQ(p.offset, 0u);
  EXPECT_TRUE(p.emulated);
  EXPECT_EQ(p.instruction, "push r12");
}

TEST(PlaceProbe, PointerWrittenBeforeThePushKeepsTheEntry) {
  std::vector<uint8_t> code = {0x48, 0x89, 0xc7,  // mov rdi, rax: the pointer changes
                               0x55, 0xc3};
  EXPECT_EQ(place_probe(code, kBase, false).offset, 0u);
  std::vector<uint8_t> low = {0x40, 0xb7, 0x00,  // mov dil, 0
                              0x55, 0xc3};
  EXPECT_EQ(place_probe(low, kBase, false).offset, 0u);
  // The stack and the other argument registers may change: only the pointer is read.
  std::vector<uint8_t> stack = {0x48, 0x83, 0xec, 0x18,  // sub rsp, 0x18
                                0x48, 0x89, 0xc6,        // mov rsi, rax
                                0x55, 0xc3};
  EXPECT_EQ(place_probe(stack, kBase, false).offset, 7u);
}

// jemalloc 5.3's free: scratch work, then the branch between its fast and
// slow paths, which the kernel emulates.
TEST(PlaceProbe, JemallocFreeIsProbedOnItsFirstBranch) {
  std::vector<uint8_t> code = {0x48, 0x89, 0xf8,                          // mov rax, rdi
                               0x48, 0x8b, 0x15, 0x0e, 0x53, 0x0a, 0x00,  // mov rdx, [rip + 0xa530e]
                               0x48, 0x89, 0xf9,                          // mov rcx, rdi
                               0x48, 0xc1, 0xe8, 0x1a,                    // shr rax, 0x1a
                               0x0f, 0x85, 0x8a, 0x00, 0x00, 0x00,        // jne +0x8a
                               0x48, 0x89, 0xfe};                         // mov rsi, rdi
  code.resize(256, 0x90);
  Placement p = place_probe(code, kBase, false);
  EXPECT_EQ(p.offset, 17u);
  EXPECT_TRUE(p.emulated);
}

TEST(PlaceProbe, ScratchRegisterBeforeThePushIsFine) {
  std::vector<uint8_t> code = {0x48, 0x8b, 0x05, 0x00, 0x10, 0x00, 0x00,  // mov rax, [rip + 0x1000]
                               0x55, 0xc3};
  Placement p = place_probe(code, kBase, false);
  EXPECT_EQ(p.offset, 7u);
  EXPECT_TRUE(p.emulated);
}

// mimalloc 2.0's free: the NULL check, then the pointer is overwritten. The
// NULL check's branch is the last emulated instruction every call executes.
TEST(PlaceProbe, PointerOverwrittenAfterTheNullCheckProbesTheCheck) {
  std::vector<uint8_t> code = {0x48, 0x89, 0xf9,               // mov rcx, rdi
                               0x48, 0x85, 0xff,               // test rdi, rdi
                               0x74, 0x10,                     // je +0x10 -> ret
                               0x48, 0x8d, 0x7f, 0xff,         // lea rdi, [rdi - 1]
                               0x48, 0x89, 0xc8, 0x55, 0xc3};  // mov rax, rcx; push rbp; ret
  code.resize(0x18, 0x90);
  code.push_back(0xc3);  // the branch target
  code.resize(64, 0x90);
  Placement p = place_probe(code, kBase, false);
  EXPECT_EQ(p.offset, 6u);
  EXPECT_TRUE(p.emulated);
  EXPECT_EQ(p.instruction, "je 0x1018");
}

// Where the kernel single-steps multi-byte nops (6.12 and before) the probe
// skips one for the next instruction it does emulate; where it single-steps
// pushes too, the entry is as good as any.
TEST(PlaceProbe, FollowsWhatTheKernelEmulates) {
  std::vector<uint8_t> code = {0x48, 0x85, 0xff,        // test rdi, rdi
                               0x0f, 0x1f, 0x40, 0x00,  // nop dword ptr [rax]
                               0x55, 0xc3};             // push rbp; ret
  EXPECT_EQ(place_probe(code, kBase, false).offset, 3u);
  Placement p = place_probe(code, kBase, false, {.push = true, .nops = false});
  EXPECT_EQ(p.offset, 7u);
  EXPECT_TRUE(p.emulated);
  p = place_probe(code, kBase, false, {.push = false, .nops = false});
  EXPECT_EQ(p.offset, 0u);
  EXPECT_FALSE(p.emulated);
  EXPECT_FALSE(kernel_emulates(std::vector<uint8_t>{0x0f, 0x1f, 0x00}, {.push = true, .nops = false}));
  EXPECT_FALSE(kernel_emulates(std::vector<uint8_t>{0x55}, {.push = false, .nops = true}));
  EXPECT_TRUE(kernel_emulates(std::vector<uint8_t>{0x74, 0x10}, {.push = false, .nops = false}));
}

TEST(PlaceProbe, GarbageFallsBackToTheEntry) {
  std::vector<uint8_t> code = {0x0f, 0x0b};  // ud2
  Placement p = place_probe(code, kBase, false);
  EXPECT_EQ(p.offset, 0u);
  EXPECT_FALSE(p.emulated);
  EXPECT_EQ(place_probe({}, kBase, false).offset, 0u);
}

}  // namespace
}  // namespace allocscope
