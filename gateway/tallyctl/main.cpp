// tallyctl: the operators' and scripts' command line over the gateway's API.
//   tallyctl [--url URL] [--key KEY] [--json] <command> ...   (tallyctl --help)
// Exit status: 0 success, 1 the API answered an error (its code and message
// on stderr) or could not be reached, 2 a usage error.
// The commands are a table (commands.cpp): main parses and runs the one named.
#include <iostream>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "gateway/tallyctl/api_client.hpp"
#include "gateway/tallyctl/command_line.hpp"
#include "gateway/tallyctl/commands.hpp"

namespace {

using namespace tally;

void declare_options(CLI::App& app, ctl::options& o) {
  app.require_subcommand(1);
  app.add_option("--url", o.url, "The gateway, http://host:port")->envname("TALLY_URL")->capture_default_str();
  app.add_option("--key", o.key, "An API key (an operator key for sagas and reconcile)")->envname("TALLY_API_KEY");
  app.add_flag("--json", o.as_json, "Print the API's JSON instead of tables");
  app.add_option("--wait-ms", o.wait_ms, "How long a write waits for its saga to finish (0-30000)")
      ->check(CLI::Range(0, 30000))
      ->capture_default_str();
}

// A command's path without its last word ("" at the top), and that word.
std::pair<std::string_view, std::string_view> split(std::string_view path) {
  const auto space = path.rfind(' ');
  if (space == std::string_view::npos) return {"", path};
  return {path.substr(0, space), path.substr(space + 1)};
}

// The group at `path`, made (under its own group) the first time it is named.
CLI::App* group(std::map<std::string_view, CLI::App*>& made, std::string_view path) {
  if (auto it = made.find(path); it != made.end()) return it->second;
  const auto [parent, name] = split(path);
  for (const auto& g : ctl::command_groups()) {
    if (g.path != path) continue;
    auto* sub = group(made, parent)->add_subcommand(std::string(name), std::string(g.help))->require_subcommand(1);
    return made[path] = sub;
  }
  throw std::logic_error("tallyctl: no command group " + std::string(path));
}

// Every command of the table, in its order, under its groups; the one the
// arguments name sets `chosen` once parsed.
void declare_commands(CLI::App& app, ctl::arguments& args, const ctl::command*& chosen) {
  std::map<std::string_view, CLI::App*> made{{"", &app}};
  for (const auto& c : ctl::commands()) {
    const auto [parent, name] = split(c.path);
    auto* sub = group(made, parent)->add_subcommand(std::string(name), std::string(c.help));
    c.declare(*sub, args);
    sub->callback([&chosen, &c] { chosen = &c; });
  }
}

}  // namespace

int main(int argc, char** argv) {
  ctl::options o;
  ctl::arguments args;
  const ctl::command* chosen = nullptr;
  CLI::App app{"tallyctl: Tally's command line, over the gateway's public and operator API"};
  declare_options(app, o);
  declare_commands(app, args, chosen);
  try {
    app.parse(argc, argv);
    if (!ctl::parse_url(o.url)) throw CLI::ValidationError("--url", "must be http://host:port, got " + o.url);
    if (o.key.empty()) throw CLI::RequiredError("--key (or TALLY_API_KEY)");
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "tallyctl: " << e.what() << "\nRun with --help for more information.\n";
    return 2;
  }
  return chosen->run(ctl::command_line(o), args);
}
