#include "relay/sink/projection_sink.hpp"

#include <chrono>

#include "common/projection/keys.hpp"

namespace tally::relay {

namespace asio = boost::asio;

namespace {

// KEYS[1]: the source's marker; KEYS[2..]: objects. ARGV[1]: "deliver" or
// "restore"; then each object's version and document in turn.
const redis::script apply_script(R"lua(
if ARGV[1] == 'deliver' and redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local applied = 0
for i = 2, #KEYS do
  local version = tonumber(ARGV[2 * i - 2])
  local current = tonumber(redis.call('HGET', KEYS[i], 'v') or '-1')
  if current < version then
    redis.call('HSET', KEYS[i], 'v', ARGV[2 * i - 2], 'doc', ARGV[2 * i - 1])
    applied = applied + 1
  end
end
return applied
)lua");

std::string key_of(object_kind kind, const std::string& tenant, const std::string& id) {
  return kind == object_kind::account ? projection::account_key(tenant, id) : projection::saga_key(tenant, id);
}

delivery failed(const redis::reply& r) {
  return {delivery_status::retry, r.error ? "redis: " + r.error.message() : "redis: " + r.v.text};
}

}  // namespace

asio::awaitable<delivery> sink::async_restore(const std::string&, std::span<const object_state>) {
  co_return delivery{};
}
asio::awaitable<delivery> sink::async_finish_rebuild(const std::string&) { co_return delivery{}; }
asio::awaitable<delivery> sink::async_check(const std::string&) { co_return delivery{}; }

asio::awaitable<delivery> projection_sink::async_check(const std::string& source) {
  auto r = co_await redis_.async_exec(redis::make_command("EXISTS", projection::source_marker(source)));
  if (!r.ok()) co_return failed(r);
  if (r.v.integer == 0) co_return delivery{delivery_status::rebuild, "projections of " + source + " are missing"};
  co_return delivery{};
}

asio::awaitable<delivery> projection_sink::async_apply(const std::string& source, bool restoring,
                                                       std::vector<std::string> keys, std::vector<std::string> args) {
  auto r = co_await redis_.async_eval(apply_script, std::move(keys), std::move(args));
  if (!r.ok()) co_return failed(r);
  if (!restoring && r.v.integer < 0) co_return delivery{delivery_status::rebuild, "projections of " + source + " are missing"};
  co_return delivery{};
}

asio::awaitable<delivery> projection_sink::async_deliver(const std::string& source,
                                                         std::span<const outbox_event> events) {
  std::vector<std::string> keys{projection::source_marker(source)};
  std::vector<std::string> args{"deliver"};
  for (const auto& e : events) {
    if (e.doc.empty()) continue;
    keys.push_back(key_of(e.kind, e.tenant, e.object_id));
    args.push_back(std::to_string(e.version));
    args.push_back(e.doc);
  }
  co_return co_await async_apply(source, false, std::move(keys), std::move(args));
}

asio::awaitable<delivery> projection_sink::async_restore(const std::string& source,
                                                         std::span<const object_state> states) {
  std::vector<std::string> keys{projection::source_marker(source)};
  std::vector<std::string> args{"restore"};
  for (const auto& s : states) {
    keys.push_back(key_of(s.kind, s.tenant, s.object_id));
    args.push_back(std::to_string(s.version));
    args.push_back(s.doc);
  }
  co_return co_await async_apply(source, true, std::move(keys), std::move(args));
}

asio::awaitable<delivery> projection_sink::async_finish_rebuild(const std::string& source) {
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch());
  auto r = co_await redis_.async_exec(redis::make_command("SET", projection::source_marker(source),
                                                          std::to_string(now.count())));
  if (!r.ok()) co_return failed(r);
  co_return delivery{};
}

}  // namespace tally::relay
