// The API table's lookups and the per-API error body.
#include "dyn/api/api.h"

namespace dyn::api {

// api_info indexes the table by the enum.
static_assert([] {
  for (size_t i = 0; i < kApis.size(); ++i)
    if (static_cast<size_t>(kApis[i].api) != i) return false;
  return true;
}());

const ApiInfo& api_info(Api a) { return kApis[static_cast<size_t>(a)]; }
const char* api_name(Api a) { return api_info(a).name; }
const char* api_path(Api a) { return api_info(a).path; }

std::optional<Api> api_for_path(std::string_view path) {
  size_t q = path.find('?');
  if (q != std::string_view::npos) path = path.substr(0, q);
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  for (const ApiInfo& i : kApis)
    if (path == i.path) return i.api;
  return std::nullopt;
}

Json error_body(Api api, std::string_view message, std::string_view type, int code) {
  if (api == Api::kMessages) return {{"type", "error"}, {"error", {{"type", type}, {"message", message}}}};
  return {{"error", {{"message", message}, {"type", type}, {"param", nullptr}, {"code", code}}}};
}

}  // namespace dyn::api
