// The confidence the interval tests ask for (C in the .NET design document):
// 95 %, the level of the figures they print that docs/estimates.md quotes.
#pragma once

namespace allocscope {

inline constexpr double kC = 0.95;

}  // namespace allocscope
