// Run configuration records (AIPerf's input_config, for dyn's tools).
#include "dyn/cli/run_config.h"

#include <openssl/evp.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>

#include "dyn/base/error.h"
#include "dyn/base/version.h"
#include "dyn/io/output.h"

namespace dyn::cli {

namespace {
std::vector<std::string>& argv_store() {
  static std::vector<std::string> v;
  return v;
}

}  // namespace

bool on_command_line(const CLI::Option* o) {
  const auto& argv = argv_store();
  for (size_t i = 1; i < argv.size(); ++i) {
    std::string w = argv[i].substr(0, argv[i].find('='));
    if (w == "--") break;
    for (auto& n : o->get_lnames())
      if (w == "--" + n) return true;
    for (auto& n : o->get_snames())
      if (w.size() >= 2 && w[0] == '-' && w[1] != '-' && w.substr(1, n.size()) == n) return true;
  }
  return false;
}

namespace {

std::string primary_name(const CLI::Option* o) {
  if (!o->get_lnames().empty()) return "--" + o->get_lnames().front();
  if (!o->get_snames().empty()) return "-" + o->get_snames().front();
  return o->get_name();
}

void add_options(const CLI::App& app, Json& options, Json& sources, Json& env) {
  for (const CLI::Option* o : app.get_options()) {
    if (o->get_group().empty()) continue;                              // hidden (--generate)
    if (o->get_lnames().empty() && o->get_snames().empty()) continue;  // positional: see inputs
    std::string name = primary_name(o);
    if (name == "--help" || name == "--version") continue;
    if (o->count() > 0) {
      const auto& res = o->results();
      if (o->get_expected_max() == 0) {
        std::string r = res.empty() ? "true" : res.back();
        options[name] = !(r == "false" || r == "0" || r == "-1" || r == "off");
      } else if (res.size() == 1 && o->get_expected_max() <= 1) {
        options[name] = res.front();
      } else {
        options[name] = res;
      }
      const std::string& var = o->get_envname();
      if (!var.empty() && !on_command_line(o) && std::getenv(var.c_str())) {
        sources[name] = "env " + var;
        env[var] = std::getenv(var.c_str());
      } else {
        sources[name] = "command line";
      }
    } else if (!o->get_default_str().empty()) {
      options[name] = o->get_default_str();
    }
  }
}
}  // namespace

const std::vector<std::string>& command_line() { return argv_store(); }

void set_command_line(int argc, char** argv) { argv_store().assign(argv, argv + argc); }

std::string file_sha256(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Fatal(kExitIo, path + ": cannot open for its checksum");
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1)
    throw Fatal(kExitIo, "SHA-256 is not available (OpenSSL)");
  std::vector<char> buf(1 << 16);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    if (in.gcount() > 0) EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) throw Fatal(kExitIo, path + ": read error while computing its checksum");
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(ctx.get(), md, &n);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < n; ++i) {
    out += hex[md[i] >> 4];
    out += hex[md[i] & 15];
  }
  return out;
}

std::unique_ptr<io::Output> open_run_record(const std::string& path) { return std::make_unique<io::Output>(path); }

void write_run_record(io::Output& out, const Json& config, const Json& summary) {
  out.line(Json{{"config", config}, {"summary", summary}}.dump(2));
  out.close();
}

std::vector<std::string> typed_flags(const CLI::App& app) {
  std::vector<std::string> out;
  auto add = [&out](const CLI::App& a) {
    for (const CLI::Option* o : a.get_options())
      if (on_command_line(o)) out.push_back(primary_name(o));
  };
  add(app);
  for (const CLI::App* sub : app.get_subcommands()) add(*sub);  // the parsed ones
  return out;
}

Json run_config(const CLI::App& app, const std::vector<std::string>& inputs) {
  Json c = Json::object();
  c["tool"] = app.get_name();
  c["version"] = kVersion;
  c["command_line"] = command_line();
  Json options = Json::object(), sources = Json::object(), env = Json::object();
  add_options(app, options, sources, env);
  for (const CLI::App* sub : app.get_subcommands()) {  // the parsed ones
    c["subcommand"] = sub->get_name();
    add_options(*sub, options, sources, env);
  }
  c["options"] = options;
  c["sources"] = sources;
  c["environment"] = env;
  Json in = Json::array();
  for (const auto& p : inputs.empty() ? std::vector<std::string>{"-"} : inputs) {
    Json f{{"path", p}};
    if (p != "-") {
      try {
        std::ifstream s(p, std::ios::binary | std::ios::ate);
        if (s) f["bytes"] = static_cast<uint64_t>(s.tellg());
        f["sha256"] = file_sha256(p);
      } catch (const Fatal& e) {
        f["error"] = e.what();
      }
    }
    in.push_back(f);
  }
  c["inputs"] = in;
  return c;
}

}  // namespace dyn::cli
