#include "shim/ctl/cli.h"

#include <algorithm>
#include <cstdio>
#include <regex>
#include <set>

#include "shim/core/version.h"  // PODSHIM_COMMIT, generated

#ifndef PODSHIM_VERSION
#error "PODSHIM_VERSION must be defined (meson's project version, shim/ctl/meson.build)"
#endif

namespace podshim::ctl {

using nlohmann::json;

std::string_view version() { return PODSHIM_VERSION; }
std::string_view build_commit() { return PODSHIM_COMMIT; }
std::string version_line() {
  std::string out = "podshimctl " + std::string(version());
  if (build_commit() != "unknown") out += " (commit " + std::string(build_commit()) + ")";
  return out;
}

GlobalOptions& globals() {
  static GlobalOptions g;
  return g;
}

// ---- formats and options -------------------------------------------------------

namespace {
constexpr std::string_view kFormatNames[] = {"table", "wide", "json", "yaml"};
}  // namespace

std::string_view to_string(Format f) { return kFormatNames[static_cast<int>(f)]; }

std::optional<Format> parse_format(std::string_view s) {
  for (size_t i = 0; i < std::size(kFormatNames); ++i)
    if (s == kFormatNames[i]) return static_cast<Format>(i);
  return std::nullopt;
}

std::vector<Format> all_formats() { return {Format::Table, Format::Wide, Format::Json, Format::Yaml}; }

std::string format_list(const std::vector<Format>& formats) {
  std::string out;
  for (size_t i = 0; i < formats.size(); ++i) {
    if (i) out += i + 1 == formats.size() ? " or " : ", ";
    out += to_string(formats[i]);
  }
  return out;
}

OptionResult take_output_option(int argc, char** argv, int* i, GlobalOptions* o, std::string* error) {
  std::string_view a = argv[*i];
  std::string_view value;
  if (a == "-o" || a == "--output") {
    if (*i + 1 >= argc) {
      *error = std::string(a) + " needs a value (" + format_list(all_formats()) + ")";
      return OptionResult::Error;
    }
    value = argv[++*i];
  } else if (a.starts_with("--output=")) {
    value = a.substr(9);
  } else if (a.starts_with("-o=")) {
    value = a.substr(3);
  } else if (a.starts_with("-o") && a.size() > 2 && a[2] != '-') {
    value = a.substr(2);  // -ojson, as getopt reads it
  } else {
    return OptionResult::NotMine;
  }
  o->output = std::string(value);
  return OptionResult::Taken;
}

OptionResult take_global_option(int argc, char** argv, int* i, GlobalOptions* o, std::string* error) {
  std::string_view a = argv[*i];
  if (a == "--socket") {
    if (*i + 1 >= argc) {
      *error = "--socket needs a value (a PATH)";
      return OptionResult::Error;
    }
    o->socket = argv[++*i];
    return OptionResult::Taken;
  }
  if (a.starts_with("--socket=")) {
    o->socket = std::string(a.substr(9));
    return OptionResult::Taken;
  }
  return take_output_option(argc, argv, i, o, error);
}

std::optional<Format> resolve_format(const GlobalOptions& o, const std::vector<Format>& allowed, Format fallback,
                                     std::string* error) {
  if (!o.output) return fallback;
  auto f = parse_format(*o.output);
  if (f && std::find(allowed.begin(), allowed.end(), *f) != allowed.end()) return *f;
  if (allowed.empty()) {
    *error = "this command takes no -o (output format '" + *o.output + "')";
  } else {
    *error = std::string(f ? "output format '" : "unknown output format '") + *o.output + "'" +
             (f ? " is not offered here" : "") + " (allowed: " + format_list(allowed) + ")";
  }
  return std::nullopt;
}

std::optional<Format> command_format(std::string_view who, const GlobalOptions& o,
                                     const std::vector<Format>& allowed, Format fallback) {
  std::string err;
  auto f = resolve_format(o, allowed, fallback, &err);
  if (!f) std::fprintf(stderr, "podshimctl %.*s: %s\n", static_cast<int>(who.size()), who.data(), err.c_str());
  return f;
}

int usage_error_try_help(std::string_view who, std::string_view message) {
  std::fprintf(stderr, "podshimctl %.*s: %.*s\nTry 'podshimctl %.*s --help'.\n", static_cast<int>(who.size()),
               who.data(), static_cast<int>(message.size()), message.data(), static_cast<int>(who.size()), who.data());
  return kExitUsage;
}

// ---- output --------------------------------------------------------------------

std::string render_table(const Table& t) {
  std::vector<size_t> w(t.header.size(), 0);
  auto widen = [&](const std::vector<std::string>& r) {
    if (w.size() < r.size()) w.resize(r.size(), 0);
    for (size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], r[i].size());
  };
  widen(t.header);
  for (const auto& r : t.rows) widen(r);
  std::string out;
  auto line = [&](const std::vector<std::string>& r) {
    for (size_t i = 0; i < r.size(); ++i) {
      out += r[i];
      if (i + 1 < r.size()) out += std::string(w[i] - r[i].size() + 2, ' ');
    }
    out += '\n';
  };
  if (!t.header.empty()) line(t.header);
  for (const auto& r : t.rows) line(r);
  return out;
}

