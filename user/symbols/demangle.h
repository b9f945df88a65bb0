// C++ symbol names as people read them.
#pragma once

#include <string>

namespace allocscope {

// The demangled form of an Itanium-mangled name; any other name unchanged.
std::string demangle(const std::string& name);

}  // namespace allocscope
