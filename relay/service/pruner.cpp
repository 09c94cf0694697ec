#include "relay/service/pruner.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/log/log.hpp"
#include "common/pg/rows.hpp"

namespace tally::relay {

namespace asio = boost::asio;

namespace {

// Every registered consumer (configured here, $1, or with a cursor row),
// its cursor (NULL: never saved), how many events lie after it (counted up
// to $2) and the age of the first of them. Each probe starts in the
// (tx_id, id) index at the cursor.
constexpr std::string_view sql_positions =
    "SELECT n.consumer, c.tx_id::text AS tx_id, c.id,"
    " (SELECT count(*) FROM (SELECT 1 FROM outbox_event o"
    "   WHERE (o.tx_id, o.id) > (coalesce(c.tx_id, '0'::xid8), coalesce(c.id, 0)) LIMIT $2) b) AS backlog,"
    " (SELECT floor(extract(epoch FROM clock_timestamp() - o.created_at) * 1000)::bigint FROM outbox_event o"
    "   WHERE (o.tx_id, o.id) > (coalesce(c.tx_id, '0'::xid8), coalesce(c.id, 0)) ORDER BY o.tx_id, o.id LIMIT 1)"
    "  AS oldest_ms"
    " FROM (SELECT unnest($1::text[]) AS consumer UNION SELECT consumer FROM relay_cursor) n"
    " LEFT JOIN relay_cursor c USING (consumer) ORDER BY n.consumer";
enum class position_col { consumer, tx_id, id, backlog, oldest_ms };

// One batch: the first $6 events after the last pruned one ($4, $5) up to
// the bound ($1, $2), in commit order, and of those the leading run older
// than $3 ms is deleted; a younger event ends the run (the ones after it
// wait for the next pass, whatever their age). Returns how many the page
// held, how many went, and the last that went.
constexpr std::string_view sql_prune =
    "WITH page AS (SELECT tx_id, id, created_at < now() - $3::bigint * interval '1 millisecond' AS old"
    "  FROM outbox_event WHERE (tx_id, id) > ($4::xid8, $5::bigint) AND (tx_id, id) <= ($1::xid8, $2::bigint)"
    "  ORDER BY tx_id, id LIMIT $6),"
    " run AS (SELECT tx_id, id FROM (SELECT tx_id, id, bool_and(old) OVER (ORDER BY tx_id, id) AS in_run"
    "  FROM page) p WHERE in_run),"
    " gone AS (DELETE FROM outbox_event o USING run WHERE o.tx_id = run.tx_id AND o.id = run.id"
    "  RETURNING o.tx_id, o.id)"
    " SELECT (SELECT count(*) FROM page) AS paged, (SELECT count(*) FROM gone) AS deleted, l.tx_id::text AS tx_id,"
    " l.id FROM (SELECT 1) one LEFT JOIN (SELECT tx_id, id FROM gone ORDER BY tx_id DESC, id DESC LIMIT 1) l ON true";
enum class prune_col { paged, deleted, tx_id, id };

std::string labels(const source_config& s) { return R"(source=")" + s.name + '"'; }

}  // namespace

outbox_pruner::outbox_pruner(asio::any_io_executor ex, source_config source, std::vector<std::string> consumers,
                             metrics::registry& metrics, prune_options options)
    : source_(std::move(source)),
      consumers_(std::move(consumers)),
      metrics_(metrics),
      options_(options),
      conn_(ex),
      timer_(ex),
      pruned_(metrics.add_counter("tally_relay_outbox_pruned_total",
                                  "Outbox events deleted after every consumer delivered them", labels(source_))) {}

void outbox_pruner::stop() {
  stopping_ = true;
  timer_.cancel();
}

asio::awaitable<void> outbox_pruner::async_run() {
  bool failing = false;
  while (!stopping_) {
    prune_pass pass;
    if (auto err = co_await async_pass(pass)) {
      if (!failing) log::warn("relay outbox pruning failed", {{"source", source_.name}, {"error", err.message}});
      failing = true;
    } else {
      if (failing) log::info("relay outbox pruning recovered", {{"source", source_.name}});
      failing = false;
    }
    if (stopping_) break;
    timer_.expires_after(options_.interval);
    co_await timer_.async_wait(asio::as_tuple(asio::use_awaitable));
  }
  conn_.close();
}

void outbox_pruner::report_backlog(const std::string& consumer, std::int64_t events,
                                   std::optional<std::int64_t> oldest_ms) {
  auto it = backlog_.find(consumer);
  if (it == backlog_.end()) {
    const auto l = labels(source_) + R"(,consumer=")" + consumer + '"';
    auto& count = metrics_.add_gauge("tally_relay_outbox_backlog_events",
                                     "Events after the consumer's cursor (counted up to 1,000,000)", l);
    auto& age = metrics_.add_gauge("tally_relay_outbox_backlog_oldest_seconds",
                                   "Age of the oldest event after the consumer's cursor (0: none)", l);
    it = backlog_.emplace(consumer, std::pair{&count, &age}).first;
  }
  it->second.first->set(static_cast<double>(events));
  it->second.second->set(static_cast<double>(oldest_ms.value_or(0)) / 1000.0);
}

asio::awaitable<pg::error> outbox_pruner::async_positions(std::vector<consumer_position>& out) {
  out.clear();
  pg::result r;
  std::vector<pg::param> params{pg::array_literal(std::span<const std::string>(consumers_)),
                                std::to_string(options_.backlog_cap)};
  if (auto err = co_await conn_.async_exec(sql_positions, std::move(params), r, options_.db_timeout)) co_return err;
  for (auto row : pg::rows_of<position_col>(r)) {
    consumer_position p{std::string(row.text(position_col::consumer)), std::nullopt};
    if (!row.is_null(position_col::tx_id))
      p.at = cursor{std::string(row.text(position_col::tx_id)), row.int64(position_col::id)};
    report_backlog(p.consumer, row.int64(position_col::backlog), row.opt_int64(position_col::oldest_ms));
    out.push_back(std::move(p));
  }
  co_return pg::error{};
}

asio::awaitable<pg::error> outbox_pruner::async_pass(prune_pass& out) {
  out = prune_pass{};
  if (!conn_.is_open()) {
    pruned_to_ = cursor{};
    if (auto err = co_await conn_.async_connect(source_.conninfo, options_.db_timeout)) co_return err;
  }
  pg::error err = co_await async_positions(out.consumers);
  if (!err) out.bound = prune_bound(out.consumers);
  while (!err && out.bound && !stopping_) {
    pg::result r;
    std::vector<pg::param> params{
        out.bound->tx_id, std::to_string(out.bound->id), std::to_string(options_.min_age.count()),
        pruned_to_.tx_id, std::to_string(pruned_to_.id), std::to_string(options_.batch)};
    if ((err = co_await conn_.async_exec(sql_prune, std::move(params), r, options_.db_timeout))) break;
    const pg::row<prune_col> row(r, 0);
    const auto paged = row.int64(prune_col::paged), deleted = row.int64(prune_col::deleted);
    out.deleted += deleted;
    pruned_.inc(static_cast<std::uint64_t>(deleted));
    if (deleted > 0) pruned_to_ = cursor{std::string(row.text(prune_col::tx_id)), row.int64(prune_col::id)};
    // A short page reached the bound; a partly deleted one, a young event.
    if (paged < static_cast<std::int64_t>(options_.batch) || deleted < paged) break;
  }
  if (err) conn_.close();
  co_return err;
}

}  // namespace tally::relay
