#pragma once
// Whether an idle connection's socket can carry a new request.
//
// A server that ended an idle session (a restart, a terminated backend, a
// keep-alive time-out) leaves its last words or the end of the stream in
// the socket. Peeking one byte without blocking tells: "would block" means
// the connection is still open and quiet; EOF, an error or unexpected bytes
// mean it is not, and a request is better sent on a fresh connection than
// lost on this one. A close racing with the send is not caught here.
#include <sys/socket.h>

#include <cerrno>

namespace tally::net {

inline bool idle_socket_usable(int fd) noexcept {
  if (fd < 0) return false;
  char probe = 0;
  // MSG_DONTWAIT: never block, whatever mode the socket is in.
  const auto n = ::recv(fd, &probe, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

}  // namespace tally::net
