// Generators walk the CLI11 option tables so help, man page and completions never disagree.
#include "dyn/cli/generate.h"

#include <sstream>

#include "dyn/base/version.h"

namespace dyn::cli {

namespace {

std::string roff_escape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '\\') out += "\\e";
    else if (c == '-') out += "\\-";
    else if ((c == '.' || c == '\'') && (i == 0 || s[i - 1] == '\n')) out += "\\&" + std::string(1, c);
    else out += c;
  }
  return out;
}

std::vector<const CLI::Option*> visible_options(const CLI::App& app) {
  std::vector<const CLI::Option*> out;
  for (const CLI::Option* o : app.get_options()) {
    if (o->get_group().empty()) continue;  // hidden
    if (o->get_lnames().empty() && o->get_snames().empty()) continue;  // positional
    out.push_back(o);
  }
  return out;
}

std::string option_names(const CLI::Option* o, const char* sep) {
  std::string s;
  for (auto& n : o->get_snames()) s += (s.empty() ? "" : sep) + std::string("-") + n;
  for (auto& n : o->get_lnames()) s += (s.empty() ? "" : sep) + std::string("--") + n;
  return s;
}

void man_options(const CLI::App& app, std::ostringstream& os) {
  for (const CLI::Option* o : visible_options(app)) {
    os << ".TP\n\\fB" << roff_escape(option_names(o, ", ")) << "\\fR";
    if (o->get_expected_max() != 0) {
      std::string tn = o->get_type_name();
      if (tn.empty()) tn = "VALUE";
      os << " \\fI" << roff_escape(tn) << "\\fR";
    }
    os << "\n" << roff_escape(o->get_description());
    if (!o->get_default_str().empty()) os << " (default: " << roff_escape(o->get_default_str()) << ")";
    if (!o->get_envname().empty()) os << " [env: " << roff_escape(o->get_envname()) << "]";
    os << "\n";
  }
}

void collect_long(const CLI::App& app, std::vector<std::string>& out) {
  for (const CLI::Option* o : visible_options(app))
    for (auto& n : o->get_lnames()) out.push_back("--" + n);
}

std::string fn_name(const std::string& tool) {
  std::string s = "_" + tool;
  for (auto& c : s)
    if (c == '-') c = '_';
  return s;
}

}  // namespace

std::string generate_man(const CLI::App& app, const std::string& template_text) {
  std::ostringstream opts;
  man_options(app, opts);
  std::ostringstream subs;
  for (const CLI::App* sub : app.get_subcommands({})) {
    subs << ".SS " << sub->get_name() << "\n" << roff_escape(sub->get_description()) << "\n";
    std::ostringstream so;
    man_options(*sub, so);
    if (!so.str().empty()) subs << so.str();
  }
  std::string text = template_text;
  if (text.empty()) {
    text = ".TH " + app.get_name() + " 1 \"\" \"dyn @VERSION@\" \"dyn manual\"\n.SH NAME\n" +
           app.get_name() + " \\- " + roff_escape(app.get_description()) +
           "\n.SH OPTIONS\n@OPTIONS@\n@SUBCOMMANDS@\n";
  }
  auto replace = [&](const std::string& key, const std::string& val) {
    for (size_t p = text.find(key); p != std::string::npos; p = text.find(key, p + val.size()))
      text.replace(p, key.size(), val);
  };
  std::string o = opts.str();
  if (!o.empty() && o.back() == '\n') o.pop_back();
  std::string s = subs.str();
  if (!s.empty() && s.back() == '\n') s.pop_back();
  replace("@OPTIONS@", o);
  replace("@SUBCOMMANDS@", s);
  replace("@VERSION@", kVersion);
  return text;
}

