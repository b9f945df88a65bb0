// Words CLI11 would read wrongly are caught before it parses: a mistyped
// option taken as the command or a FILE, a value given to a flag, a word
// before -- that no option takes. Checked against allocscope's own command
// line, so that a new option is covered as it is added.
#include "usage.h"

#include <gtest/gtest.h>

#include "options.h"

namespace allocscope {
namespace {

std::string misused(const std::vector<std::string>& args) {
  CommandLine cli;
  return misused_word(cli.app, args);
}

TEST(MisusedWord, AMistypedOptionIsNamedWithTheNearestOne) {
  EXPECT_EQ(
      misused({"record", "--durration", "1", "-p", "12"}),
      "not an option of record: --durration; did you mean --duration? (allocscope record --help lists them)");
  EXPECT_EQ(misused({"record", "--pdi", "12"}),
            "not an option of record: --pdi; did you mean --pid? (allocscope record --help lists them)");
  EXPECT_EQ(
      misused({"report", "--fromat", "svg", "f.pb.gz"}),
      "not an option of report: --fromat; did you mean --format? (allocscope report --help lists them)");
  EXPECT_EQ(misused({"report", "f.pb.gz", "--tpo", "5"}),
            "not an option of report: --tpo; did you mean --top? (allocscope report --help lists them)");
  EXPECT_EQ(misused({"record", "--bogus", "-p", "1"}),
            "not an option of record: --bogus (allocscope record --help lists them)");
  EXPECT_EQ(misused({"record", "--diff", "a", "-p", "1"}),
            "not an option of record: --diff (an option of report) (allocscope record --help lists them)");
  EXPECT_EQ(misused({"record", "-x", "-p", "1"}),
            "not an option of record: -x (allocscope record --help lists them)");
}

TEST(MisusedWord, AValueGivenToAFlagIsSaidToBeOne) {
  EXPECT_EQ(misused({"record", "--top=5", "--", "./x"}),
            "--top takes no value: --top=5 (allocscope record --help)");
  EXPECT_EQ(misused({"record", "--top", "5", "--", "./x"}),
            "--top takes no value, and '5' is not an option of record (the command goes after --: "
            "allocscope record --help)");
  EXPECT_EQ(misused({"record", "-p", "1", "stray", "--", "./x"}),
            "'stray' is not an option of record (the command goes after --: allocscope record --help)");
  EXPECT_EQ(misused({"record", "-q=1", "-p", "1"}), "-q takes no value: -q=1 (allocscope record --help)");
  EXPECT_EQ(misused({"report", "/", "--json", "5"}),
            "--json takes no value, and there is no file '5' (allocscope report --help)");
  EXPECT_EQ(misused({"report", "--leaks", "heap.*.pb.gz"}), "");  // a glob that matched nothing: the file's
  EXPECT_EQ(misused({"report", "/", "--json", "typo.pb.gz"}), "");
  EXPECT_EQ(misused({"report", "--json", "/"}), "");  // a file after a flag is a file
}

// What is right passes untouched: values that look like options ("-o -",
// a negative number for CLI11 to refuse), attached values, the command's
// own options after --, and words before the subcommand.
TEST(MisusedWord, RightCommandLinesPass) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"record", "-o", "-", "-p", "12"},
           {"record", "--rate", "-5", "-p", "12"},
           {"record", "-d5", "--rate=1KiB", "-p", "12"},
           {"record", "--top", "-o", "x.svg", "--", "./x", "--durration", "5"},
           {"record", "./x", "--top"},
           {"record", "--no-children", "--", "./x"},
           {"report", "a.pb.gz", "--top", "5", "--json", "-o", "t.json"},
           {"report", "--diff", "a.pb.gz", "b.pb.gz", "--help"},
           {"--help"},
           {"recrod", "-p", "1"},
       })
    EXPECT_EQ(misused(args), "") << args.front() << " " << (args.size() > 1 ? args[1] : "");
}

}  // namespace
}  // namespace allocscope
