// allocscope_docs DIR: writes the man pages and shell completions of the
// command line into DIR (run at build time, see CMakeLists.txt).
#include <cstdio>
#include <fstream>
#include <string>

#include "docs.h"
#include "options.h"

using namespace allocscope;

namespace {

bool write(const std::string& dir, const GeneratedFile& file) {
  std::string path = dir + "/" + file.name;
  std::ofstream out(path, std::ios::trunc);
  out << file.text;
  out.close();
  if (!out) std::fprintf(stderr, "allocscope_docs: cannot write %s\n", path.c_str());
  return bool(out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: allocscope_docs DIR\n");
    return 2;
  }
  CommandLine cli;
  std::vector<GeneratedFile> files = man_pages(cli.app, version_line());
  files.push_back({"allocscope.bash", bash_completion(cli.app)});
  files.push_back({"_allocscope", zsh_completion(cli.app)});
  for (const GeneratedFile& f : files)
    if (!write(argv[1], f)) return 1;
  return 0;
}