YAML::Node to_yaml_node(const json& j) {
  switch (j.type()) {
    case json::value_t::object: {
      YAML::Node n(YAML::NodeType::Map);
      for (const auto& [k, v] : j.items()) n[k] = to_yaml_node(v);
      return n;
    }
    case json::value_t::array: {
      YAML::Node n(YAML::NodeType::Sequence);
      for (const auto& v : j) n.push_back(to_yaml_node(v));
      return n;
    }
    case json::value_t::string: {
      // "!" is the tag YAML gives a quoted scalar: this one is a string,
      // whatever it looks like (the emitter below quotes it when needed).
      YAML::Node n(j.get<std::string>());
      n.SetTag("!");
      return n;
    }
    case json::value_t::boolean:
      return YAML::Node(j.get<bool>() ? "true" : "false");
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      return YAML::Node(j.dump());
    default:
      return YAML::Node(YAML::NodeType::Null);
  }
}

namespace {

// Whether a plain scalar `s` would be read as something other than a string
// (YAML 1.2 core schema, plus 1.1's yes/no/on/off and sexagesimal numbers
// that older readers such as go-yaml v2 and PyYAML still resolve, and dates).
bool looks_typed(const std::string& s) {
  static const std::set<std::string> words = {"true", "false", "yes", "no", "on", "off", "y", "n", "null", "~"};
  std::string lower = s;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s.empty() || words.count(lower)) return true;
  static const std::regex typed(
      R"re([-+]?(\.[0-9]+|[0-9][0-9_]*(\.[0-9_]*)?)([eE][-+]?[0-9]+)?)re"  // int, float
      R"re(|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN))re"
      R"re(|0[xX][0-9a-fA-F_]+|0[oO]?[0-7_]+|0[bB][01_]+)re"             // hex, octal, binary
      R"re(|[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?)re"               // 1.1 sexagesimal
      R"re(|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([Tt ].*)?)re");                 // timestamp
  return std::regex_match(s, typed);
}

void emit(YAML::Emitter& e, const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map:
      if (n.size() == 0) e << YAML::Flow;
      e << YAML::BeginMap;
      for (const auto& kv : n) {
        e << YAML::Key;
        emit(e, kv.first);
        e << YAML::Value;
        emit(e, kv.second);
      }
      e << YAML::EndMap;
      break;
    case YAML::NodeType::Sequence:
      if (n.size() == 0) e << YAML::Flow;
      e << YAML::BeginSeq;
      for (const auto& v : n) emit(e, v);
      e << YAML::EndSeq;
      break;
    case YAML::NodeType::Scalar:
      if (n.Tag() == "!" && looks_typed(n.Scalar())) e << YAML::DoubleQuoted;
      e << n.Scalar();
      break;
    default:
      e << YAML::Null;
  }
}

}  // namespace

