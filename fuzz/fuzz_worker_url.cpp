// Fuzz target: worker URL canonicalization (http::UpstreamUrl, issue 51.2). Input: any bytes, read
// as a worker URL. Properties checked for every URL that parses: its canonical form parses again
// to the same canonical form and the same parts (a fixed point, so a URL written by one replica
// and read by another names the same worker); the canonical scheme and host have no upper-case
// letter and no default port; spelling the scheme and host in upper case, or adding a trailing
// "/", changes nothing. A URL that does not parse fails with a usage error (exit 2), never
// anything else.
#include <string>
#include <string_view>

#include "dyn/http/url.h"
#include "fuzz_util.h"

using dyn::http::UpstreamUrl;

namespace {

bool same_parts(const UpstreamUrl& a, const UpstreamUrl& b) {
  return a.canonical == b.canonical && a.scheme_host_port == b.scheme_host_port && a.path_prefix == b.path_prefix &&
         a.tls == b.tls && a.host == b.host && a.port == b.port;
}

/// `url` with its scheme and authority in upper case (the path as it was).
std::string upper_authority(std::string_view url) {
  std::string s(url);
  size_t sep = s.find("://");
  size_t end = sep == std::string::npos ? 0 : s.find('/', sep + 3);
  if (end == std::string::npos) end = s.size();
  for (size_t i = 0; i < end; ++i)
    if (s[i] >= 'a' && s[i] <= 'z') s[i] = static_cast<char>(s[i] - 'a' + 'A');
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto u = UpstreamUrl::parse(in);
  if (!u) {
    FUZZ_CHECK(u.error().exit_code == dyn::kExitUsage);
    FUZZ_CHECK(!u.error().message.empty());
    return 0;
  }
  auto again = UpstreamUrl::parse(u->canonical);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(same_parts(*u, *again));
  FUZZ_CHECK(again->canonical == again->text);
  for (char c : u->scheme_host_port) FUZZ_CHECK(!(c >= 'A' && c <= 'Z'));
  FUZZ_CHECK(u->scheme_host_port.size() < 3 ||
             u->scheme_host_port.compare(u->scheme_host_port.size() - 3, 3, ":80") != 0 || u->tls);
  FUZZ_CHECK(u->path_prefix.empty() || u->path_prefix.back() != '/');
  auto canon = dyn::http::canonical_worker_url(in);
  FUZZ_CHECK(canon.ok() && *canon == u->canonical);
  auto upper = UpstreamUrl::parse(upper_authority(in));
  FUZZ_CHECK(upper.ok() && upper->canonical == u->canonical);
  auto slash = UpstreamUrl::parse(std::string(in) + "/");
  FUZZ_CHECK(slash.ok() && slash->canonical == u->canonical);
  return 0;
}
