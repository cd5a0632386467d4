// libFuzzer target for the HLO text parser: any input must parse or fail
// cleanly; whatever parses must print as text that parses back into an
// equal module, and printing that must give the same text.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "causeway/hlo/parser.h"
#include "causeway/hlo/printer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace causeway::hlo;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModule(text);
  if (!module.ok()) {
    if (module.status().code() != absl::StatusCode::kInvalidArgument) {
      std::fprintf(stderr, "unexpected status code: %s\n",
                   module.status().ToString().c_str());
      std::abort();
    }
    return 0;
  }
  std::string printed = PrintModule(**module);
  absl::StatusOr<std::unique_ptr<Module>> reparsed = ParseModule(printed);
  if (!reparsed.ok()) {
    std::fprintf(stderr, "printed module does not parse: %s\n%s\n",
                 reparsed.status().ToString().c_str(), printed.c_str());
    std::abort();
  }
  std::string diff;
  if (!ModulesEqual(**module, **reparsed, &diff)) {
    std::fprintf(stderr, "round trip differs: %s\n%s\n", diff.c_str(),
                 printed.c_str());
    std::abort();
  }
  if (PrintModule(**reparsed) != printed) {
    std::fprintf(stderr, "printing is not stable:\n%s\n", printed.c_str());
    std::abort();
  }
  return 0;
}
