#pragma once
// What every bench tool's main shares: its command line of --name=value
// flags, each naming the option it sets (whose type says how its value
// reads), and its end: one JSON summary line on stdout, or the error.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <variant>

#include <nlohmann/json.hpp>

#include "bench/load.hpp"

namespace tally::bench {

// The option a flag sets (std::size_t also serves the std::uint64_t ones).
using flag_option = std::variant<std::string*, std::uint16_t*, int*, std::size_t*, double*>;
using flag_table = std::map<std::string, flag_option>;

// The flags of the load every tool offers: --connections, --threads,
// --duration, --warmup, --rate and --units, into `o`.
flag_table load_flags(load_options& o);

// Sets the options the "--name=value" arguments name. An argument of
// another form, a name not in `flags` or a value that does not read as its
// option's type is an error.
void read_flags(int argc, char** argv, const flag_table& flags);

// Runs `body` and prints the summary it returns as one line on stdout (exit
// code 0), or reports an exception as "name: what" (exit code 1).
int run_tool(const char* name, const std::function<nlohmann::json()>& body);

// A tool's main: run_tool of `run` with the options `parse` reads from the
// command line.
template <class Options>
int tool_main(const char* name, int argc, char** argv, Options (*parse)(int, char**),
              nlohmann::json (*run)(const Options&)) {
  return run_tool(name, [&] { return run(parse(argc, argv)); });
}

}  // namespace tally::bench
