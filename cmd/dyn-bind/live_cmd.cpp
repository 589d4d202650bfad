// dyn-bind live: a router's live binding table from GET /v1/bindings, or its workers (GET /v1/workers).
#include <cstring>
#include <memory>

#include <fmt/format.h>
#include <httplib.h>

#include "commands.h"
#include "dyn/cli/format.h"
#include "dyn/cli/checks.h"
#include "dyn/base/error.h"
#include "dyn/base/json.h"
#include "dyn/http/client.h"
#include "dyn/metrics/affinity.h"

using namespace dyn;

namespace {

/// GET /v1/workers as JSONL (one worker a line) or a table of each worker's state.
int print_workers(const Json& body, const std::string& where, cli::Format format, cli::Sink& sink) {
  auto ws = body.find("workers");
  if (!body.is_object() || ws == body.end() || !ws->is_array())
    throw Fatal(kExitBadData, where + ": expected {\"workers\": [...]}");
  io::Output* out = &sink.get();
  if (!cli::as_table(format, *out)) {
    for (const Json& w : *ws) out->line(w.dump());
  } else {
    std::string t = fmt::format("{:<7} {:<8} {:<9} {:<6} {:<9} {:>9} {:>14}  {}\n", "worker", "state", "circuit",
                                "source", "in_flight", "active", "bound_sessions", "url");
    for (const Json& w : *ws) {
      auto text = [&](const char* k) { return w.contains(k) ? w[k].dump() : std::string("-"); };
      auto str = [&](const char* k) { return w.contains(k) && w[k].is_string() ? w[k].get<std::string>() : "-"; };
      std::string active =
          w.contains("load") && w["load"].contains("active_requests") ? w["load"]["active_requests"].dump() : "-";
      t += fmt::format("{:<7} {:<8} {:<9} {:<6} {:>9} {:>9} {:>14}  {}\n", text("worker"), str("state"), str("circuit"),
                       str("source"), text("in_flight"), active, text("bound_sessions"), str("url"));
    }
    out->write(t);
  }
  sink.close();
  return static_cast<int>(kExitOk);
}

}  // namespace

void setup_live(CLI::App& app, cli::Dispatch& dispatch) {
  struct Opts {
    std::string url;
    cli::Format format = cli::Format::kAuto;
    double timeout_secs = 5;
    bool workers = false;
    cli::OutputOptions out;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand("live", "The router's live binding table (GET /v1/bindings) as a table or JSONL");
  sub->add_option("--url", o->url, "Router base URL, e.g. http://127.0.0.1:8000 (or the full /v1/bindings URL)")
      ->required()
      ->type_name("URL");
  cli::add_format_option(*sub, o->format, {cli::Format::kAuto, cli::Format::kTable, cli::Format::kJson},
                         "Output format (json: one binding per line)");
  sub->add_option("--timeout-secs", o->timeout_secs, "Connect and read timeout")
      ->check(dyn::cli::positive())
      ->capture_default_str();
  sub->add_flag("--workers", o->workers,
                "Show the router's workers and their state (GET /v1/workers: serving, draining, down) instead");
  cli::add_output_options(*sub, o->out);
  dispatch.add_filter(sub, nullptr, &o->out, [o](cli::Sink& sink) {
    std::string base = o->url;
    if (base.find("://") == std::string::npos) base = "http://" + base;
    const auto slash = base.find('/', base.find("://") + 3);
    std::string path = slash == std::string::npos ? "" : base.substr(slash);
    if (slash != std::string::npos) base = base.substr(0, slash);
    while (!path.empty() && path.back() == '/') path.pop_back();
    const std::string want = o->workers ? "/v1/workers" : "/v1/bindings";
    for (const char* known : {"/v1/bindings", "/v1/workers"})
      if (path.size() >= std::strlen(known) && path.substr(path.size() - std::strlen(known)) == known)
        path.resize(path.size() - std::strlen(known));
    path += want;
    httplib::Client client(base);
    const auto secs = static_cast<time_t>(o->timeout_secs);
    const auto usecs = static_cast<time_t>((o->timeout_secs - static_cast<double>(secs)) * 1e6);
    client.set_connection_timeout(secs, usecs);
    client.set_read_timeout(secs, usecs);
    auto res = client.Get(path);
    if (!res && (res.error() == httplib::Error::Connection || res.error() == httplib::Error::ConnectionTimeout)) {
      // The wording every tool uses (issue 21.9), with the system's reason ("Connection refused"),
      // which cpp-httplib does not keep: it says only "Connection".
      std::string why;
      if (auto ep = http::Endpoint::parse(base))
        why = http::connect_failure_reason(ep->host, ep->port, o->timeout_secs);
      throw Fatal(kExitIo, fmt::format("cannot connect to {}{}: {}", base, path,
                                       why.empty() ? httplib::to_string(res.error()) : why));
    }
    if (!res)
      throw Fatal(kExitIo, fmt::format("{}{}: request failed: {}", base, path, httplib::to_string(res.error())));
    if (res->status != 200)
      throw Fatal(kExitIo, fmt::format("{}{}: HTTP {}: {}", base, path, res->status, res->body.substr(0, 200)));
    Json body;
    try {
      body = Json::parse(res->body);
    } catch (const std::exception& e) {
      throw Fatal(kExitBadData, fmt::format("{}{}: response is not JSON: {}", base, path, e.what()));
    }
    if (o->workers) return print_workers(body, base + path, o->format, sink);
    auto entries = metrics::parse_bindings(body);
    if (!entries) throw Fatal(kExitBadData, fmt::format("{}{}: {}", base, path, entries.error().message));
    io::Output* out = &sink.get();
    if (cli::as_table(o->format, *out)) out->write(metrics::bindings_table(*entries));
    else
      for (const Json& e : *entries) out->line(e.dump());
    sink.close();
    return static_cast<int>(kExitOk);
  });
}
