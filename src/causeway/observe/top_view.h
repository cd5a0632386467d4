// What `causeway top` draws (cli/top_command.cc): one screen of text from
// the head's /api/status JSON (status_json.h), devices as rows with a
// utilisation bar, queue and memory; sessions; queued slice requests; the
// last failures and host deaths. Pure: the command fetches and repaints.
#ifndef CAUSEWAY_OBSERVE_TOP_VIEW_H_
#define CAUSEWAY_OBSERVE_TOP_VIEW_H_

#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace causeway::observe {

struct TopViewOptions {
  int width = 120;     // Columns; every line is cut to fit.
  bool color = false;  // ANSI colours for device states.
  std::string title;   // The head's address, for the first line.
};

// One line per element, without newlines. A JSON that lacks the expected
// fields gives a line saying so instead of throwing.
std::vector<std::string> RenderTop(const nlohmann::json& status,
                                   const TopViewOptions& options);

}  // namespace causeway::observe

#endif  // CAUSEWAY_OBSERVE_TOP_VIEW_H_
