#pragma once
// The short names the load generator's coroutines (load.cpp, setup.cpp) use.
#include <chrono>

#include <boost/asio/awaitable.hpp>
#include <boost/beast/http/verb.hpp>

namespace tally::bench {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using clock_type = std::chrono::steady_clock;

}  // namespace tally::bench
