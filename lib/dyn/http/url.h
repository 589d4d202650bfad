// Worker base URLs: parsing and the one canonical form a worker is named by (issue 51.2).
#pragma once

#include <string>
#include <string_view>

#include "dyn/base/error.h"

namespace dyn::http {

/// An upstream base URL "http://HOST:PORT[/PREFIX]". A trailing "/" or "/v1" is dropped from the
/// prefix because request paths already start with /v1 (so "http://w:8000/v1" works as users
/// write it for OpenAI clients).
/// A worker is named by its canonical URL everywhere (flags, the admin API, the shared binding
/// store, traces, KV-event pairing: issue 51.2), so "http://h:8000", "http://h:8000/" and
/// "HTTP://H:8000/v1" are one worker: scheme and host in lower case (case-insensitive by RFC 3986
/// 3.1 and 3.2.2), the port without leading zeros and left out when it is the scheme's default
/// (80, 443: WHATWG URL serialization), the prefix without trailing "/" or "/v1" segments. It is
/// a fixed point: parse(canonical).canonical == canonical (fuzz_worker_url).
struct UpstreamUrl {
  std::string text;              ///< as given
  std::string canonical;         ///< scheme_host_port + path_prefix: the worker's one name
  std::string scheme_host_port;  ///< "http://127.0.0.1:8000" (canonical: lower case, no default port)
  std::string path_prefix;       ///< "" or "/prefix" (no trailing slash, no trailing /v1)
  bool tls = false;              ///< https
  std::string host;              ///< "127.0.0.1" in lower case (an IPv6 literal without its brackets)
  std::string port;              ///< "8000"; 80 or 443 when the URL names none
  /// Errors (exit code 2) name the problem: not http(s)://host[:port][/path], a port that is not
  /// a number in 1..65535, credentials, a query or fragment, a space or control byte.
  static Expected<UpstreamUrl> parse(std::string_view url);
};

/// The canonical form of worker URL `url` (UpstreamUrl::canonical). Same errors as parse.
Expected<std::string> canonical_worker_url(std::string_view url);

}  // namespace dyn::http
