#include "host/env_command.h"

#include <gtest/gtest.h>

namespace allocscope {
namespace {

TEST(ThroughEnv, FindsTheProgramAndItsPreloads) {
  EnvCommand e =
      through_env({"env", "A=1", "LD_PRELOAD=/usr/lib/libjemalloc.so.2:libx.so liby.so", "./server", "-v"});
  EXPECT_EQ(e.program, "./server");
  EXPECT_EQ(e.preloads, (std::vector<std::string>{"/usr/lib/libjemalloc.so.2", "libx.so", "liby.so"}));
}

TEST(ThroughEnv, OptionsAndTheirArguments) {
  EnvCommand e =
      through_env({"/usr/bin/env", "-i", "-u", "HOME", "-C", "/tmp", "LD_PRELOAD=a.so", "--", "prog"});
  EXPECT_EQ(e.program, "prog");
  EXPECT_EQ(e.preloads, std::vector<std::string>{"a.so"});
}

TEST(ThroughEnv, OtherCommandsAndWhatEnvDoesNotRunAreLeftAlone) {
  EXPECT_EQ(through_env({"./server", "LD_PRELOAD=x.so"}).program, "./server");
  EXPECT_TRUE(through_env({"./server", "LD_PRELOAD=x.so"}).preloads.empty());
  EXPECT_EQ(through_env({"env", "-S", "LD_PRELOAD=x.so prog"}).program, "env");
  EXPECT_TRUE(through_env({"env", "LD_PRELOAD=x.so"}).preloads.empty());  // prints the environment
  EXPECT_EQ(through_env({}).program, "");
}

TEST(WithFirstPreload, PutsTheLibraryFirstInEnvsPreload) {
  EXPECT_EQ(with_first_preload({"env", "A=1", "LD_PRELOAD=libjemalloc.so.2", "./server"}, "/l.so"),
            (std::vector<std::string>{"env", "A=1", "LD_PRELOAD=/l.so:libjemalloc.so.2", "./server"}));
  EXPECT_EQ(with_first_preload({"env", "LD_PRELOAD=", "./server"}, "/l.so"),
            (std::vector<std::string>{"env", "LD_PRELOAD=/l.so", "./server"}));
  EXPECT_EQ(with_first_preload({"./server", "LD_PRELOAD=x"}, "/l.so"),
            (std::vector<std::string>{"./server", "LD_PRELOAD=x"}))
      << "an argument of the program, not env's";
}

}  // namespace
}  // namespace allocscope
