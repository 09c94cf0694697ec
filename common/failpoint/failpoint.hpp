#pragma once
// Named failpoints in commit paths. Compiled in always; when nothing is armed
// a hit costs one relaxed atomic load.
//
// Spec (env TALLY_FAILPOINTS or arm()): comma-separated `name=action`, where
// action is
//   crash        _exit(137) at the first hit
//   crash@N      _exit(137) at the N-th hit (1-based)
//   delay:MS     sleep MS milliseconds at every hit (blocking; tests only)
//   error        hit() returns true: the caller fails the operation
//   off          disarm
#include <atomic>
#include <string>
#include <string_view>

namespace tally::failpoint {

namespace detail {
extern std::atomic<bool> any_armed;
bool slow_hit(std::string_view name);
}  // namespace detail

// Returns true when an `error` action fires. Crash and delay act in place.
inline bool hit(std::string_view name) {
  if (!detail::any_armed.load(std::memory_order_relaxed)) return false;
  return detail::slow_hit(name);
}

// True while any failpoint is armed (a relaxed load), for paths that are
// shaped differently only so that a failpoint can stop between two steps.
inline bool armed() { return detail::any_armed.load(std::memory_order_relaxed); }

// Arms (or disarms with "off") from a spec; throws std::invalid_argument on a bad spec.
void arm(std::string_view spec);
void disarm_all();
void arm_from_env();     // reads TALLY_FAILPOINTS
std::string describe();  // current spec, for the admin endpoint

}  // namespace tally::failpoint
