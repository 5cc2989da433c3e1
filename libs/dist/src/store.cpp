#include "store.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>

#include "rlx/error.h"

namespace rlx::dist::detail {

namespace {

constexpr const char* kWhere = "dist.rendezvous";

[[noreturn]] void io_fail(const std::string& what) {
  fail<IoError>(kWhere, what, ": ", std::strerror(errno));
}

void send_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t k = ::send(fd, c, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) io_fail("expected to send to a peer rank, got an error");
    c += k;
    n -= size_t(k);
  }
}

void recv_all(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t k = ::recv(fd, c, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k == 0)
      fail<IoError>(kWhere, "expected a message from a peer rank, got a closed connection");
    if (k < 0) io_fail("expected a message from a peer rank, got an error");
    c += k;
    n -= size_t(k);
  }
}

addrinfo* resolve(const std::string& addr, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(addr.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0)
    fail<IoError>(kWhere, "expected MASTER_ADDR to resolve, got '", addr, "': ", gai_strerror(rc));
  return res;
}

}  // namespace

Store::Store(const std::string& addr, int port, int rank, int size, double timeout_s)
    : rank_(rank), size_(size) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  addrinfo* ai = resolve(addr, port);
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> hold(ai, ::freeaddrinfo);
  if (rank == 0) {
    peers_.assign(size_t(size), -1);
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in any{};
    any.sin_family = AF_INET;
    any.sin_port = htons(uint16_t(port));
    any.sin_addr.s_addr = htonl(INADDR_ANY);
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&any), sizeof any) != 0)
      io_fail(str_cat("expected to listen on MASTER_PORT ", port));
    ::listen(listen_fd_, size);
    for (int joined = 1; joined < size;) {
      int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) io_fail("expected the other ranks to connect");
      int32_t r = -1;
      recv_all(fd, &r, sizeof r);
      if (r <= 0 || r >= size || peers_[size_t(r)] >= 0) {
        ::close(fd);
        fail<IoError>(kWhere, "expected each rank in [1, ", size, ") to join once, got rank ", r);
      }
      peers_[size_t(r)] = fd;
      ++joined;
    }
  } else {
    int fd = -1;
    while (true) {  // rank 0 may not listen yet: retry until the deadline
      fd = ::socket(AF_INET, SOCK_STREAM, 0);
      if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) break;
      ::close(fd);
      if (std::chrono::steady_clock::now() > deadline)
        io_fail(str_cat("expected rank 0 at ", addr, ":", port, " within ", timeout_s, " s"));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int32_t r = rank;
    send_all(fd, &r, sizeof r);
    peers_ = {fd};
  }
}

Store::~Store() {
  for (int fd : peers_)
    if (fd >= 0) ::close(fd);
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

void Store::broadcast(void* data, size_t n) {
  if (rank_ == 0) {
    for (int r = 1; r < size_; ++r) send_all(peers_[size_t(r)], data, n);
  } else {
    recv_all(peers_[0], data, n);
  }
}

void Store::barrier() {
  char b = 1;
  if (rank_ == 0) {
    for (int r = 1; r < size_; ++r) recv_all(peers_[size_t(r)], &b, 1);
    for (int r = 1; r < size_; ++r) send_all(peers_[size_t(r)], &b, 1);
  } else {
    send_all(peers_[0], &b, 1);
    recv_all(peers_[0], &b, 1);
  }
}

}  // namespace rlx::dist::detail
