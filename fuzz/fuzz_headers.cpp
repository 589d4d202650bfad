// Fuzz target: request-header normalization (session::normalize, SPEC 1.1) and headers_from_json.
// Input: HTTP-style header lines "name:value" separated by '\n' (a line without ':' is a name
// with an empty value; values keep every byte, CR and NUL included). A name "#" plus one byte b is
// the identity header session::identity_header_names()[b % size] (lower case), so the fuzzer
// reaches every spelling of the family table without a dictionary of them; when the whole input is JSON,
// it also goes through headers_from_json (object or [[name, value], ...]). Properties checked: an
// identity has a non-empty session id of at most 256 bytes, trimmed, different from its parent,
// never mistakable for a subagent group key; agent_context survives to_json/from_json; header
// names are case-insensitive (upper-casing every name changes nothing); errors are HTTP 400; both
// with and without the alias spellings (NormalizeOptions::aliases), which only ever add a session.
#include <string>

#include "dyn/session/families.h"
#include "dyn/session/normalize.h"
#include "fuzz_util.h"

using dyn::session::HeaderList;
using dyn::session::Identity;

namespace {

bool trimmed(const std::string& s) {
  auto ws = [](char c) { return c == ' ' || c == '\t'; };
  return s.empty() || (!ws(s.front()) && !ws(s.back()));
}

void check_identity(const Identity& id) {
  if (!id.context) return;
  const auto& c = *id.context;
  FUZZ_CHECK(!c.session_id.empty());
  FUZZ_CHECK(c.session_id.size() <= dyn::session::kMaxSessionIdBytes);
  FUZZ_CHECK(c.parent_session_id.size() <= dyn::session::kMaxSessionIdBytes);
  FUZZ_CHECK(c.session_id != c.parent_session_id);
  FUZZ_CHECK(trimmed(c.session_id) && trimmed(c.parent_session_id));
  FUZZ_CHECK(!dyn::session::is_parent_group_key(c.session_id));
  auto back = dyn::session::AgentContext::from_json(c.to_json());
  FUZZ_CHECK(back && *back == c);
  FUZZ_CHECK(id.source != dyn::session::Source::kNone);
}

bool same(const dyn::Expected<Identity>& a, const dyn::Expected<Identity>& b) {
  if (a.ok() != b.ok()) return false;
  if (!a.ok()) return a.error().exit_code == b.error().exit_code;
  const Identity &x = *a, &y = *b;
  return x.context == y.context && x.source == y.source && x.x_request_id == y.x_request_id &&
         x.worker_instance_id == y.worker_instance_id && x.priority == y.priority && x.affinity_hint == y.affinity_hint;
}

size_t family_rank(dyn::session::Source s) {
  const auto& f = dyn::session::families();
  for (size_t i = 0; i < f.size(); ++i)
    if (f[i].source == s) return i;
  return f.size();
}

void run(const HeaderList& headers) {
  HeaderList upper = headers;
  for (auto& [name, value] : upper)
    for (char& ch : name)
      if (ch >= 'a' && ch <= 'z') ch = static_cast<char>(ch - 'a' + 'A');
  for (bool aliases : {false, true}) {
    const dyn::session::NormalizeOptions o{.aliases = aliases};
    auto id = dyn::session::normalize(headers, o);
    if (id.ok()) check_identity(*id);
    else FUZZ_CHECK(id.error().exit_code == 400 && !id.error().message.empty());
    FUZZ_CHECK(same(id, dyn::session::normalize(upper, o)));
    // Aliases only add spellings: a request with an identity without them has one with them
    // (unless an alias header conflicts with itself), from the same family or an earlier one.
    if (!aliases && id.ok() && id->context) {
      auto with = dyn::session::normalize(headers, dyn::session::NormalizeOptions{.aliases = true});
      FUZZ_CHECK(!with.ok() || (with->context && family_rank(with->source) <= family_rank(id->source)));
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in = dyn::fuzz::as_view(data, size);
  HeaderList headers;
  size_t pos = 0;
  while (pos < in.size()) {
    size_t nl = in.find('\n', pos);
    std::string_view line = in.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    size_t colon = line.find(':');
    std::string name(line.substr(0, colon));
    if (name.size() == 2 && name[0] == '#') {
      const auto& names = dyn::session::identity_header_names(/*aliases=*/true);
      name = names[static_cast<unsigned char>(name[1]) % names.size()];
    }
    headers.emplace_back(std::move(name), colon == std::string_view::npos ? "" : std::string(line.substr(colon + 1)));
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
  }
  run(headers);

  dyn::Json j = dyn::Json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded()) {
    auto list = dyn::session::headers_from_json(j);
    if (list.ok()) run(*list);
    else FUZZ_CHECK(list.error().exit_code == 3);
  }
  return 0;
}
