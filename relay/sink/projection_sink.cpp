#include "relay/sink/projection_sink.hpp"

#include <chrono>

#include "common/projection/keys.hpp"
#include "common/time/rfc3339.hpp"

namespace tally::relay {

namespace asio = boost::asio;

namespace {

// KEYS[1]: the source's marker ("deliver") or its rebuild key ("restore");
// KEYS[2..]: objects. ARGV[1]: "deliver" or "restore", ARGV[2]: the
// rebuild's token (restore), ARGV[3]: the source (kept in each object, for
// forget_script); then each object's version, document and time to live
// (projection_ttl_ms) in turn. -1: the marker is missing; -2: the rebuild's
// token is gone.
const redis::script apply_script(R"lua(
if ARGV[1] == 'deliver' then
  if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
elseif redis.call('GET', KEYS[1]) ~= ARGV[2] then
  return -2
end
local applied = 0
for i = 2, #KEYS do
  local a = 3 * i - 2
  local version = tonumber(ARGV[a])
  local ttl = tonumber(ARGV[a + 2])
  local current = tonumber(redis.call('HGET', KEYS[i], 'v') or '-1')
  if current < version then
    if ttl < 0 then
      redis.call('DEL', KEYS[i])
    else
      redis.call('HSET', KEYS[i], 'v', ARGV[a], 'doc', ARGV[a + 1], 'src', ARGV[3])
      if ttl > 0 then redis.call('PEXPIRE', KEYS[i], ttl) end
    end
    applied = applied + 1
  end
end
return applied
)lua");

// KEYS[1]: the marker, KEYS[2]: the rebuild key; ARGV[1]: the token,
// ARGV[2]: the marker's value. -2: the rebuild's token is gone.
const redis::script finish_script(R"lua(
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return -2 end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('DEL', KEYS[2])
return 1
)lua");

// KEYS: objects (one SCAN page); ARGV[1]: a source. Removes the objects of
// that source, and those that do not say theirs (written before objects
// kept it): forgetting too much only sends reads to the databases until
// the next event. Returns how many went.
const redis::script forget_script(R"lua(
local gone = 0
for i = 1, #KEYS do
  local src = redis.call('HGET', KEYS[i], 'src')
  if not src or src == ARGV[1] then
    redis.call('UNLINK', KEYS[i])
    gone = gone + 1
  end
end
return gone
)lua");

constexpr std::size_t forget_page = 1000;

std::string key_of(object_kind kind, const std::string& tenant, const std::string& id) {
  return kind == object_kind::account ? projection::account_key(tenant, id) : projection::saga_key(tenant, id);
}

// One call of apply_script: its head (KEYS[1], ARGV[1..3]), then each
// object's key, and its version, document and time to live from `now_ms`.
struct apply_call {
  std::vector<std::string> keys;
  std::vector<std::string> args;
  std::int64_t now_ms = time::now_unix_ms();

