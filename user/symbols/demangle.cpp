#include "symbols/demangle.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

namespace allocscope {

std::string demangle(const std::string& name) {
  if (!name.starts_with("_Z")) return name;
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> out(
      abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), &std::free);
  return status == 0 && out ? std::string(out.get()) : name;
}

}  // namespace allocscope
