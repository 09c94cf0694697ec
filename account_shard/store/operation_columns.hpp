#pragma once
// An operation row's columns, as a batch locks its operations
// (batch_statements.hpp) and the read side reads one (queries.cpp):
// TALLY_OPERATION_COLUMNS selects them from `operation o` in the order
// operation_column names them.

#define TALLY_OPERATION_COLUMNS                                                                 \
  "o.tenant, o.account_id, o.biz_type, o.biz_id, o.request_hash, o.state, o.amount, o.reason, " \
  "o.balance_after, o.held_after, o.version_after, o.ledger_seq, o.refunded, o.lots::text "

namespace tally::shard {

enum class operation_column {
  tenant,
  account_id,
  biz_type,
  biz_id,
  request_hash,
  state,
  amount,
  reason,
  balance_after,
  held_after,
  version_after,
  ledger_seq,
  refunded,
  lots
};

}  // namespace tally::shard
