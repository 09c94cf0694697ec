#pragma once
// Writer fencing. Every write transaction takes the fence lock in shared
// mode and then, in a later statement (so its snapshot is taken after the
// lock was granted), reads the writer epoch and aborts unless it is its own.
// A new writer bumps the epoch while holding the fence lock exclusively,
// which waits for the old writer's transactions in flight; the old writer's
// later transactions read the new epoch and abort. Advisory locks live in
// shared memory: unlike FOR SHARE on the epoch row they cost no MultiXact
// and no WAL per transaction.
#include <string_view>

namespace tally::shard {

inline constexpr std::string_view sql_fence_shared = "SELECT pg_advisory_xact_lock_shared(5461726180)";
inline constexpr std::string_view sql_fence_exclusive = "SELECT pg_advisory_xact_lock(5461726180)";
inline constexpr std::string_view sql_read_epoch = "SELECT epoch FROM shard_writer";
enum class epoch_col { epoch };

}  // namespace tally::shard
