// The `causeway` command.
#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0) {
    std::printf("usage: causeway <command> [options]\n");
    return argc < 2 ? 2 : 0;
  }
  std::fprintf(stderr, "causeway: unknown command '%s'\n", argv[1]);
  return 2;
}