std::string to_yaml(const json& j) {
  YAML::Emitter e;
  e.SetNullFormat(YAML::LowerNull);
  e.SetIndent(2);
  e.SetMapFormat(YAML::Block);
  e.SetSeqFormat(YAML::Block);
  emit(e, to_yaml_node(j));
  std::string out = e.c_str();
  if (out.empty() || out.back() != '\n') out += '\n';
  return out;
}

std::string render_document(const json& j, Format f) {
  if (f == Format::Yaml) return to_yaml(j);
  return j.dump(2) + "\n";
}

void print_listing(const json& doc, Format f, const Table& table, std::ostream& out, std::ostream& err) {
  if (is_document(f)) {
    out << render_document(doc, f);
    return;
  }
  if (table.rows.empty()) {
    err << kNoResources << "\n";
    return;
  }
  out << render_table(table);
}

// ---- help ----------------------------------------------------------------------

const std::vector<Flag>& global_flags() {
  static const std::vector<Flag> flags = {
      socket_flag(),
      output_flag(all_formats()),
      Flag{.name = "--version", .help = "print podshimctl's version and exit"},
      Flag{.name = "--help", .short_name = "-h", .help = "show this help; 'podshimctl COMMAND --help' shows a command's"},
  };
  return flags;
}

namespace {

Flag help_flag() { return Flag{.name = "--help", .short_name = "-h", .help = "show this help"}; }

std::string flag_lines(const std::vector<Flag>& flags) {
  std::vector<std::pair<std::string, std::string>> rows;
  for (const auto& f : flags) {
    std::string left = f.short_name.empty() ? "    " : f.short_name + ", ";
    left += f.name;
    if (!f.value.empty()) left += " " + f.value;
    rows.emplace_back(std::move(left), f.help);
  }
  size_t w = 0;
  for (const auto& r : rows) w = std::max(w, r.first.size());
  std::string out;
  for (const auto& [l, h] : rows) out += "  " + l + std::string(w - l.size() + 2, ' ') + h + "\n";
  return out;
}

const std::vector<Format>& formats_of(const Command& c, const Subcommand* s) {
  return s && !s->formats.empty() ? s->formats : c.formats;
}

// Every flag `podshimctl CMD [SUB]` takes, in help order: the subcommand's,
// the command's, -o, -h.
std::vector<Flag> flags_of(const Command& c, const Subcommand* s) {
  std::vector<Flag> out;
  if (s) out.insert(out.end(), s->flags.begin(), s->flags.end());
  out.insert(out.end(), c.flags.begin(), c.flags.end());
  if (const auto& f = formats_of(c, s); !f.empty()) {
    Flag o = output_flag(f);
    o.help += " (default: " + (c.plain_output.empty() ? std::string(to_string(f.front())) : c.plain_output) + ")";
    out.push_back(std::move(o));
  }
  out.push_back(help_flag());
  return out;
}

std::string usage_line(const Command& c, const Subcommand* s) {
  std::string u = "podshimctl " + c.name;
  if (s) u += " " + s->name;
  const std::string& args = s ? s->args : c.args;
  if (!args.empty()) u += " " + args;
  return u + " [flags]";
}

}  // namespace

const Subcommand* find_subcommand(const Command& c, std::string_view name) {
  for (const auto& s : c.subcommands) {
    if (s.name == name) return &s;
    for (const auto& a : s.aliases)
      if (a == name) return &s;
  }
  return nullptr;
}

