#include "outputs.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>

namespace allocscope {

Result<void> write_file_atomically(const std::string& path, std::string_view content) {
  if (path == "-") {
    std::cout << content;
    std::cout.flush();
    return {};
  }
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::trunc | std::ios::binary);
    if (!out)
      return fail(errno_message("write " + path, errno));
    out.write(content.data(), std::streamsize(content.size()));
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      return fail(errno_message("write " + path, errno));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    return fail(errno_message("write " + path, err));
  }
  return {};
}

std::string numbered_path(const std::string& path, unsigned n) {
  size_t slash = path.rfind('/');
  size_t dot = path.find('.', slash == std::string::npos ? 0 : slash + 1);
  if (dot == std::string::npos || dot == (slash == std::string::npos ? 0 : slash + 1))
    return path + "." + std::to_string(n);
  return path.substr(0, dot) + "." + std::to_string(n) + path.substr(dot);
}

Result<void> write_outputs(const Recording& r, const std::vector<OutputSpec>& outputs, const RenderOptions& o) {
  for (const OutputSpec& out : outputs)
    if (auto ok = write_file_atomically(out.path, render(r, out.format, o)); !ok)
      return ok;
  return {};
}

}  // namespace allocscope
