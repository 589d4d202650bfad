// dyn-bind live: a router's live binding table from GET /v1/bindings.
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

void setup_live(CLI::App& app, cli::Dispatch& dispatch) {
  struct Opts {
    std::string url;
    cli::Format format = cli::Format::kAuto;
    double timeout_secs = 5;
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
  cli::add_output_options(*sub, o->out);
  dispatch.add_filter(sub, nullptr, &o->out, [o](cli::Sink& sink) {
    std::string base = o->url;
    if (base.find("://") == std::string::npos) base = "http://" + base;
    const auto slash = base.find('/', base.find("://") + 3);
    std::string path = slash == std::string::npos ? "" : base.substr(slash);
    if (slash != std::string::npos) base = base.substr(0, slash);
    while (!path.empty() && path.back() == '/') path.pop_back();
    if (path.size() < 12 || path.substr(path.size() - 12) != "/v1/bindings") path += "/v1/bindings";
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
