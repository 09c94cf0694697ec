#include "common/redis/connection.hpp"

#include <hiredis/hiredis.h>

#include <utility>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/tcp_stream.hpp>

namespace tally::redis {

namespace asio = boost::asio;
namespace beast = boost::beast;
using boost::system::error_code;
using tcp = asio::ip::tcp;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
constexpr std::size_t read_chunk = 16 * 1024;

value convert(const redisReply& r) {
  value v;
  switch (r.type) {
    case REDIS_REPLY_INTEGER:
      v.type = value::kind::integer;
      v.integer = r.integer;
      break;
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
      v.type = r.type == REDIS_REPLY_STRING   ? value::kind::string
               : r.type == REDIS_REPLY_STATUS ? value::kind::status
                                              : value::kind::error;
      v.text.assign(r.str, r.len);
      break;
    case REDIS_REPLY_ARRAY:
      v.type = value::kind::array;
      v.elements.reserve(r.elements);
      for (std::size_t i = 0; i < r.elements; ++i) v.elements.push_back(convert(*r.element[i]));
      break;
    default: break;  // nil
  }
  return v;
}

void append_formatted(std::string& out, const command& c) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  argv.reserve(c.size());
  lengths.reserve(c.size());
  for (const auto& a : c) {
    argv.push_back(a.data());
    lengths.push_back(a.size());
  }
  char* formatted = nullptr;
  const int n = redisFormatCommandArgv(&formatted, static_cast<int>(argv.size()), argv.data(), lengths.data());
  if (n < 0 || formatted == nullptr) throw std::bad_alloc();
  out.append(formatted, static_cast<std::size_t>(n));
  redisFreeCommand(formatted);
}

struct reader_deleter {
  void operator()(redisReader* r) const { redisReaderFree(r); }
};
struct reply_deleter {
  void operator()(void* r) const { freeReplyObject(r); }
};

}  // namespace

struct connection::impl {
  explicit impl(asio::any_io_executor ex) : stream(std::move(ex)) {}

  beast::tcp_stream stream;
  std::unique_ptr<redisReader, reader_deleter> reader;
  std::string out;
  std::vector<char> in = std::vector<char>(read_chunk);
  bool open = false;
};

connection::connection(asio::any_io_executor ex) : impl_(std::make_unique<impl>(std::move(ex))) {}
connection::~connection() = default;

bool connection::is_open() const { return impl_->open; }

void connection::close() {
  impl_->open = false;
  impl_->reader.reset();
  impl_->stream.close();
}

asio::awaitable<error_code> connection::async_connect(const std::string& host, std::uint16_t port,
                                                      std::chrono::milliseconds timeout) {
  close();
  error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  if (ec) co_return ec;
  impl_->stream.expires_after(timeout);
  auto [connect_ec] = co_await impl_->stream.async_connect(tcp::endpoint(address, port), use_tuple);
  if (connect_ec) {
    impl_->stream.close();
    co_return connect_ec;
  }
  impl_->stream.socket().set_option(tcp::no_delay(true), ec);
  impl_->reader.reset(redisReaderCreate());
  if (!impl_->reader) throw std::bad_alloc();
  impl_->open = true;
  co_return error_code{};
}

asio::awaitable<error_code> connection::async_roundtrip(std::span<const command> commands, std::vector<reply>& out,
                                                        std::chrono::milliseconds timeout) {
  out.assign(commands.size(), reply{});
  auto fail = [&](error_code ec) {
    if (ec == beast::error::timeout) ec = asio::error::timed_out;
    close();
    for (auto& r : out) r.error = ec;
    return ec;
  };
  if (!impl_->open) co_return fail(asio::error::not_connected);
  impl_->out.clear();
  for (const auto& c : commands) append_formatted(impl_->out, c);

  impl_->stream.expires_after(timeout);
  auto [write_ec, written] = co_await asio::async_write(impl_->stream, asio::buffer(impl_->out), use_tuple);
  if (write_ec) co_return fail(write_ec);

  std::size_t done = 0;
  while (done < commands.size()) {
    void* raw = nullptr;
    if (redisReaderGetReply(impl_->reader.get(), &raw) != REDIS_OK) co_return fail(asio::error::invalid_argument);
    if (raw != nullptr) {
      const std::unique_ptr<void, reply_deleter> owned(raw);
      out[done++].v = convert(*static_cast<redisReply*>(raw));
      continue;
    }
    auto [read_ec, n] = co_await impl_->stream.async_read_some(asio::buffer(impl_->in), use_tuple);
    if (read_ec) co_return fail(read_ec);
    if (redisReaderFeed(impl_->reader.get(), impl_->in.data(), n) != REDIS_OK)
      co_return fail(asio::error::invalid_argument);
  }
  impl_->stream.expires_never();
  co_return error_code{};
}

}  // namespace tally::redis
