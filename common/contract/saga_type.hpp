#pragma once
// The public saga types (API.md): their names in saga resources and
// streams, and the collections of POST /v1/{collection} that start them.
#include <optional>
#include <string_view>

#include "common/contract/enum_names.hpp"

namespace tally::contract {

TALLY_NAMED_ENUM(saga_type, credit, deduct, refund, transfer, batch_deduct);
inline constexpr saga_type all_saga_types[] = {saga_type::credit, saga_type::deduct, saga_type::refund,
                                               saga_type::transfer, saga_type::batch_deduct};

constexpr std::optional<saga_type> saga_type_from(std::string_view s) { return value_of(saga_type_names, s); }

// POST /v1/{collection}: credits, deductions, refunds, transfers, batch-deductions.
inline constexpr enum_names<saga_type, 5> saga_collections{{{saga_type::credit, "credits"},
                                                            {saga_type::deduct, "deductions"},
                                                            {saga_type::refund, "refunds"},
                                                            {saga_type::transfer, "transfers"},
                                                            {saga_type::batch_deduct, "batch-deductions"}}};
static_assert(names_every_value(saga_collections));
constexpr std::string_view collection_of(saga_type t) { return name_of(saga_collections, t); }
constexpr std::optional<saga_type> saga_type_of_collection(std::string_view c) { return value_of(saga_collections, c); }

// Whether a completed saga of this type can be refunded.
constexpr bool is_refundable(saga_type t) {
  return t == saga_type::deduct || t == saga_type::transfer || t == saga_type::batch_deduct;
}

}  // namespace tally::contract
