#include "probe/uprobe_links.h"

#include <sys/syscall.h>
#include <unistd.h>

namespace allocscope {
namespace {

constexpr int kLinkCreate = 28;  // BPF_LINK_CREATE

// bpf_attr for BPF_LINK_CREATE of a uprobe_multi or session link.
struct UprobeMultiAttr {
  uint32_t prog_fd, target_fd, attach_type, flags;
  uint64_t path, offsets, ref_ctr_offsets, cookies;
  uint32_t cnt, multi_flags, pid;
};

}  // namespace

int create_uprobe_multi_link(int prog_fd, uint32_t attach_type, const std::string& path,
                             const std::vector<uint64_t>& offsets, const std::vector<uint64_t>& cookies,
                             pid_t pid) {
  UprobeMultiAttr attr{};
  attr.prog_fd = uint32_t(prog_fd);
  attr.attach_type = attach_type;
  attr.path = reinterpret_cast<uint64_t>(path.c_str());
  attr.offsets = reinterpret_cast<uint64_t>(offsets.data());
  attr.cookies = reinterpret_cast<uint64_t>(cookies.data());
  attr.cnt = uint32_t(offsets.size());
  attr.pid = uint32_t(pid);
  return int(syscall(__NR_bpf, kLinkCreate, &attr, sizeof attr));
}

}  // namespace allocscope
