// The env launch's rendezvous (torchrun's MASTER_ADDR / MASTER_PORT): rank 0 listens, the
// others connect. It carries only small control messages (NCCL's unique id, barriers);
// tensors go through NCCL.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace rlx::dist::detail {

class Store {
 public:
  // Blocks until every rank has joined, or timeout_s has passed (IoError).
  Store(const std::string& addr, int port, int rank, int size, double timeout_s);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  void broadcast(void* data, size_t n);  // from rank 0
  void barrier();

 private:
  int rank_, size_;
  int listen_fd_ = -1;
  std::vector<int> peers_;  // rank 0: one socket per rank (index 0 unused); else [0]: rank 0
};

}  // namespace rlx::dist::detail
