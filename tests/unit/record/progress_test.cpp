#include "record/view/progress.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace allocscope {
namespace {

TEST(Progress, LineNamesEveryFigure) {
  EXPECT_EQ(progress_line({12.4, 35, 1234, 7}),
            "allocscope: 12 s, 1234 samples from 35 processes, 7 dropped");
  EXPECT_EQ(progress_line({1, 0, 0, 0}), "allocscope: 1 s, 0 samples, 0 dropped");
  EXPECT_EQ(progress_line({3, 1, 1, 0}), "allocscope: 3 s, 1 sample from 1 process, 0 dropped");
}

std::string contents(FILE* f) {
  std::rewind(f);
  std::string s;
  for (int c; (c = std::fgetc(f)) != EOF;) s += char(c);
  return s;
}

// Not a terminal: a plain line per period, nothing when disabled.
TEST(Progress, PlainLinesWhenNotATerminal) {
  FILE* f = std::tmpfile();
  ProgressReporter p(true, f, 10);
  for (double t : {1.0, 5.0, 10.5, 15.0, 21.0}) p.update({t, 2, 10, 0});
  p.finish();
  std::fflush(f);
  EXPECT_EQ(contents(f),
            "allocscope: 10 s, 10 samples from 2 processes, 0 dropped\n"
            "allocscope: 21 s, 10 samples from 2 processes, 0 dropped\n");
  std::fclose(f);

  FILE* quiet = std::tmpfile();
  ProgressReporter off(false, quiet, 10);
  off.update({30, 1, 1, 1});
  off.finish();
  std::fflush(quiet);
  EXPECT_EQ(contents(quiet), "");
  std::fclose(quiet);
}

}  // namespace
}  // namespace allocscope