  // `o`: an outbox_event or an object_state; `event_ms`: when its event was written.
  void add(const auto& o, std::int64_t event_ms, std::chrono::milliseconds saga_ttl) {
    keys.push_back(key_of(o.kind, o.tenant, o.object_id));
    args.push_back(std::to_string(o.version));
    args.push_back(o.doc);
    args.push_back(std::to_string(projection_ttl_ms(o.settled, event_ms, now_ms, saga_ttl)));
  }
};

delivery failed(const redis::reply& r) {
  return {delivery_status::retry, r.error ? "redis: " + r.error.message() : "redis: " + r.v.text};
}

}  // namespace

std::int64_t projection_ttl_ms(bool settled, std::int64_t event_ms, std::int64_t now_ms,
                               std::chrono::milliseconds saga_ttl) {
  if (!settled || saga_ttl.count() <= 0) return 0;
  const auto left = event_ms + saga_ttl.count() - now_ms;
  return left > 0 ? left : -1;
}

asio::awaitable<delivery> sink::async_begin_rebuild(const std::string&) { co_return delivery{}; }
asio::awaitable<delivery> sink::async_restore(const std::string&, std::span<const object_state>) {
  co_return delivery{};
}
asio::awaitable<delivery> sink::async_finish_rebuild(const std::string&) { co_return delivery{}; }
asio::awaitable<delivery> sink::async_check(const std::string&) { co_return delivery{}; }
asio::awaitable<delivery> sink::async_forget(const std::string&) { co_return delivery{}; }

asio::awaitable<delivery> projection_sink::async_check(const std::string& source) {
  auto r = co_await redis_.async_exec(redis::make_command("EXISTS", projection::source_marker(source)));
  if (!r.ok()) co_return failed(r);
  if (r.v.integer == 0) co_return delivery{delivery_status::rebuild, "projections of " + source + " are missing"};
  co_return delivery{};
}

asio::awaitable<delivery> projection_sink::async_apply(const std::string& source, std::vector<std::string> keys,
                                                       std::vector<std::string> args) {
  auto r = co_await redis_.async_eval(apply_script, std::move(keys), std::move(args));
  if (!r.ok()) co_return failed(r);
  if (r.v.integer == -1) co_return delivery{delivery_status::rebuild, "projections of " + source + " are missing"};
  if (r.v.integer == -2) co_return delivery{delivery_status::rebuild, "Redis lost the rebuild of " + source};
  co_return delivery{};
}

asio::awaitable<delivery> projection_sink::async_deliver(const std::string& source,
                                                         std::span<const outbox_event> events) {
  apply_call call{{projection::source_marker(source)}, {"deliver", "", source}};
  for (const auto& e : events)
    if (!e.doc.empty()) call.add(e, e.created_ms, saga_ttl_);
  co_return co_await async_apply(source, std::move(call.keys), std::move(call.args));
}

asio::awaitable<delivery> projection_sink::async_begin_rebuild(const std::string& source) {
  auto token = std::to_string(random_());
  auto r = co_await redis_.async_exec(redis::make_command("SET", projection::rebuild_key(source), token));
  if (!r.ok()) co_return failed(r);
  rebuilding_[source] = std::move(token);
  co_return delivery{};
}

asio::awaitable<delivery> projection_sink::async_restore(const std::string& source,
                                                         std::span<const object_state> states) {
  apply_call call{{projection::rebuild_key(source)}, {"restore", rebuilding_[source], source}};
  for (const auto& s : states) call.add(s, s.updated_ms, saga_ttl_);
  co_return co_await async_apply(source, std::move(call.keys), std::move(call.args));
}

asio::awaitable<delivery> projection_sink::async_finish_rebuild(const std::string& source) {
  std::vector<std::string> keys{projection::source_marker(source), projection::rebuild_key(source)};
  std::vector<std::string> args{rebuilding_[source], std::to_string(time::now_unix_ms())};
  auto r = co_await redis_.async_eval(finish_script, std::move(keys), std::move(args));
  if (!r.ok()) co_return failed(r);
  if (r.v.integer == -2) co_return delivery{delivery_status::rebuild, "Redis lost the rebuild of " + source};
  rebuilding_.erase(source);
  co_return delivery{};
}

// The marker goes first: until the rebuild that follows marks the source
// complete again, a relay that restarts finds it missing and rebuilds too.
asio::awaitable<delivery> projection_sink::async_forget(const std::string& source) {
  auto r = co_await redis_.async_exec(redis::make_command("DEL", projection::source_marker(source)));
  if (!r.ok()) co_return failed(r);
  for (const auto* pattern : {"tally:account:*", "tally:saga:*"}) {
    std::string at = "0";
    do {
      auto page = co_await redis_.async_exec(
          redis::make_command("SCAN", at, "MATCH", pattern, "COUNT", std::to_string(forget_page)));
      if (!page.ok()) co_return failed(page);
      if (page.v.elements.size() != 2) co_return delivery{delivery_status::retry, "redis: SCAN answered no page"};
      at = page.v.elements[0].text;
      std::vector<std::string> keys;
      for (const auto& k : page.v.elements[1].elements) keys.push_back(k.text);
      if (keys.empty()) continue;
      std::vector<std::string> args{source};
      auto gone = co_await redis_.async_eval(forget_script, std::move(keys), std::move(args));
      if (!gone.ok()) co_return failed(gone);
    } while (at != "0");
  }
  co_return delivery{};
}

}  // namespace tally::relay
