// What the agent's unit tests share: a container id and a pod uid as cgroup
// paths spell them, and a process as the process table holds it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "model/process_table.h"

namespace allocscope {

inline const std::string kId = "4f2a9c1b7d3e5f60718293a4b5c6d7e8f90112233445566778899aabbccddeef";
inline const std::string kPodUid = "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0";

inline ProcessInstance instance(uint32_t tgid, std::string comm, bool ended = false) {
  ProcessInstance p;
  p.tgid = tgid;
  p.comm = std::move(comm);
  p.ended = ended;
  return p;
}

}  // namespace allocscope