std::string command_help(const Command& c, const Subcommand* sub) {
  std::string out;
  if (!sub && !c.subcommands.empty()) {
    for (size_t i = 0; i < c.subcommands.size(); ++i)
      out += (i ? "       " : "Usage: ") + usage_line(c, &c.subcommands[i]) + "\n";
  } else {
    out += "Usage: " + usage_line(c, sub) + "\n";
  }
  auto sentence = [](std::string s) {
    if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
    return s + ".\n";
  };
  out += "\n" + (sub ? sentence(sub->summary) : (c.description.empty() ? sentence(c.summary) : c.description));
  if (!sub && !c.subcommands.empty()) {
    out += "\nSubcommands:\n";
    size_t w = 0;
    for (const auto& s : c.subcommands) w = std::max(w, s.name.size());
    for (const auto& s : c.subcommands) {
      std::string aka;
      for (const auto& a : s.aliases) aka += (aka.empty() ? " (also " : ", ") + a;
      if (!aka.empty()) aka += ")";
      out += "  " + s.name + std::string(w - s.name.size() + 2, ' ') + s.summary + aka + "\n";
    }
  }
  out += "\nFlags:\n" + flag_lines(flags_of(c, sub));
  if (!sub && std::any_of(c.subcommands.begin(), c.subcommands.end(), [](const Subcommand& s) {
        return !s.flags.empty() || !s.formats.empty();
      }))
    out += "Run 'podshimctl " + c.name + " SUBCOMMAND --help' for a subcommand's own flags.\n";
  std::string examples;
  const std::string prefix = "podshimctl " + c.name + (sub ? " " + sub->name : "");
  for (const auto& e : c.examples)
    if (e == prefix || e.starts_with(prefix + " ")) examples += "  " + e + "\n";
  if (!examples.empty()) out += "\nExamples:\n" + examples;
  return out;
}

std::string usage_hint(std::string_view command) {
  auto it = registry().find(std::string(command));
  if (it == registry().end()) return "Try 'podshimctl --help'.\n";
  std::string help = command_help(it->second);
  return help.substr(0, help.find("\n\n") + 1) + "Try 'podshimctl " + std::string(command) + " --help'.\n";
}

std::string main_help() {
  std::string out =
      "Usage: podshimctl [--socket PATH] [-o FORMAT] COMMAND [ARGS...] [flags]\n"
      "       podshimctl --version | --help\n"
      "\n"
      "Talks to podshimd's status socket and runs podshim's offline helpers.\n"
      "\n"
      "Commands:\n";
  size_t w = 0;
  for (const auto& [name, cmd] : registry()) w = std::max(w, name.size());
  for (const auto& [name, cmd] : registry())
    out += "  " + name + std::string(w - name.size() + 2, ' ') + cmd.summary + "\n";
  out += "\nGlobal flags (also accepted after the command):\n" + flag_lines(global_flags());
  out +=
      "Every listing takes -o table (default), wide, json or yaml, also written -ojson, -o=json,\n"
      "--output json or --output=json; an empty table prints \"No resources found\" on stderr.\n"
      "\n"
      "Examples:\n"
      "  podshimctl status\n"
      "  podshimctl get containers -o wide\n"
      "  podshimctl get pods -o yaml\n"
      "  podshimctl resize CONTAINER --memory 256Mi\n"
      "  podshimctl cgroup-values --cpu-request 250m --cpu-limit 1 --memory-limit 512Mi\n"
      "  source <(podshimctl completion bash)    # completion: podshimctl completion --help\n"
      "\n"
      "Exit status:\n";
  for (const auto& e : kExitCodes) out += "  " + std::to_string(e.code) + "  " + e.meaning + "\n";
  return out;
}

std::optional<int> handle_help(int argc, char** argv, std::ostream& out) {
  if (argc < 1) return std::nullopt;
  auto it = registry().find(argv[0]);
  if (it == registry().end()) return std::nullopt;
  bool wanted = false;
  const Subcommand* sub = nullptr;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--") break;
    if (a == "-h" || a == "--help") wanted = true;
    else if (!sub && !a.starts_with("-")) sub = find_subcommand(it->second, a);
  }
  if (!wanted) return std::nullopt;
  out << command_help(it->second, sub);
  return kExitOk;
}

// ---- completion ----------------------------------------------------------------

