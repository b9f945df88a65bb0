// SPDX-License-Identifier: GPL-2.0
/* Tiny programs that find out what the running kernel can do: each is
 * loaded (and attached to a function of allocscope's own) on its own, and
 * its failure names a missing feature rather than a refused allocscope. */
// clang-format off
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
// clang-format on

#include "allocscope.h"

char LICENSE[] SEC("license") = "GPL";

/* A classic uprobe, or a uprobe_multi link's program. */
SEC("uprobe")
int probe_null(struct pt_regs *ctx) { return 0; }

/* A uprobe session's program: loads only where the kfunc serves uprobe
 * sessions (6.12 has it for kprobe sessions alone). Its answer is not
 * used: the verifier knows no range of a kfunc's bool. */
SEC("uprobe")
int probe_session(struct pt_regs *ctx) {
  as_session_is_return(ctx);
  return 0;
}
