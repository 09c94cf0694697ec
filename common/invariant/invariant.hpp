#pragma once
// TALLY_ASSERT(condition, values...): an invariant the code that changes a
// balance, a lot, a hold or a saga's state must keep. On in every build: a
// broken one is a bug to stop at, not a state to go on from, so it writes
// one JSON line to stderr (the condition, file, line and the named values)
// and aborts, before anything can be committed or sent.
//
//   TALLY_ASSERT(a.held <= a.balance, a.account_id, a.balance, a.held);
#include <sstream>
#include <string>

namespace tally::invariant {

[[noreturn]] void broken(const char* condition, const char* file, int line, const char* names,
                         const std::string& values);

// The values as "v1, v2, ...".
template <class... T>
std::string values_of(const T&... values) {
  std::ostringstream out;
  const char* separator = "";
  ((out << separator << values, separator = ", "), ...);
  return out.str();
}

}  // namespace tally::invariant

#define TALLY_ASSERT(condition, ...)                                           \
  do {                                                                         \
    if (!(condition)) [[unlikely]]                                             \
      ::tally::invariant::broken(#condition, __FILE__, __LINE__, #__VA_ARGS__, \
                                 ::tally::invariant::values_of(__VA_ARGS__));  \
  } while (false)
