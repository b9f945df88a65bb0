/* The functions of the unit tests' call chains (unwind_chain.c,
 * trial_chain.c). noipa keeps GCC from cloning (.constprop, .isra) or
 * inlining them, so the symbols a test looks for are the frames on the
 * stack. */
#ifndef ALLOCSCOPE_CHAIN_FN_H
#define ALLOCSCOPE_CHAIN_FN_H
#if defined(__clang__)
#define CHAIN_FN __attribute__((noinline, used))
#else
#define CHAIN_FN __attribute__((noipa, used))
#endif
#endif
