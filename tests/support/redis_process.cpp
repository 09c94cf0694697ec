#include "tests/support/redis_process.hpp"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>

#include "tests/support/shard_process.hpp"

namespace tally::test {

namespace asio = boost::asio;

redis_process::redis_process() : port_(free_port()) {
  char tmpl[] = "/tmp/tally-test-redis.XXXXXX";
  if (mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
}

redis_process::~redis_process() {
  kill9();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

void redis_process::start() {
  const std::string port = std::to_string(port_);
  const std::string log = dir_ + "/redis.log";
  std::vector<std::string> argv{"redis-server", "--bind", "127.0.0.1", "--port", port,        "--save", "",
                                "--appendonly", "no",     "--dir",     dir_,     "--logfile", log};
  pid_ = fork();
  if (pid_ == 0) {
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    execvp("redis-server", cargv.data());
    _exit(127);
  }
  if (!eventually([&] { return ping(); }, std::chrono::seconds(10)))
    throw std::runtime_error("redis-server did not answer on port " + port + " (log " + log + ")");
}

void redis_process::kill9() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

namespace {

// One inline command, and whether its answer is `expected`: read until it
// is whole or differs (no whole reply is the start of another).
bool answers(std::uint16_t port, const std::string& command, std::string_view expected) {
  asio::io_context io;
  asio::ip::tcp::socket s(io);
  boost::system::error_code ec;
  s.connect({asio::ip::make_address("127.0.0.1"), port}, ec);
  if (ec) return false;
  asio::write(s, asio::buffer(command + "\r\n"), ec);
  std::string got;
  char chunk[512];
  while (!ec && got.size() < expected.size() && expected.starts_with(got)) {
    const auto n = s.read_some(asio::buffer(chunk), ec);
    got.append(chunk, n);
  }
  return !ec && got == expected;
}

}  // namespace

bool redis_process::ping() { return answers(port_, "PING", "+PONG\r\n"); }

bool redis_process::exists(const std::string& key) { return answers(port_, "EXISTS " + key, ":1\r\n"); }

bool redis_process::replies(const std::string& command, std::string_view reply) {
  return answers(port_, command, reply);
}

bool redis_process::field_is(const std::string& key, const std::string& field, const std::string& value) {
  return answers(port_, "HGET " + key + " " + field, "$" + std::to_string(value.size()) + "\r\n" + value + "\r\n");
}

}  // namespace tally::test
