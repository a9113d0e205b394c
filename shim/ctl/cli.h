// podshimctl's command-line plumbing shared by every command: the global
// options (-o in every spelling, --socket), output (json, yaml from the same
// JSON document, tables), and what is generated from the registry: help
// texts and the bash/zsh completion scripts.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "shim/ctl/registry.h"

namespace podshim::ctl {

// The project version (meson's project version), for --version.
std::string_view version();
// The git commit built from (`git describe --always --dirty`), or "unknown".
std::string_view build_commit();
// "podshimctl 0.1.0 (commit d67543784e32)": what --version prints.
std::string version_line();

// ---- global options ------------------------------------------------------------

// globals() holds what main read before the command; a command starts from a
// copy and adds the options after it (`podshimctl get containers -o json`).
struct GlobalOptions {
  std::string socket;                 // empty: core::kDefaultSocketPath
  std::optional<std::string> output;  // -o as given; resolve_format checks it
};
GlobalOptions& globals();

std::string_view to_string(Format f);
std::optional<Format> parse_format(std::string_view s);
// "table, wide, json or yaml" (or the given subset).
std::string format_list(const std::vector<Format>& formats);
std::vector<Format> all_formats();

enum class OptionResult { NotMine, Taken, Error };

// Consumes argv[*i] (and its value) when it is an output option: -o FMT,
// -oFMT, -o=FMT, --output FMT, --output=FMT. A missing value is Error with
// *error set; the value is checked by resolve_format, against the formats of
// the command.
OptionResult take_output_option(int argc, char** argv, int* i, GlobalOptions* o, std::string* error);
// As take_output_option, plus --socket PATH / --socket=PATH.
OptionResult take_global_option(int argc, char** argv, int* i, GlobalOptions* o, std::string* error);

// The format a command prints in: -o when given (it must be one of
// `allowed`), else `fallback`. Otherwise nullopt with *error naming the value
// and the allowed ones ("unknown output format 'xml' (allowed: json or yaml)").
std::optional<Format> resolve_format(const GlobalOptions& o, const std::vector<Format>& allowed, Format fallback,
                                     std::string* error);
// resolve_format for command `who` (as the user typed it, "get"): when -o is
// not allowed, prints "podshimctl WHO: <why>" on stderr and returns nullopt;
// the command then exits with kExitUsage.
std::optional<Format> command_format(std::string_view who, const GlobalOptions& o,
                                     const std::vector<Format>& allowed, Format fallback);

// A usage error of command `who`: "podshimctl WHO: MESSAGE" and
// "Try 'podshimctl WHO --help'." on stderr. Returns kExitUsage.
int usage_error_try_help(std::string_view who, std::string_view message);

// ---- output --------------------------------------------------------------------

struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};
// Columns padded to their widest cell, two spaces apart.
std::string render_table(const Table& t);

// The JSON document as a YAML node (strings stay strings: see to_yaml).
YAML::Node to_yaml_node(const nlohmann::json& j);
// The JSON document in YAML block style. A string that YAML would read as
// something else ("35", "true", "null", "") is double-quoted, so the YAML
// carries exactly the data the JSON does.
std::string to_yaml(const nlohmann::json& j);
// Whether `f` prints the whole JSON document (json, yaml) rather than the
// command's own table or text (table, wide).
inline bool is_document(Format f) { return f == Format::Json || f == Format::Yaml; }
// json (2-space indent) or yaml, newline-terminated.
std::string render_document(const nlohmann::json& j, Format f);

// kubectl's message for an empty table, printed to stderr (exit status 0).
inline constexpr std::string_view kNoResources = "No resources found";

// A listing: the document for json/yaml, else the table, or kNoResources on
// `err` when the table has no rows.
void print_listing(const nlohmann::json& doc, Format f, const Table& table, std::ostream& out, std::ostream& err);

// ---- help and completion -------------------------------------------------------

// The options main takes before the command.
const std::vector<Flag>& global_flags();

// `podshimctl --help`: usage, global flags, one line per command, examples,
// exit status table.
std::string main_help();
// `podshimctl CMD [SUB] --help`.
std::string command_help(const Command& c, const Subcommand* sub = nullptr);
// The "Usage: ..." lines of command_help and a pointer to --help, for a
// usage error's message: "Usage: podshimctl cdi list [flags]\n...Try ...\n".
std::string usage_hint(std::string_view command);
// The subcommand of `c` named (or aliased) `name`, or null.
const Subcommand* find_subcommand(const Command& c, std::string_view name);
// When argv (argv[0] = the command) asks for help (-h/--help before any
// "--"), prints command_help for the command or its subcommand to `out` and
// returns kExitOk; nullopt otherwise.
std::optional<int> handle_help(int argc, char** argv, std::ostream& out);

std::string bash_completion();
std::string zsh_completion();

}  // namespace podshim::ctl
