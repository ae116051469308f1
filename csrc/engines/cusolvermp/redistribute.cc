// Redistribution on the grid: between the JAX block layout and block-cyclic tiles (Remap), a
// distributed adjoint (Geadd) and a column permutation (PermuteColumns).
#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "common/chunk.h"
#include "common/deferred.h"
#include "common/scalar.h"
#include "common/symmetry.h"
#include "cuda/kernels.h"
#include "engines/cusolvermp/engine.h"
#include "engines/cusolvermp/engine_internal.h"
#include "engines/cusolvermp/engine_util.h"
#include "engines/cusolvermp/local_blas.h"

namespace jaxmg::cusolvermp {

int64_t Engine::RemapBuffers::Sent(int qr, int qc) const {
  return static_cast<int64_t>(rows->send[qr].size() * cols->send[qc].size());
}

int64_t Engine::RemapBuffers::Received(int qr, int qc) const {
  return static_cast<int64_t>(rows->recv[qr].size() * cols->recv[qc].size());
}

template <typename T>
Status Engine::Redistribute(const void* from, bool to_tiles, void* to, const Status& allocated,
                            int64_t rows) {
  // Between the block layout (block (v, u) of the engine matrix on grid position (v, u), leading
  // dimension the shard's rows) and block-cyclic tiles. The ranks agree that every one of them
  // has its buffers (`allocated`: the caller's, and the exchange's) before the exchange, so that
  // a device short of scratch gives an error on all of them instead of leaving its peers in
  // NCCL. rows: the matrix's (engine) rows, its columns the engine matrix's (rows < 0: the
  // engine matrix itself).
  const layout::Plan& plan = state_.plan;
  const int64_t m = rows < 0 ? plan.rows.extent : rows, n = plan.cols.extent, t = plan.tile;
  const int64_t block = m / plan.mesh_cols;
  const int64_t ld = rows < 0 ? local_rows_ : CyclicAxis{t, ctx_.nprow, ctx_.myrow}.Extent(m);
  const Blocked blocks{block, plan.cols.shard, block};
  const Blocked tiles{t, t, std::max<int64_t>(ld, 1)};
  RemapBuffers r;
  const Status buffers = allocated.ok() ? (to_tiles ? RemapPrepare<T>(blocks, tiles, m, n, &r)
                                                    : RemapPrepare<T>(tiles, blocks, m, n, &r))
                                        : allocated;
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(buffers));
  return RemapRun<T>(from, to, r);
}

template <typename T>
Status Engine::RemapPrepare(const Blocked& f, const Blocked& d, int64_t m, int64_t n,
                            RemapBuffers* r) {
  // Row and column maps are independent: what goes from this process to grid position (qr, qc)
  // is rows.send[qr] x cols.send[qc], and what comes from it rows.recv[qr] x cols.recv[qc], each
  // side listing them by increasing global index. Every list goes to the device, one after the
  // other.
  const int P = ctx_.nprow, Q = ctx_.npcol;
  r->f = f;
  r->d = d;
  r->rows = std::make_shared<AxisExchange>(m, f.rows, d.rows, P, ctx_.myrow);
  r->cols = std::make_shared<AxisExchange>(n, f.cols, d.cols, Q, ctx_.mycol);
  std::vector<int64_t> idx;
  auto place = [&idx](const std::vector<int64_t>& v) {
    const size_t at = idx.size();
    idx.insert(idx.end(), v.begin(), v.end());
    return at;
  };
  r->rs.resize(P), r->rr.resize(P), r->cs.resize(Q), r->cr.resize(Q);
  for (int q = 0; q < P; ++q)
    r->rs[q] = place(r->rows->send[q]), r->rr[q] = place(r->rows->recv[q]);
  for (int q = 0; q < Q; ++q)
    r->cs[q] = place(r->cols->send[q]), r->cr[q] = place(r->cols->recv[q]);
  int64_t sent = 0, received = 0;
  for (int qr = 0; qr < P; ++qr) {
    for (int qc = 0; qc < Q; ++qc) {
      if (qr == ctx_.myrow && qc == ctx_.mycol) continue;
      sent += r->Sent(qr, qc);
      received += r->Received(qr, qc);
    }
  }
  void* d_idx = nullptr;
  JAXMG_RETURN_IF_ERROR(Scratch(sizeof(int64_t) * std::max<size_t>(idx.size(), 1), &d_idx));
  if (sent + received > 0) {
    JAXMG_RETURN_IF_ERROR(Scratch(sizeof(T) * std::max<int64_t>(sent, 1), &r->packed));
    JAXMG_RETURN_IF_ERROR(Scratch(sizeof(T) * std::max<int64_t>(received, 1), &r->unpacked));
  }
  // Pageable: the copy has read `idx` when cudaMemcpyAsync returns.
  JAXMG_CUDA(cudaMemcpyAsync(d_idx, idx.data(), sizeof(int64_t) * idx.size(),
                             cudaMemcpyHostToDevice, stream_));
  r->idx = static_cast<const int64_t*>(d_idx);
  return Status();
}

