#include "orchestrator/store/saga_list.hpp"

#include <array>

#include "common/contract/saga_id.hpp"

namespace tally::orch {

namespace {

// "$n". Built by appending: GCC 12 at -O3 warns (-Wrestrict, a false
// positive) on "$" + std::to_string(n).
std::string placeholder_of(std::size_t n) {
  std::string out = "$";
  out += std::to_string(n);
  return out;
}

// Appends conditions with their parameters numbered in turn.
class conditions {
 public:
  explicit conditions(std::vector<pg::param>& params) : params_(params) {}
  // `clause` with each '?' replaced by the next parameter's placeholder; every '?' takes the same `value`.
  void add(std::string_view clause, pg::param value) {
    params_.push_back(std::move(value));
    const auto placeholder = placeholder_of(params_.size());
    text_ += " AND ";
    for (char c : clause) {
      if (c == '?')
        text_ += placeholder;
      else
        text_ += c;
    }
  }
  void add(std::string_view clause) { text_.append(" AND ").append(clause); }
  const std::string& text() const { return text_; }

 private:
  std::vector<pg::param>& params_;
  std::string text_;
};

std::string ms(instant t) { return std::to_string(unix_ms(t)); }

}  // namespace

std::string first_saga_id_at(instant t) {
  const std::array<std::uint8_t, 10> zeros{};
  return contract::new_saga_id(std::chrono::sys_time<std::chrono::milliseconds>(t.time_since_epoch()), zeros);
}

list_query saga_list_query(const saga_filter& f, std::string_view columns) {
  list_query q;
  conditions where(q.params);
  // The tenant is always there; the first condition needs no AND.
  q.params.push_back(f.tenant);
  if (f.type) where.add("s.type = ?", std::string(to_string(*f.type)));
  if (!f.biz_id.empty()) where.add("s.biz_id = ?", f.biz_id);
  if (f.state) where.add("s.state = ?", std::string(to_string(*f.state)));
  if (f.overdue_at) {
    where.add("s.state IN ('pending', 'running', 'compensating')");
    where.add("s.deadline < to_timestamp(?::bigint / 1000.0)", ms(*f.overdue_at));
  }
  if (f.created_after) {
    where.add("s.saga_id >= ?", first_saga_id_at(*f.created_after));
    where.add("s.created_at >= to_timestamp(?::bigint / 1000.0)", ms(*f.created_after));
  }
  if (f.created_before) {
    where.add("s.saga_id < ?", first_saga_id_at(*f.created_before));
    where.add("s.created_at < to_timestamp(?::bigint / 1000.0)", ms(*f.created_before));
  }
  const char* direction = f.oldest_first ? "ASC" : "DESC";
  if (!f.after.empty()) where.add(f.oldest_first ? "s.saga_id > ?" : "s.saga_id < ?", f.after);
  q.params.push_back(std::to_string(f.limit));
  const auto limit = placeholder_of(q.params.size());
  const auto order = std::string(" ORDER BY s.saga_id ") + direction + " LIMIT " + limit;
  const auto select = "SELECT " + std::string(columns) + " FROM saga s WHERE s.tenant = $1" + where.text();
  if (f.account.empty()) {
    q.sql = select + order;
    return q;
  }
  q.params.push_back(f.account);
  const auto account = placeholder_of(q.params.size());
  // Either index in saga id order, merged; a saga is in one branch only
  // (a transfer's two sides differ).
  q.sql = "SELECT * FROM ((" + select + " AND coalesce(s.input->>'account', s.input->>'source') = " + account + order +
          ") UNION ALL (" + select + " AND s.type = 'transfer' AND s.input->>'destination' = " + account + order +
          ")) listed ORDER BY 1 " + direction + " LIMIT " + limit;
  return q;
}

}  // namespace tally::orch
