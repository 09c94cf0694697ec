#pragma once
// Internal to common/http: the Asio and Beast names the client and the
// server both speak in, and the completion token that gives their
// operations' errors back as values.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/system/error_code.hpp>

namespace tally::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;

inline constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

}  // namespace tally::http
