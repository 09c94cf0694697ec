#pragma once
// An account's next expiry as the shard's table `lot` gives it, for every
// reader of the shard database that shows an account (the shard's own
// account reads, the relay's rebuild of the projections): a LATERAL join
// giving `next_expiry_ms` (null when nothing expires) and
// `next_expiry_amount`, for an account row aliased `a`. What the next
// expiry takes is the unheld value of the open lots due at that instant.
#define TALLY_NEXT_EXPIRY_JOIN                                                                      \
  " LEFT JOIN LATERAL (SELECT (extract(epoch FROM l.expires_at) * 1000)::bigint AS next_expiry_ms," \
  " sum(l.remaining - l.held)::bigint AS next_expiry_amount FROM lot l"                             \
  " WHERE l.tenant = a.tenant AND l.account_id = a.account_id AND l.state = 'open'"                 \
  " AND l.expires_at IS NOT NULL AND l.remaining > l.held"                                          \
  " GROUP BY l.expires_at ORDER BY l.expires_at LIMIT 1) nx ON true "
