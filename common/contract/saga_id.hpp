#pragma once
// Saga ids: "sg_" and 26 characters of Crockford base32 over 48 bits of
// Unix milliseconds and 80 random bits (the ULID layout). They sort by
// creation time, which keeps the saga table's index appending, and need no
// coordination between instances. They fit the shards' id alphabet, so a
// saga id is also its calls' shard key.
#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace tally::contract {

std::string new_saga_id(std::chrono::sys_time<std::chrono::milliseconds> now,
                        const std::array<std::uint8_t, 10>& random);
bool is_saga_id(std::string_view id);

}  // namespace tally::contract
