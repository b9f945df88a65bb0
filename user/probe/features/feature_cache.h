// What the kernel can do, kept for the rest of the boot. Probing it takes
// about half a second (the kernel's BTF parsed four times, two probes whose
// removal waits for RCU grace periods), which every `record -- CMD` paid
// before its command ran. Only a boot changes the answer (a new kernel, or
// the same one after kexec), and a rebuilt allocscope may probe differently:
// the key is the boot's id and allocscope's own executable.
#pragma once

#include <optional>
#include <string>

#include "base/result.h"
#include "probe/features/kernel_features.h"

namespace allocscope {

// Root's directory under /run (a tmpfs emptied at boot).
inline constexpr const char* kFeatureCacheDir = "/run/allocscope";

// The text kept; `key` names the boot and the executable.
std::string encode_features(const KernelFeatures& k, const std::string& key);
// The features in `text` if it was written under `key` with every feature
// this build knows; nothing otherwise.
std::optional<KernelFeatures> decode_features(const std::string& text, const std::string& key);

// The boot's id and the identity of /proc/self/exe (device, inode, size,
// modification time), or an error when either cannot be read.
Result<std::string> feature_cache_key();

// Reads the cache in `dir`: a directory and file owned by root, writable by
// no one else, neither a symlink. Nothing when absent, stale or unsafe.
std::optional<KernelFeatures> load_cached_features(const std::string& dir, const std::string& key);
// Writes it (only as root, and only an answer with nothing unknown in it),
// creating `dir` 0700 if needed; replaces the file atomically.
Result<void> store_cached_features(const std::string& dir, const std::string& key, const KernelFeatures& k);

}  // namespace allocscope
