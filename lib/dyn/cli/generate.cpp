// Generators walk the CLI11 option tables so help, man page and completions never disagree.
#include "dyn/cli/generate.h"

#include <cctype>
#include <sstream>
#include <string>
#include <vector>

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
    if (o->get_group().empty()) continue;                              // hidden
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
    // The footer (a table the tool prints under --help) keeps its lines in the man page.
    std::istringstream footer(sub->get_footer());
    for (std::string line; std::getline(footer, line);)
      if (!line.empty()) subs << ".br\n" << roff_escape(line) << "\n";
    std::ostringstream so;
    man_options(*sub, so);
    if (!so.str().empty()) subs << so.str();
  }
  std::string text = template_text;
  if (text.empty()) {
    text = ".TH " + app.get_name() + " 1 \"\" \"dyn @VERSION@\" \"dyn manual\"\n.SH NAME\n" + app.get_name() + " \\- " +
           roff_escape(app.get_description()) + "\n.SH OPTIONS\n@OPTIONS@\n@SUBCOMMANDS@\n";
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

namespace {

/// The values an option accepts when its definition restricts them (CLI::IsMember): CLI11 puts the
/// validator's description "{a,b,c}" after the type name ("TEXT:{a,b,c}"), so the choices come
/// from the same definition as the parser's check. Empty for free-form options.
std::vector<std::string> option_choices(const CLI::Option* o) {
  std::vector<std::string> out;
  std::string tn = o->get_type_name();
  size_t open = tn.rfind(":{");
  if (open == std::string::npos || tn.back() != '}') return out;
  std::string body = tn.substr(open + 2, tn.size() - open - 3);
  size_t pos = 0;
  while (pos <= body.size()) {
    size_t comma = body.find(',', pos);
    if (comma == std::string::npos) comma = body.size();
    std::string v = body.substr(pos, comma - pos);
    if (!v.empty()) out.push_back(v);
    pos = comma + 1;
  }
  return out;
}

bool takes_value(const CLI::Option* o) { return o->get_expected_max() != 0; }

/// Whether an option's value is a path (completed with file names) rather than free text.
bool value_is_path(const CLI::Option* o) {
  std::string tn = o->get_type_name();
  for (auto& c : tn) c = static_cast<char>(toupper(static_cast<unsigned char>(c)));
  return tn.find("FILE") != std::string::npos || tn.find("PATH") != std::string::npos ||
         tn.find("DIR") != std::string::npos;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

/// Completion contexts: the tool alone ("") with its own options and subcommands, then one per
/// subcommand with only that subcommand's options (CLI11 does not pass a parent's options through
/// to a subcommand here, so e.g. --version after `serve` is an error and is not offered).
struct Context {
  std::string sub;  // empty: top level
  const CLI::App* app;
};

std::vector<Context> contexts(const CLI::App& app) {
  std::vector<Context> out{{"", &app}};
  for (const CLI::App* sub : app.get_subcommands({})) out.push_back({sub->get_name(), sub});
  return out;
}

std::vector<std::string> all_names(const CLI::Option* o) {
  std::vector<std::string> n;
  for (auto& s : o->get_snames()) n.push_back("-" + s);
  for (auto& l : o->get_lnames()) n.push_back("--" + l);
  return n;
}

}  // namespace

std::string generate_bash(const CLI::App& app) {
  std::ostringstream os;
  std::string fn = fn_name(app.get_name());
  std::vector<std::string> subnames;
  for (const CLI::App* sub : app.get_subcommands({})) subnames.push_back(sub->get_name());
  os << "# bash completion for " << app.get_name() << " (generated from its option table)\n";
  os << fn << "() {\n";
  os << "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"\" sub=\"\" i w\n";
  os << "  (( COMP_CWORD > 0 )) && prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n";
  // `--opt=value`: readline splits at '=' (COMP_WORDBREAKS), giving "--opt" "=" "value".
  os << "  if [[ \"$cur\" == = ]]; then cur=\"\"; elif [[ \"$prev\" == = ]] && (( COMP_CWORD > 1 )); then "
        "prev=\"${COMP_WORDS[COMP_CWORD-2]}\"; fi\n";
  if (!subnames.empty()) {
    os << "  for ((i = 1; i < COMP_CWORD; i++)); do\n    w=\"${COMP_WORDS[i]}\"\n    case \"$w\" in "
       << join(subnames, "|") << ") sub=\"$w\"; break;; esac\n  done\n";
  }
  // Option values: choices from the definition, file names for paths, nothing for free text.
  os << "  case \"$sub:$prev\" in\n";
  for (const Context& c : contexts(app)) {
    for (const CLI::Option* o : visible_options(*c.app)) {
      if (!takes_value(o)) continue;
      std::vector<std::string> pats;
      for (auto& n : all_names(o)) pats.push_back(c.sub + ":" + n);
      auto ch = option_choices(o);
      os << "    " << join(pats, "|") << ") ";
      if (!ch.empty())
        os << "compopt +o default 2>/dev/null; COMPREPLY=( $(compgen -W \"" << join(ch, " ")
           << "\" -- \"$cur\") ); return;;\n";
      else if (value_is_path(o)) os << "COMPREPLY=( $(compgen -f -- \"$cur\") ); return;;\n";
      else os << "compopt +o default 2>/dev/null; COMPREPLY=(); return;;\n";
    }
  }
  os << "  esac\n  local words\n  case \"$sub\" in\n";
  for (const Context& c : contexts(app)) {
    std::vector<std::string> l;
    collect_long(*c.app, l);
    os << "    " << (c.sub.empty() ? "\"\"" : c.sub) << ") words=\"" << join(l, " ") << "\";;\n";
  }
  os << "  esac\n";
  os << "  if [[ \"$cur\" == -* ]]; then COMPREPLY=( $(compgen -W \"$words\" -- \"$cur\") )\n";
  if (!subnames.empty())
    os << "  elif [[ -z \"$sub\" ]]; then COMPREPLY=( $(compgen -W \"" << join(subnames, " ") << "\" -- \"$cur\") )\n";
  os << "  else COMPREPLY=( $(compgen -f -- \"$cur\") ); fi\n}\n";
  os << "complete -o default -F " << fn << " " << app.get_name() << "\n";
  return os.str();
}

std::string generate_zsh(const CLI::App& app) {
  std::ostringstream os;
  std::string fn = fn_name(app.get_name());
  os << "#compdef " << app.get_name() << "\n# zsh completion for " << app.get_name()
     << " (generated from its option table)\n";
  auto esc = [](const std::string& s) {
    std::string o;
    for (char c : s) {
      if (c == '\'') o += "'\\''";
      else if (c == '[' || c == ']' || c == ':' || c == '\\') o += std::string("\\") + c;
      else o += c;
    }
    return o;
  };
  // One _arguments spec per option name: '--name=[description]:value:action'.
  auto specs = [&](const CLI::App& a) {
    std::ostringstream s;
    for (const CLI::Option* o : visible_options(a)) {
      for (auto& n : all_names(o)) {
        bool repeat = o->get_expected_max() > 1;
        s << "    '" << (repeat ? "*" : "") << n;
        if (takes_value(o) && n.rfind("--", 0) == 0) s << "=";
        s << "[" << esc(o->get_description()) << "]";
        if (takes_value(o)) {
          auto ch = option_choices(o);
          std::string tn = o->get_type_name();
          tn = tn.substr(0, tn.find(':'));
          if (tn.empty()) tn = "value";
          s << ":" << esc(tn) << ":";
          if (!ch.empty()) s << "(" << join(ch, " ") << ")";
          else if (value_is_path(o)) s << "_files";
          else s << " ";
        }
        s << "' \\\n";
      }
    }
    return s.str();
  };
  auto subs = app.get_subcommands({});
  os << fn << "() {\n";
  if (subs.empty()) {
    os << "  _arguments -s \\\n" << specs(app) << "    '*:file:_files'\n}\n";
  } else {
    os << "  local curcontext=\"$curcontext\" state line\n  typeset -A opt_args\n";
    os << "  _arguments -C -s \\\n" << specs(app) << "    '1:command:->command' \\\n    '*::arg:->args'\n";
    os << "  case $state in\n    command)\n      local -a subs\n      subs=(\n";
    for (const CLI::App* sub : subs)
      os << "        '" << sub->get_name() << ":" << esc(sub->get_description()) << "'\n";
    os << "      )\n      _describe 'command' subs ;;\n    args)\n      case $line[1] in\n";
    for (const CLI::App* sub : subs)
      os << "        " << sub->get_name() << ")\n          _arguments -s \\\n"
         << specs(*sub) << "            '*:file:_files' ;;\n";
    os << "      esac ;;\n  esac\n}\n";
  }
  os << fn << " \"$@\"\n";
  return os.str();
}

std::string generate_fish(const CLI::App& app) {
  std::ostringstream os;
  const std::string& name = app.get_name();
  auto esc = [](const std::string& s) {
    std::string o;
    for (char c : s) o += c == '\'' ? std::string("\\'") : c == '\\' ? std::string("\\\\") : std::string(1, c);
    return o;
  };
  os << "# fish completion for " << name << " (generated from its option table)\n";
  auto subs = app.get_subcommands({});
  for (const CLI::App* sub : subs)
    os << "complete -c " << name << " -n '__fish_use_subcommand' -a " << sub->get_name() << " -f -d '"
       << esc(sub->get_description()) << "'\n";
  for (const Context& c : contexts(app)) {
    std::string cond;
    if (!subs.empty())
      cond = c.sub.empty() ? " -n '__fish_use_subcommand'" : " -n '__fish_seen_subcommand_from " + c.sub + "'";
    for (const CLI::Option* o : visible_options(*c.app)) {
      os << "complete -c " << name << cond;
      for (auto& s : o->get_snames()) os << " -s " << s;
      for (auto& l : o->get_lnames()) os << " -l " << l;
      if (takes_value(o)) {
        auto ch = option_choices(o);
        if (!ch.empty()) os << " -x -a '" << esc(join(ch, " ")) << "'";
        else if (value_is_path(o)) os << " -r -F";
        else os << " -x";
      }
      os << " -d '" << esc(o->get_description()) << "'\n";
    }
  }
  return os.str();
}

}  // namespace dyn::cli