namespace {

std::string join(const std::vector<std::string>& v, std::string_view sep = " ") {
  std::string out;
  for (const auto& s : v) {
    if (!out.empty()) out += sep;
    out += s;
  }
  return out;
}

std::vector<std::string> flag_words(const std::vector<Flag>& flags) {
  std::vector<std::string> out;
  for (const auto& f : flags) {
    if (!f.short_name.empty()) out.push_back(f.short_name);
    out.push_back(f.name);
  }
  return out;
}

// The bash action completing `f`'s value (COMPREPLY set, then return).
std::string bash_value_action(const Flag& f) {
  if (!f.choices.empty()) return "COMPREPLY=($(compgen -W \"" + join(f.choices) + "\" -- \"$cur\"))";
  if (f.complete == Complete::File) return "COMPREPLY=($(compgen -f -- \"$cur\"))";
  if (f.complete == Complete::Dir) return "COMPREPLY=($(compgen -d -- \"$cur\"))";
  return "COMPREPLY=()";
}

// `case $flag in` arms for the value-taking flags among `flags`.
std::string bash_value_cases(const std::vector<Flag>& flags, const std::string& indent) {
  std::string out;
  std::set<std::string> seen;
  for (const auto& f : flags) {
    if (f.value.empty() || !seen.insert(f.name).second) continue;
    std::string pattern = f.short_name.empty() ? f.name : f.short_name + "|" + f.name;
    out += indent + pattern + ") " + bash_value_action(f) + "; return 0 ;;\n";
  }
  return out;
}

std::string zsh_quote(std::string s) {
  std::string out;
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out;
}

// A description inside an _arguments spec's [...]: no brackets.
std::string zsh_desc(std::string s) {
  for (char& c : s) {
    if (c == '[') c = '(';
    if (c == ']') c = ')';
  }
  return zsh_quote(s);
}

std::string zsh_value_spec(const Flag& f) {
  std::string msg = f.value;
  std::transform(msg.begin(), msg.end(), msg.begin(), [](unsigned char c) { return std::tolower(c); });
  if (!f.choices.empty()) return ":" + msg + ":(" + join(f.choices) + ")";
  if (f.complete == Complete::File) return ":" + msg + ":_files";
  if (f.complete == Complete::Dir) return ":" + msg + ":_files -/";
  return ":" + msg + ": ";
}

// _arguments specs for `flags`, one per line, each ending in " \\\n".
std::string zsh_flag_specs(const std::vector<Flag>& flags, const std::string& indent) {
  std::string out;
  std::set<std::string> seen;
  for (const auto& f : flags) {
    if (!seen.insert(f.name).second) continue;
    const bool help = f.name == "--help" || f.name == "--version";
    std::string value = f.value.empty() ? "" : zsh_value_spec(f);
    std::string desc = "[" + zsh_desc(f.help) + "]";
    if (!f.short_name.empty()) {
      std::string excl = help ? "(- *)" : "(" + f.short_name + " " + f.name + ")";
      std::string s = f.value.empty() ? f.short_name : f.short_name + "+";
      std::string l = f.value.empty() ? f.name : f.name + "=";
      out += indent + "'" + excl + "'{" + s + "," + l + "}'" + desc + value + "' \\\n";
    } else {
      std::string excl = help ? "(- *)" : "";
      std::string l = f.value.empty() ? f.name : f.name + "=";
      out += indent + "'" + excl + l + desc + value + "' \\\n";
    }
  }
  return out;
}

std::string zsh_fn(const std::string& name) {
  std::string out = "_podshimctl_";
  for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

}  // namespace

namespace {

// Every flag that takes a value, so the scan for the command and the
// subcommand skips values (`--socket /run/x get`).
std::set<std::string> bash_value_flags() {
  std::set<std::string> value_flags;
  auto add_values = [&](const std::vector<Flag>& flags) {
    for (const auto& f : flags) {
      if (f.value.empty()) continue;
      value_flags.insert(f.name);
      if (!f.short_name.empty()) value_flags.insert(f.short_name);
    }
  };
  add_values(global_flags());
  for (const auto& [name, c] : registry()) {
    add_values(flags_of(c, nullptr));
    for (const auto& s : c.subcommands) add_values(flags_of(c, &s));
  }
  return value_flags;
}

// The `case $cmd` arm of one command.
std::string bash_command_arm(const std::string& name, const Command& c) {
  std::string out;
  out += "        " + name + ")\n";
  // `case $flag` completes a value; otherwise the words: the subcommands
  // (while none is given), or the flags of the command and subcommand.
  auto arm = [&](const Subcommand* s, const std::string& indent) {
    std::string a;
    std::string cases = bash_value_cases(flags_of(c, s), indent + "    ");
    if (!cases.empty()) a += indent + "case $flag in\n" + cases + indent + "esac\n";
    return a;
  };
  if (c.subcommands.empty()) {
    out += arm(nullptr, "            ") + "            words=\"" + join(flag_words(flags_of(c, nullptr))) + "\" ;;\n";
    return out;
  }
  std::vector<std::string> subs;
  for (const auto& s : c.subcommands) subs.push_back(s.name);
  out += "            case $sub in\n";
  for (const auto& s : c.subcommands) {
    std::vector<std::string> names = {s.name};
    names.insert(names.end(), s.aliases.begin(), s.aliases.end());
    out += "                " + join(names, "|") + ")\n" + arm(&s, "                    ") +
           "                    words=\"" + join(flag_words(flags_of(c, &s))) + "\" ;;\n";
  }
  out += "                '')\n" + arm(nullptr, "                    ") +
         "                    if [[ $cur != -* ]]; then\n"
         "                        COMPREPLY=($(compgen -W \"" + join(subs) + "\" -- \"$cur\")); return 0\n"
         "                    fi\n"
         "                    words=\"" + join(flag_words(flags_of(c, nullptr))) + "\" ;;\n"
         "                *)\n" + arm(nullptr, "                    ") +
         "                    words=\"" + join(flag_words(flags_of(c, nullptr))) + "\" ;;\n"
         "            esac ;;\n";
  return out;
}

}  // namespace

std::string bash_completion() {
  const std::set<std::string> value_flags = bash_value_flags();
  std::vector<std::string> commands;
  for (const auto& [name, c] : registry()) commands.push_back(name);

  std::string out;
  out += "# bash completion for podshimctl " + std::string(version()) +
         ", generated by `podshimctl completion bash`\n"
         "# from podshimctl's command registry. Install it for every user with\n"
         "#   podshimctl completion bash > /etc/bash_completion.d/podshimctl\n"
         "# (or /usr/share/bash-completion/completions/podshimctl), or for one shell with\n"
         "#   source <(podshimctl completion bash)\n"
         "_podshimctl() {\n"
         "    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n"
         "    local cmd= sub= flag= words= i w\n"
         "    # '=' is a word of its own in COMP_WORDS: --output=json is --output, =, json.\n"
         "    if [[ $cur == = ]]; then cur=; flag=$prev\n"
         "    elif [[ $prev == = ]]; then flag=${COMP_WORDS[COMP_CWORD-2]}\n"
         "    else flag=$prev; fi\n"
         "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
         "        w=${COMP_WORDS[i]}\n"
         "        case $w in\n"
         "            " + join({value_flags.begin(), value_flags.end()}, "|") + ")\n"
         "                [[ ${COMP_WORDS[i+1]} == = ]] && ((i++))\n"
         "                ((i++)) ;;\n"
         "            -*|=) ;;\n"
         "            *) if [[ -z $cmd ]]; then cmd=$w; elif [[ -z $sub ]]; then sub=$w; fi ;;\n"
         "        esac\n"
         "    done\n"
         "    case $cmd in\n"
         "        '')\n"
         "            case $flag in\n" +
         bash_value_cases(global_flags(), "                ") +
         "            esac\n"
         "            words=\"" + join(commands) + " " + join(flag_words(global_flags())) + "\" ;;\n";
  for (const auto& [name, c] : registry()) {
    out += bash_command_arm(name, c);
  }
  out +=
      "        *) return 0 ;;\n"
      "    esac\n"
      "    COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
      "    return 0\n"
      "}\n"
      "complete -o default -F _podshimctl podshimctl\n";
  return out;
}

std::string zsh_completion() {
  std::string out;
  out += "#compdef podshimctl\n"
         "# zsh completion for podshimctl " + std::string(version()) +
         ", generated by `podshimctl completion zsh`\n"
         "# from podshimctl's command registry. Install it as _podshimctl in a directory of $fpath:\n"
         "#   podshimctl completion zsh > /usr/local/share/zsh/site-functions/_podshimctl\n"
         "# (then start a new shell), or for one shell, after compinit:\n"
         "#   source <(podshimctl completion zsh)\n"
         "\n";
  for (const auto& [name, c] : registry()) {
    out += zsh_fn(name) + "() {\n"
           "    local curcontext=\"$curcontext\" state line ret=1\n"
           "    typeset -A opt_args\n";
    if (c.subcommands.empty()) {
      out += "    _arguments -S \\\n" + zsh_flag_specs(flags_of(c, nullptr), "        ") +
             "        '*:argument: ' && ret=0\n";
    } else {
      out += "    _arguments -C -S -A '-*' \\\n" + zsh_flag_specs(flags_of(c, nullptr), "        ") +
             "        '1:subcommand:->subcommand' \\\n"
             "        '*::argument:->argument' && ret=0\n"
             "    case $state in\n"
             "        subcommand)\n"
             "            local -a subcommands=(\n";
      for (const auto& s : c.subcommands)
        out += "                '" + zsh_quote(s.name + ":" + s.summary) + "'\n";
      out += "            )\n"
             "            _describe -t subcommands '" + zsh_quote(name) + " subcommand' subcommands && ret=0 ;;\n"
             "        argument)\n"
             "            case $words[1] in\n";
      for (const auto& s : c.subcommands) {
        std::vector<std::string> names = {s.name};
        names.insert(names.end(), s.aliases.begin(), s.aliases.end());
        out += "                " + join(names, "|") + ")\n"
               "                    _arguments -S \\\n" +
               zsh_flag_specs(flags_of(c, &s), "                        ") +
               "                        '*:argument: ' && ret=0 ;;\n";
      }
      out += "            esac ;;\n"
             "    esac\n";
    }
    out += "    return ret\n"
           "}\n\n";
  }
  out += "_podshimctl() {\n"
         "    local curcontext=\"$curcontext\" state line ret=1\n"
         "    typeset -A opt_args\n"
         "    _arguments -C -S -A '-*' \\\n" +
         zsh_flag_specs(global_flags(), "        ") +
         "        '1:command:->command' \\\n"
         "        '*::argument:->argument' && ret=0\n"
         "    case $state in\n"
         "        command)\n"
         "            local -a commands=(\n";
  for (const auto& [name, c] : registry()) out += "                '" + zsh_quote(name + ":" + c.summary) + "'\n";
  out += "            )\n"
         "            _describe -t commands 'podshimctl command' commands && ret=0 ;;\n"
         "        argument)\n"
         "            curcontext=\"${curcontext%:*:*}:podshimctl-$words[1]:\"\n"
         "            case $words[1] in\n";
  for (const auto& [name, c] : registry()) out += "                " + name + ") " + zsh_fn(name) + " && ret=0 ;;\n";
  out += "            esac ;;\n"
         "    esac\n"
         "    return ret\n"
         "}\n"
         "\n"
         "if [[ $zsh_eval_context[-1] == loadautofunc ]]; then\n"
         "    _podshimctl \"$@\"\n"
         "else\n"
         "    compdef _podshimctl podshimctl\n"
         "fi\n";
  return out;
}

}  // namespace podshim::ctl