template <typename T>
Status Engine::RemapRun(const void* from, void* to, const RemapBuffers& r) {
  // The part that stays is moved on the device; the rest is packed per peer, exchanged in one
  // NCCL group (rank = row * npcol + column) and unpacked. Traffic: the entries that change
  // process, once.
  const int P = ctx_.nprow, Q = ctx_.npcol, me_r = ctx_.myrow, me_c = ctx_.mycol;
  const AxisExchange &rows = *r.rows, &cols = *r.cols;
  const int64_t* ix = r.idx;
  const cuda::Dtype dt = KernelType<T>();
  auto count = [](const std::vector<int64_t>& v) { return static_cast<int64_t>(v.size()); };
  JAXMG_CUDA(cuda::MoveBlock(dt, from, r.f.ld, ix + r.rs[me_r], ix + r.cs[me_c],
                             count(rows.send[me_r]), count(cols.send[me_c]), to, r.d.ld,
                             ix + r.rr[me_r], ix + r.cr[me_c], stream_));
  if (r.packed == nullptr) return Status();
  T* out = static_cast<T*>(r.packed);
  for (int qr = 0; qr < P; ++qr) {
    for (int qc = 0; qc < Q; ++qc) {
      if (qr == me_r && qc == me_c) continue;
      const int64_t nr = count(rows.send[qr]), nc = count(cols.send[qc]);
      JAXMG_CUDA(cuda::MoveBlock(dt, from, r.f.ld, ix + r.rs[qr], ix + r.cs[qc], nr, nc, out,
                                 std::max<int64_t>(nr, 1), nullptr, nullptr, stream_));
      out += nr * nc;
    }
  }
  JAXMG_NCCL(ncclGroupStart());
  T* sp = static_cast<T*>(r.packed);
  T* rp = static_cast<T*>(r.unpacked);
  for (int qr = 0; qr < P; ++qr) {
    for (int qc = 0; qc < Q; ++qc) {
      if (qr == me_r && qc == me_c) continue;
      const int peer = qr * Q + qc;
      const int64_t ns = r.Sent(qr, qc), nr = r.Received(qr, qc);
      if (ns > 0) JAXMG_NCCL(ncclSend(sp, sizeof(T) * ns, ncclChar, peer, ctx_.comm, stream_));
      if (nr > 0) JAXMG_NCCL(ncclRecv(rp, sizeof(T) * nr, ncclChar, peer, ctx_.comm, stream_));
      sp += ns;
      rp += nr;
    }
  }
  JAXMG_NCCL(ncclGroupEnd());
  const T* in = static_cast<const T*>(r.unpacked);
  for (int qr = 0; qr < P; ++qr) {
    for (int qc = 0; qc < Q; ++qc) {
      if (qr == me_r && qc == me_c) continue;
      const int64_t nr = count(rows.recv[qr]), nc = count(cols.recv[qc]);
      JAXMG_CUDA(cuda::MoveBlock(dt, in, std::max<int64_t>(nr, 1), nullptr, nullptr, nr, nc, to,
                                 r.d.ld, ix + r.rr[qr], ix + r.cr[qc], stream_));
      in += nr * nc;
    }
  }
  return Status();
}

