// tessera: the command-line entry point. Subcommands live in cmd_<name>.cc.
#include <cstdio>

int main() {
  std::printf("tessera\n");
  return 0;
}
