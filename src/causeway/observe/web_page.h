// The head's web page (`/`): one HTML document with its script and style,
// built into the binary (no CDN, nothing fetched but /api/status). It
// refreshes itself every second without reloading; with a token, it asks
// for it once and keeps it in the tab's sessionStorage. docs/operate.md
// describes what it shows.
#ifndef CAUSEWAY_OBSERVE_WEB_PAGE_H_
#define CAUSEWAY_OBSERVE_WEB_PAGE_H_

#include <string_view>

namespace causeway::observe {

std::string_view WebPage();

}  // namespace causeway::observe

#endif  // CAUSEWAY_OBSERVE_WEB_PAGE_H_
