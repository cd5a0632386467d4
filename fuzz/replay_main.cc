// Runs a libFuzzer target over files (or every file in folders) without
// libFuzzer: how the seed corpora are replayed as tests in every build.
// Exits 0 when every input ran; 1, naming them, when the target refused
// inputs (returned -1: a seed that no longer parses, verifies or runs is a
// seed that no longer tests anything). A bug aborts the target, and so the
// replay.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i) {
    std::filesystem::path path(argv[i]);
    if (std::filesystem::is_directory(path)) {
      for (const auto& entry : std::filesystem::directory_iterator(path)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
    } else {
      files.push_back(path);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: %s FILE_OR_FOLDER...\n", argv[0]);
    return 2;
  }
  size_t refused = 0;
  for (const auto& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "%s: cannot be read\n", file.c_str());
      ++refused;
      continue;
    }
    std::stringstream bytes;
    bytes << in.rdbuf();
    const std::string input = bytes.str();
    if (LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()),
                               input.size()) != 0) {
      std::fprintf(stderr,
                   "%s: the target refused it (it no longer parses, "
                   "verifies or is a program the target runs)\n",
                   file.c_str());
      ++refused;
    }
  }
  if (refused > 0) {
    std::fprintf(stderr, "%zu of %zu inputs were refused\n", refused,
                 files.size());
    return 1;
  }
  std::printf("%zu inputs ran cleanly\n", files.size());
  return 0;
}