template <typename U>
Status Engine::GridAdjoint(const void* src, void* dst) {
  const layout::Plan& plan = state_.plan;
  const int64_t n = plan.engine_rows(), t = plan.tile, ld = std::max<int64_t>(local_rows_, 1);
  BlasDescriptor ds, dd;
  const cublasOperation_t adjoint = AdjointOp<U>();
  const auto geadd = [&] {
    return vendor::BlasMpGeadd<U>{ctx_.blas, adjoint,
                                  n,         n,
                                  U(1),      {static_cast<const U*>(src), 1, 1, ds.get()},
                                  U(0),      {static_cast<U*>(dst), 1, 1, dd.get()}};
  };
  size_t dev = 0, host = 0;
  vendor::Work work;
  // Descriptors and workspace, agreed before the collective Geadd.
  Deferred local;
  local.Run([&]() -> Status {
    JAXMG_RETURN_IF_ERROR(ds.Create(ctx_, DataTypeOf<U>(), n, n, t, t, ld));
    JAXMG_RETURN_IF_ERROR(dd.Create(ctx_, DataTypeOf<U>(), n, n, t, t, ld));
    JAXMG_CUDA(cudaMemsetAsync(dst, 0, sizeof(U) * local_rows_ * local_cols_, stream_));
    JAXMG_BLASMP(cublasMpSetStream(ctx_.blas, stream_));
    JAXMG_RETURN_IF_ERROR(vendor::Size(geadd(), &dev, &host));
    return Workspace(dev, host, &work);
  });
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(local.status()));
  return vendor::Run(geadd(), work);
}