std::string generate_bash(const CLI::App& app) {
  std::ostringstream os;
  std::string fn = fn_name(app.get_name());
  os << "# bash completion for " << app.get_name() << " (generated)\n";
  os << fn << "() {\n  local cur=\"${COMP_WORDS[COMP_CWORD]}\" sub=\"\" w\n";
  os << "  for w in \"${COMP_WORDS[@]:1:COMP_CWORD-1}\"; do case \"$w\" in -*) ;; *) sub=\"$w\"; break;; esac; done\n";
  os << "  local words\n  case \"$sub\" in\n";
  std::string subnames;
  for (const CLI::App* sub : app.get_subcommands({})) {
    subnames += sub->get_name() + " ";
    std::vector<std::string> l;
    collect_long(*sub, l);
    collect_long(app, l);
    os << "    " << sub->get_name() << ") words=\"";
    for (auto& x : l) os << x << " ";
    os << "\";;\n";
  }
  std::vector<std::string> top;
  collect_long(app, top);
  os << "    *) words=\"" << subnames;
  for (auto& x : top) os << x << " ";
  os << "\";;\n  esac\n";
  os << "  if [[ \"$cur\" == -* || -z \"$sub\" ]]; then COMPREPLY=( $(compgen -W \"$words\" -- \"$cur\") ); "
        "else COMPREPLY=( $(compgen -f -- \"$cur\") ); fi\n}\n";
  os << "complete -o default -F " << fn << " " << app.get_name() << "\n";
  return os.str();
}

std::string generate_zsh(const CLI::App& app) {
  std::ostringstream os;
  os << "#compdef " << app.get_name() << "\n# zsh completion for " << app.get_name() << " (generated)\n";
  auto esc = [](std::string s) {
    std::string o;
    for (char c : s) {
      if (c == '\'') o += "'\\''";
      else if (c == '[' || c == ']' || c == ':') o += std::string("\\") + c;
      else o += c;
    }
    return o;
  };
  auto subs = app.get_subcommands({});
  os << fn_name(app.get_name()) << "() {\n  local -a opts subs\n  opts=(\n";
  for (const CLI::Option* o : visible_options(app))
    for (auto& n : o->get_lnames()) os << "    '--" << n << "[" << esc(o->get_description()) << "]'\n";
  for (const CLI::App* sub : subs)
    for (const CLI::Option* o : visible_options(*sub))
      for (auto& n : o->get_lnames()) os << "    '--" << n << "[" << esc(o->get_description()) << "]'\n";
  os << "  )\n  subs=(\n";
  for (const CLI::App* sub : subs) os << "    '" << sub->get_name() << ":" << esc(sub->get_description()) << "'\n";
  os << "  )\n  if (( CURRENT == 2 )) && (( ${#subs} )); then _describe 'command' subs; fi\n";
  os << "  _arguments -s $opts '*:file:_files'\n}\n" << fn_name(app.get_name()) << " \"$@\"\n";
  return os.str();
}

std::string generate_fish(const CLI::App& app) {
  std::ostringstream os;
  const std::string& name = app.get_name();
  auto esc = [](std::string s) {
    std::string o;
    for (char c : s) o += c == '\'' ? std::string("\\'") : std::string(1, c);
    return o;
  };
  os << "# fish completion for " << name << " (generated)\n";
  auto subs = app.get_subcommands({});
  std::string subnames;
  for (const CLI::App* sub : subs) subnames += sub->get_name() + " ";
  for (const CLI::App* sub : subs)
    os << "complete -c " << name << " -n '__fish_use_subcommand' -a " << sub->get_name() << " -d '"
       << esc(sub->get_description()) << "'\n";
  for (const CLI::Option* o : visible_options(app))
    for (auto& n : o->get_lnames())
      os << "complete -c " << name << " -l " << n << " -d '" << esc(o->get_description()) << "'\n";
  for (const CLI::App* sub : subs)
    for (const CLI::Option* o : visible_options(*sub))
      for (auto& n : o->get_lnames())
        os << "complete -c " << name << " -n '__fish_seen_subcommand_from " << sub->get_name()
           << "' -l " << n << " -d '" << esc(o->get_description()) << "'\n";
  return os.str();
}

}  // namespace dyn::cli
