#include "tests/support/shard_process.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <cctype>
#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include "tests/support/pg_fixture.hpp"

namespace tally::test {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;

struct http_client::impl {
  asio::io_context io;
  asio::ip::tcp::socket socket{io};
  boost::beast::flat_buffer buffer;
  std::uint16_t port;

  bool ensure_connected() {
    if (socket.is_open()) return true;
    boost::system::error_code ec;
    socket.connect({asio::ip::make_address("127.0.0.1"), port}, ec);
    if (ec) {
      socket.close(ec);
      return false;
    }
    socket.set_option(asio::ip::tcp::no_delay(true), ec);
    buffer.clear();
    return true;
  }

  http_reply read_reply() {
    http_reply out;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(64 * 1024 * 1024);
    boost::system::error_code ec;
    bhttp::read(socket, buffer, parser, ec);
    if (ec) {
      socket.close(ec);
      return out;
    }
    auto res = parser.release();
    out.status = static_cast<int>(res.result_int());
    out.body = std::move(res.body());
    for (const auto& f : res) {
      std::string name(f.name_string());
      for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      out.headers[name] = std::string(f.value());
    }
    if (!res.keep_alive()) socket.close(ec);
    return out;
  }
};

namespace {

// TALLY_RECORD_RESPONSES=<file>: every response of a recorded port (a
// gateway's) is appended to the file as a JSON line, for
// tests/openapi/validate_responses.py to check against docs/openapi.yaml.
std::mutex recording_mutex;
std::set<std::uint16_t> recorded_ports;

bool recorded(std::uint16_t port) {
  std::lock_guard lock(recording_mutex);
  return recorded_ports.contains(port);
}

void record(const std::string& method, const std::string& target, const http_reply& r) {
  const char* file = std::getenv("TALLY_RECORD_RESPONSES");
  if (!file || r.status == 0) return;
  nlohmann::json line{{"method", method},   {"target", target},
                      {"status", r.status}, {"content_type", r.header("content-type")},
                      {"body", r.body},     {"headers", r.headers}};
  std::lock_guard lock(recording_mutex);
  std::ofstream(file, std::ios::app) << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

}  // namespace

void record_responses_of(std::uint16_t port) {
  if (!std::getenv("TALLY_RECORD_RESPONSES")) return;
  std::lock_guard lock(recording_mutex);
  recorded_ports.insert(port);
}

http_client::http_client(std::uint16_t port) : impl_(std::make_unique<impl>()) { impl_->port = port; }
http_client::~http_client() = default;

http_reply http_client::call(const std::string& method, const std::string& target, const std::string& body,
                             const std::string& token, const std::map<std::string, std::string>& headers) {
  if (!impl_->ensure_connected()) return {};
  bhttp::request<bhttp::string_body> req(bhttp::string_to_verb(method), target, 11);
  req.set(bhttp::field::host, "127.0.0.1");
  req.set(bhttp::field::content_type, "application/json");
  if (!token.empty()) req.set(bhttp::field::authorization, "Bearer " + token);
  for (const auto& [k, v] : headers) req.set(k, v);
  req.body() = body;
  req.prepare_payload();
  req.keep_alive(true);
  boost::system::error_code ec;
  bhttp::write(impl_->socket, req, ec);
  if (ec) {
    impl_->socket.close(ec);
    return {};
  }
  auto reply = impl_->read_reply();
  if (recorded(impl_->port)) record(method, target, reply);
  return reply;
}

http_reply http_client::raw(const std::string& bytes) {
  if (!impl_->ensure_connected()) return {};
  boost::system::error_code ec;
  asio::write(impl_->socket, asio::buffer(bytes), ec);
  if (ec) {
    impl_->socket.close(ec);
    return {};
  }
  return impl_->read_reply();
}

std::uint16_t free_port() {
  // The kernel may give two binds in a row the same free port, and a test
  // that asks for two (a shard each) would start both on it (seen in CI: the
  // second shard's bind failed). No port is handed out twice per process.
  static std::mutex mutex;
  static std::set<std::uint16_t> handed_out;
  const std::lock_guard lock(mutex);
  asio::io_context io;
  for (;;) {
    asio::ip::tcp::acceptor a(io, {asio::ip::make_address("127.0.0.1"), 0});
    const auto port = a.local_endpoint().port();
    if (handed_out.insert(port).second) return port;
  }
}

service_process::service_process(std::string binary, std::string env_prefix, std::string conninfo, std::uint16_t port,
                                 std::vector<std::string> args, std::map<std::string, std::string> env)
    : binary_(std::move(binary)),
      env_prefix_(std::move(env_prefix)),
      conninfo_(std::move(conninfo)),
      port_(port),
      args_(std::move(args)),
      env_(std::move(env)) {
  const auto name = binary_.substr(binary_.rfind('/') + 1);
  log_ = "/tmp/tally-" + name + "-" + std::to_string(getpid()) + "-" + std::to_string(port_) + ".log";
}

service_process::~service_process() {
  if (pid_ > 0 && running()) {
    kill9();
    wait_exit();
  }
}

void service_process::start() {
  std::string exe = bin_dir() + "/" + binary_;
  std::vector<std::string> argv{exe, "--listen.port=" + std::to_string(port_), "--log.level=info"};
  argv.insert(argv.end(), args_.begin(), args_.end());
  std::map<std::string, std::string> env = env_;
  env[env_prefix_ + "_DATABASE_CONNINFO"] = conninfo_;
  env[env_prefix_ + "_INTERNAL_TOKEN"] = internal_token;
  pid_ = fork();
  if (pid_ == 0) {
    int fd = open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(fd, 2);
    dup2(fd, 1);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    execv(exe.c_str(), cargv.data());
    _exit(127);
  }
}

namespace {

// Whether `pid` holds a listening IPv4 socket on `port`. Ports come from
// free_port(), so another test process may have taken the same one first:
// then its service answers /readyz on "our" port, and a test would talk to
// the wrong one (seen once in CI: an account opened on another test's shard).
bool listens_on(pid_t pid, std::uint16_t port) {
  std::set<std::string> inodes;
  std::ifstream tcp("/proc/net/tcp");
  std::string line;
  std::getline(tcp, line);  // the header
  while (std::getline(tcp, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
    fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
    const auto colon = local.find(':');
    if (state != "0A" || colon == std::string::npos) continue;  // 0A: LISTEN
    if (std::stoul(local.substr(colon + 1), nullptr, 16) == port) inodes.insert("socket:[" + inode + "]");
  }
  std::error_code ec;
  for (const auto& fd : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    std::error_code link_ec;
    if (inodes.count(std::filesystem::read_symlink(fd.path(), link_ec).string())) return true;
  }
  return false;
}

}  // namespace

bool service_process::wait_ready(std::chrono::milliseconds deadline) {
  return eventually(
      [&] {
        if (!running()) return false;
        http_client c(port_);
        return c.call("GET", "/readyz", "", "").status == 200 && listens_on(pid_, port_);
      },
      deadline);
}

void service_process::kill9() {
  if (pid_ > 0) ::kill(pid_, SIGKILL);
}

void service_process::terminate() {
  if (pid_ > 0) ::kill(pid_, SIGTERM);
}

bool service_process::running() {
  if (pid_ <= 0) return false;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    last_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    pid_ = -1;
    return false;
  }
  return true;
}

int service_process::wait_exit(std::chrono::milliseconds deadline) {
  if (pid_ <= 0) return last_status_;
  if (!eventually([&] { return !running(); }, deadline)) return -1;
  return last_status_;
}

}  // namespace tally::test
