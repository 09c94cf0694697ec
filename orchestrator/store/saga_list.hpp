#pragma once
// The statement that lists a tenant's sagas for a filter, newest first
// unless asked otherwise, a page at a time after a cursor (the last saga id
// of the previous page). Saga ids begin with their creation time, so id
// order is creation order and a created range is a range of ids.
//
// Each combination of filters present gets a statement of its own (no
// "$n IS NULL OR ..."), so that every plan, custom or generic, starts in
// the index that serves its filter (migrations/orchestrator/0006):
//   none            saga_by_tenant (tenant, saga_id)
//   state           saga_by_state (tenant, state, saga_id)
//   type            saga_by_type (tenant, type, saga_id)
//   biz_id          the key's unique index (tenant, biz_id, type)
//   account         saga_by_account (its account, or a transfer's source) and
//                   saga_by_destination (a transfer's destination), merged
//   overdue         saga_by_state, over the three states still on their way
//   created range   a range of saga ids within whichever of the above
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/pg/connection.hpp"
#include "orchestrator/engine/engine.hpp"

namespace tally::orch {

// What operators and apps filter sagas by; empty fields match everything.
struct saga_filter {
  std::string tenant;
  std::optional<saga_type> type{};
  std::string biz_id{};
  std::optional<saga_state> state{};
  std::optional<instant> created_before{};  // created strictly before
  std::string after{};                      // cursor: the last saga id of the previous page
  std::size_t limit = 100;
  // Set: only sagas pending, running or compensating past their deadline at this instant.
  std::optional<instant> overdue_at{};
  std::optional<instant> created_after{};  // created at or after
  // A saga naming this account: a credit's, deduction's or refund's
  // account, either side of a transfer (a batch deduction's items are not
  // searched: find it by its biz_id).
  std::string account{};
  bool oldest_first = false;
};

struct list_query {
  std::string sql;
  std::vector<pg::param> params;
};

// The statement and its parameters; `columns` is the select list, over
// table alias `s`, whose first column is s.saga_id.
list_query saga_list_query(const saga_filter& f, std::string_view columns);

// The lowest saga id that a saga created at `t` can have.
std::string first_saga_id_at(instant t);

}  // namespace tally::orch