template <typename T>
Status Engine::PermuteColumns(const void* x, void* out, const std::vector<int64_t>& order,
                              Deferred* failed) {
  // Column i of x goes to column order[i] of out (engine-global columns, block-cyclic over the
  // process columns; every process row the same): moved on the device where both are local, and
  // otherwise packed, sent within the process row (NCCL, rank = row * npcol + column) and
  // unpacked. Each pair of process columns lists its columns by increasing source index.
  const layout::Plan& plan = state_.plan;
  const int64_t n = plan.engine_cols(), t = plan.tile, lr = local_rows_;
  const int64_t ld = std::max<int64_t>(lr, 1);
  const int npc = ctx_.npcol, me = ctx_.mycol;
  auto owner = [&](int64_t g) { return static_cast<int>((g / t) % npc); };
  auto local = [&](int64_t g) { return (g / (t * npc)) * t + g % t; };
  // Per peer column q: my source columns bound for q (send) and my destination columns fed by q
  // (recv), local indices; own: both sides of the columns that stay.
  std::vector<std::vector<int64_t>> send(npc), recv(npc);
  std::vector<int64_t> own_from, own_to;
  for (int64_t i = 0; i < n; ++i) {
    const int p = owner(i), q = owner(order[i]);
    if (p == me && q == me) {
      own_from.push_back(local(i));
      own_to.push_back(local(order[i]));
    } else if (p == me) {
      send[q].push_back(local(i));
    } else if (q == me) {
      recv[p].push_back(local(order[i]));
    }
  }
  // Index lists on the device: own_from, own_to, then every send list, then every recv list.
  std::vector<int64_t> idx(own_from);
  idx.insert(idx.end(), own_to.begin(), own_to.end());
  for (const auto& v : send) idx.insert(idx.end(), v.begin(), v.end());
  const size_t recv_at = idx.size();
  for (const auto& v : recv) idx.insert(idx.end(), v.begin(), v.end());
  const int64_t owned = static_cast<int64_t>(own_from.size());
  const int64_t sent = static_cast<int64_t>(recv_at) - 2 * owned;
  const int64_t received = static_cast<int64_t>(idx.size() - recv_at);
  const size_t col_bytes = sizeof(T) * lr;
  // Buffers first, agreed (the moves below are collective), then the local moves, skipped after
  // a local failure (the sends then carry whatever the buffers hold).
  void *d_idx = nullptr, *packed = nullptr, *unpacked = nullptr;
  Deferred buffers;
  buffers.Run([&] { return Scratch(sizeof(int64_t) * std::max<size_t>(idx.size(), 1), &d_idx); });
  buffers.Run([&] { return Scratch(col_bytes * std::max<int64_t>(sent, 1), &packed); });
  buffers.Run([&] { return Scratch(col_bytes * std::max<int64_t>(received, 1), &unpacked); });
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("inv", buffers));
  const int64_t* d = static_cast<const int64_t*>(d_idx);
  failed->Run([&]() -> Status {
    // Pageable: the copy has read `idx` when cudaMemcpyAsync returns.
    JAXMG_CUDA(cudaMemcpyAsync(d_idx, idx.data(), sizeof(int64_t) * idx.size(),
                               cudaMemcpyHostToDevice, stream_));
    JAXMG_CUDA(cuda::MoveBlock(KernelType<T>(), x, ld, nullptr, d, lr, owned, out, ld, nullptr,
                               d + owned, stream_));
    if (sent == 0) return Status();
    JAXMG_CUDA(cuda::MoveBlock(KernelType<T>(), x, ld, nullptr, d + 2 * owned, lr, sent, packed, ld,
                               nullptr, nullptr, stream_));
    return Status();
  });
  if (sent == 0 && received == 0) return Status();
  JAXMG_NCCL(ncclGroupStart());
  int64_t s0 = 0, r0 = 0;
  for (int q = 0; q < npc; ++q) {
    const int peer = ctx_.myrow * npc + q;
    const int64_t ns = static_cast<int64_t>(send[q].size()),
                  nr = static_cast<int64_t>(recv[q].size());
    if (ns > 0) {
      JAXMG_NCCL(ncclSend(static_cast<char*>(packed) + s0 * col_bytes, ns * col_bytes, ncclChar,
                          peer, ctx_.comm, stream_));
    }
    if (nr > 0) {
      JAXMG_NCCL(ncclRecv(static_cast<char*>(unpacked) + r0 * col_bytes, nr * col_bytes, ncclChar,
                          peer, ctx_.comm, stream_));
    }
    s0 += ns;
    r0 += nr;
  }
  JAXMG_NCCL(ncclGroupEnd());
  if (received == 0) return Status();
  failed->Run([&] {
    return CudaCheck(cuda::MoveBlock(KernelType<T>(), unpacked, ld, nullptr, nullptr, lr, received,
                                     out, ld, nullptr, d + recv_at, stream_),
                     "MoveBlock");
  });
  return Status();
}

#define JAXMG_INSTANTIATE_REDISTRIBUTE(T)                                                 \
  template Status Engine::Redistribute<T>(const void* from, bool to_tiles, void* to,      \
                                          const Status& allocated, int64_t rows);         \
  template Status Engine::RemapPrepare<T>(const Blocked& f, const Blocked& d, int64_t m,  \
                                          int64_t n, RemapBuffers* r);                    \
  template Status Engine::RemapRun<T>(const void* from, void* to, const RemapBuffers& r); \
  template Status Engine::GridAdjoint<T>(const void* src, void* dst);                     \
  template Status Engine::PermuteColumns<T>(const void* x, void* out,                     \
                                            const std::vector<int64_t>& order, Deferred* failed);
JAXMG_FOR_EACH_SCALAR(JAXMG_INSTANTIATE_REDISTRIBUTE)
#undef JAXMG_INSTANTIATE_REDISTRIBUTE

}  // namespace jaxmg::cusolvermp
