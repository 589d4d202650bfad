// Fuzz target: the request renderer (SPEC 4.2) on its two readers, a Json tree (render_request)
// and a simdjson DOM (render_request_dom, dyn-route serve's request path).
// Input: a request body.
// Properties checked: a body simdjson accepts (at the router's depth limit), nlohmann accepts too
// and json_too_deep passes (the router reads a Json tree, after that check, only for what
// simdjson refuses, so it must refuse nothing more than before); where
// render_request_dom gives a text, render_request gives the same text for nlohmann's reading of
// the same body (the router's hashes do not depend on which reader ran).
#include <simdjson.h>

#include <string>

#include "dyn/base/json_limits.h"
#include "dyn/tokens/render.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  static simdjson::dom::parser parser;
  static const bool sized = parser.allocate(4096, dyn::kMaxJsonDepth) == simdjson::SUCCESS;
  FUZZ_CHECK(sized);
  simdjson::dom::element doc;
  if (parser.parse(text).get(doc) != simdjson::SUCCESS) return 0;
  FUZZ_CHECK(!dyn::json_too_deep(text));
  dyn::Json j = dyn::Json::parse(text, nullptr, false);
  FUZZ_CHECK(!j.is_discarded());
  if (auto r = dyn::tokens::render_request_dom(doc)) FUZZ_CHECK(*r == dyn::tokens::render_request(j));
  return 0;
}
