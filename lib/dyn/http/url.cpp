// Worker base URLs: parsing and canonical form (issue 51.2).
#include "dyn/http/url.h"

namespace dyn::http {

namespace {
char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
std::string lowered(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = lower(c);
  return out;
}
}  // namespace

Expected<UpstreamUrl> UpstreamUrl::parse(std::string_view url) {
  UpstreamUrl u;
  u.text = std::string(url);
  auto bad = [&](std::string_view why) {
    return Error{"bad upstream url '" + std::string(url) + "': " + std::string(why) + " (want http://HOST:PORT)",
                 kExitUsage};
  };
  for (unsigned char c : url)
    if (c <= 0x20 || c == 0x7f) return bad("a space or control byte");
  if (url.find_first_of("?#") != std::string_view::npos) return bad("a query or fragment");
  size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return bad("no scheme");
  const std::string scheme = lowered(url.substr(0, scheme_end));
  if (scheme != "http" && scheme != "https") return bad("not http or https");
  u.tls = scheme == "https";
  size_t host_start = scheme_end + 3;
  size_t path_start = url.find('/', host_start);
  std::string_view authority =
      url.substr(host_start, path_start == std::string_view::npos ? std::string_view::npos : path_start - host_start);
  if (authority.find('@') != std::string_view::npos) return bad("credentials in the URL");
  // HOST[:PORT], HOST possibly "[v6]" (whose colons are inside the brackets).
  std::string_view host = authority, port;
  if (!authority.empty() && authority.front() == '[') {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad("an unclosed '['");
    host = authority.substr(0, close + 1);
    std::string_view rest = authority.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return bad("junk after ']'");
    if (!rest.empty()) port = rest.substr(1);
    if (host.size() == 2 || host.find_first_not_of("0123456789abcdefABCDEF:.[]") != std::string_view::npos)
      return bad("a bad IPv6 address");
  } else if (size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  if (host.empty()) return bad("no host");
  if (host.front() != '[' &&
      host.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_~%") !=
          std::string_view::npos)
    return bad("a bad host name");
  const std::string_view default_port = u.tls ? "443" : "80";
  if (!port.empty()) {
    if (port.find_first_not_of("0123456789") != std::string_view::npos) return bad("a port that is not a number");
    while (port.size() > 1 && port.front() == '0') port.remove_prefix(1);
    if (port.size() > 5 || std::stoi(std::string(port)) < 1 || std::stoi(std::string(port)) > 65535)
      return bad("a port outside 1..65535");
  }
  const std::string lhost = lowered(host);
  u.host = lhost.front() == '[' ? lhost.substr(1, lhost.size() - 2) : lhost;
  u.port = port.empty() ? std::string(default_port) : std::string(port);
  u.scheme_host_port = scheme + "://" + lhost + (u.port == default_port ? "" : ":" + u.port);
  // Trailing "/" and "/v1" segments, as often as they come, so the canonical form is a fixed point.
  std::string prefix = path_start == std::string_view::npos ? "" : std::string(url.substr(path_start));
  for (;;) {
    if (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
    else if (prefix.size() >= 3 && prefix.compare(prefix.size() - 3, 3, "/v1") == 0) prefix.resize(prefix.size() - 3);
    else break;
  }
  u.path_prefix = prefix;
  u.canonical = u.scheme_host_port + u.path_prefix;
  return u;
}

Expected<std::string> canonical_worker_url(std::string_view url) {
  auto u = UpstreamUrl::parse(url);
  if (!u) return u.error();
  return u->canonical;
}

}  // namespace dyn::http
