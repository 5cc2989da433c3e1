// What the dist sources share: the world's state, and the helpers the kernels use.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>

#include "rlx/dist.h"
#include "rlx/op.h"

namespace rlx::dist::detail {

class Store;  // store.h: the env launch's TCP rendezvous

struct World {
  std::unique_ptr<ProcessGroup> pg;
  InitOptions options;
  bool mpi = false;  // MPI_Init was called by us
  std::unique_ptr<Store> store;
  // MPI is initialised MPI_THREAD_SERIALIZED: one collective at a time per process.
  std::mutex mu;
};

World& world_state();  // ValueError before init()

// n bytes from root to every rank, outside any graph: MPI_Bcast, or the TCP store (root
// 0 only). NCCL's unique id travels this way.
void broadcast_bytes(void* data, size_t n, int root);

// The group a node names, checked against its size attribute (the graph may have been
// built for another world size).
const ProcessGroup& group_of(const Attrs& attrs, const std::string& op);
ReduceOp reduce_op_of(const Attrs& attrs);

void register_cpu_kernels();   // cpu_kernels.cpp (MPI)
void register_nccl_kernels();  // nccl_kernels.cpp (NCCL), or a no-op without it

}  // namespace rlx::dist::detail
