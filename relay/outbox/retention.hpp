#pragma once
// What outbox rows may go: those every registered consumer has delivered
// (its cursor has passed them) and that are older than the source's minimum
// age. A consumer is registered by its cursor row in the source database or
// by this relay's configuration; one configured here that has not saved a
// cursor yet needs every event, so nothing goes until it has.
#include <optional>
#include <span>
#include <string>
#include <compare>

#include "relay/outbox/event.hpp"

namespace tally::relay {

// Commit order of two cursors: by transaction id (xid8, compared as a
// number), then by event id.
std::strong_ordering compare(const cursor& a, const cursor& b);

// One registered consumer and its saved cursor (none: never saved).
struct consumer_position {
  std::string consumer;
  std::optional<cursor> at;
};

// The cursor below which (inclusive) every consumer has delivered every
// event, or none when some consumer has delivered nothing (or there is
// no consumer at all).
std::optional<cursor> prune_bound(std::span<const consumer_position> consumers);

}  // namespace tally::relay
