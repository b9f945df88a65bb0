// How a launched command is sampled: what a program's file allows, and the
// words the summary and outputs use for it.
#include "record/session/launch_plan.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "symbols/elf_file.h"
#include "temp_dir.h"

namespace allocscope {
namespace {

TEST(LaunchPlan, ADynamicProgramCanSampleInProcess) {
  ProgramFacts f = program_facts("/bin/sh");
  EXPECT_TRUE(f.found && f.elf && f.dynamic);
  EXPECT_FALSE(f.set_id || f.own_malloc);
  EXPECT_EQ(in_process_refusal(f), "");
}

TEST(LaunchPlan, StaticSetIdAndOwnMallocProgramsAreProbed) {
  ProgramFacts f = program_facts(STATIC_PROGRAM);
  EXPECT_TRUE(f.found && f.elf);
  EXPECT_FALSE(f.dynamic);
  EXPECT_NE(in_process_refusal(f).find("static"), std::string::npos);

  // jemalloc linked in: it defines malloc (the sanitizers' build leaves it
  // out: the refusal follows what the file holds).
  f = program_facts(OWN_MALLOC_PROGRAM);
  auto elf = ElfFile::open(OWN_MALLOC_PROGRAM);
  ASSERT_TRUE(elf);
  std::vector<ElfSymbol> functions = elf->functions();
  bool defines =
      std::any_of(functions.begin(), functions.end(), [](const ElfSymbol& s) { return s.name == "malloc"; });
  EXPECT_TRUE(f.dynamic);
  EXPECT_EQ(f.own_malloc, defines);
  EXPECT_EQ(in_process_refusal(f).find("defines malloc") != std::string::npos, defines);

  TempDir dir;
  std::filesystem::path copy = dir.path / "setuid-sh";
  std::filesystem::copy_file("/bin/sh", copy);
  ASSERT_EQ(chmod(copy.c_str(), 04755), 0);
  f = program_facts(copy.string());
  EXPECT_TRUE(f.set_id);
  EXPECT_NE(in_process_refusal(f).find("set-id"), std::string::npos);

  EXPECT_NE(in_process_refusal(program_facts((dir.path / "none").string())).find("not found"),
            std::string::npos);
}

// A script: its interpreter loads the library (the kernel runs it).
TEST(LaunchPlan, AScriptCanSampleInProcess) {
  TempDir dir;
  std::filesystem::path script = dir.path / "run.sh";
  std::ofstream(script) << "#!/bin/sh\ntrue\n";
  ProgramFacts f = program_facts(script.string());
  EXPECT_TRUE(f.found);
  EXPECT_FALSE(f.elf);
  EXPECT_EQ(in_process_refusal(f), "");
}

TEST(LaunchPlan, SamplingIsDescribedWithTheProcessesOfEachPath) {
  LaunchPlan probes;
  probes.why_probes = "a static program loads no library";
  EXPECT_EQ(describe_sampling(probes, 0, 3), "allocator probes (a static program loads no library)");
  LaunchPlan only;
  only.in_process = true;
  only.probes = false;
  EXPECT_EQ(describe_sampling(only, 1, 0), "in process (1 process)");
  LaunchPlan mixed = only;
  mixed.probes = true;
  EXPECT_EQ(describe_sampling(mixed, 3, 1), "in process (3 processes), allocator probes (1 process)");
  EXPECT_EQ(describe_sampling(mixed, 2, 0), "in process (2 processes)");
}

}  // namespace
}  // namespace allocscope
