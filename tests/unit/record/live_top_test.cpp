// record --top's screen: it fits the terminal it is drawn on.
#include "record/view/live_top.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

namespace allocscope {
namespace {

// 30 functions of long names, each its own stack under malloc.
Recording many_functions() {
  Recording r;
  r.rate = 1;
  r.functions = {{"malloc", "malloc", ""}};
  r.locations = {{-1, 0x1000, {{0, 0}}}};
  r.counters = {{"samples", 30}};
  for (uint32_t f = 1; f <= 30; ++f) {
    std::string name =
        "a_function_with_a_long_name_in_a_namespace::member_" + std::to_string(f) + "(int, char const*)";
    r.functions.push_back({name, name, ""});
    r.locations.push_back({-1, 0x2000 + f, {{f, 0}}});
    StackTotals t{.alloc_objects = double(f),
                  .alloc_bytes = 100.0 * f,
                  .live_objects = 1,
                  .live_bytes = 10.0 * f,
                  .samples = f};
    r.samples.push_back(RecSample{{0, f}, 7, "p", t, {}});
  }
  return r;
}

// An 80x24 terminal holds the whole screen and the cursor's line below it,
// every line within 80 columns; so do a taller and a wider one.
TEST(LiveTop, TheScreenFitsTheTerminal) {
  Recording r = many_functions();
  for (auto [height, width] : {std::pair<size_t, size_t>{24, 80}, {40, 120}, {11, 80}}) {
    SCOPED_TRACE(std::to_string(width) + "x" + std::to_string(height));
    RenderOptions o;
    o.width = width;
    std::string screen = live_top_screen(r, o, rows_within(height), 2.0);
    std::istringstream in(screen);
    size_t lines = 0;
    for (std::string line; std::getline(in, line); ++lines) EXPECT_LE(line.size(), width) << line;
    EXPECT_LE(lines + 1, height) << screen;
    EXPECT_NE(screen.find("300 B"), std::string::npos) << "the top live row shown\n" << screen;
  }
  EXPECT_EQ(rows_within(0), 10u);  // not a terminal: ten rows a table
}

}  // namespace
}  // namespace allocscope
