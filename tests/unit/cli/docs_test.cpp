// Man pages and completions are written from the command line's definition:
// every option allocscope accepts is in them, with what its value is.
#include "docs.h"

#include <gtest/gtest.h>

#include "options.h"

namespace allocscope {
namespace {

std::vector<const CLI::App*> commands(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App*) { return true; });
}

std::vector<const CLI::Option*> visible_options(const CLI::App& app) {
  return app.get_options([](const CLI::Option* o) { return !o->get_group().empty(); });
}

std::string page_of(const std::vector<GeneratedFile>& pages, const std::string& name) {
  for (const GeneratedFile& p : pages)
    if (p.name == name) return p.text;
  ADD_FAILURE() << "no man page " << name;
  return "";
}

// "--max-live" as roff spells it.
std::string roff_name(const std::string& name) {
  std::string out;
  for (char c : name) out += c == '-' ? std::string("\\-") : std::string(1, c);
  return out;
}

TEST(Docs, EveryOptionIsInItsManPageAndCompletions) {
  CommandLine cli;
  std::vector<GeneratedFile> pages = man_pages(cli.app, "allocscope test");
  std::string bash = bash_completion(cli.app), zsh = zsh_completion(cli.app);
  ASSERT_EQ(commands(cli.app).size(), 4u);
  for (const CLI::App* sub : commands(cli.app)) {
    std::string page = page_of(pages, "allocscope-" + sub->get_name() + ".1");
    EXPECT_NE(page.find(".SH SYNOPSIS"), std::string::npos);
    size_t checked = 0;
    for (const CLI::Option* o : visible_options(*sub)) {
      if (o->get_positional()) continue;
      for (const std::string& l : o->get_lnames()) {
        EXPECT_NE(page.find("\\fB" + roff_name("--" + l) + "\\fR"), std::string::npos)
            << sub->get_name() << " --" << l;
        EXPECT_NE(bash.find(" --" + l), std::string::npos) << "bash: " << sub->get_name() << " --" << l;
        EXPECT_NE(zsh.find("--" + l), std::string::npos) << "zsh: " << sub->get_name() << " --" << l;
        ++checked;
      }
    }
    EXPECT_GT(checked, sub->get_name() == "check" ? 0u : 10u) << sub->get_name();
    EXPECT_NE(page_of(pages, "allocscope.1").find("\\fB" + sub->get_name() + "\\fR"), std::string::npos);
  }
}

// A value shown as TEXT or UINT tells a reader nothing and gives the
// completions nothing to go on: options.cpp names each one.
TEST(Docs, EveryValueIsNamed) {
  CommandLine cli;
  for (const CLI::App* sub : commands(cli.app))
    for (const CLI::Option* o : visible_options(*sub)) {
      ValueKind kind = value_kind(*o);
      if (o->get_type_size() == 0) {
        EXPECT_TRUE(kind.metavar.empty()) << o->get_name();
        continue;
      }
      for (const char* builtin : {"TEXT", "INT", "UINT", "FLOAT", "BOOLEAN", "ENUM", "VALUE"})
        EXPECT_NE(kind.metavar, builtin) << sub->get_name() << " " << o->get_name();
    }
}

TEST(Docs, ChoicesComeFromTheCheck) {
  CLI::App app;
  std::string mode;
  CLI::Option* o = app.add_subcommand("record")
                       ->add_option("--unwind", mode)
                       ->type_name("MODE")
                       ->check(CLI::IsMember({"fp", "dwarf"}));
  ValueKind kind = value_kind(*o);
  EXPECT_EQ(kind.metavar, "MODE");
  EXPECT_EQ(kind.choices, (std::vector<std::string>{"fp", "dwarf"}));
  EXPECT_NE(bash_completion(app).find("compgen -W 'fp dwarf'"), std::string::npos);
}

// Roff reads a line starting with '.' or '\'' as a request, and a backslash
// as an escape: text from --help must reach the page as text.
TEST(Docs, HelpTextIsEscapedForRoff) {
  CLI::App app{"test"};
  auto* sub = app.add_subcommand("record", "Record");
  bool flag = false;
  sub->add_flag("--odd", flag, "Line one\n.TH not a request, C:\\path");
  std::string page = page_of(man_pages(app, "v"), "allocscope-record.1");
  EXPECT_NE(page.find("\n\\&.TH not a request, C:\\epath"), std::string::npos) << page;
}

}  // namespace
}  // namespace allocscope
