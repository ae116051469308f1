#include "engines/cusolvermp/engine.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/chunk.h"
#include "common/deferred.h"
#include "common/scalar.h"
#include "common/symmetry.h"
#include "cuda/kernels.h"
#include "engines/cusolvermp/engine_util.h"
#include "engines/cusolvermp/local_blas.h"

namespace jaxmg::cusolvermp {
namespace {

using layout::CyclicLocalExtent;

// Tile permutations on the device: the layout core's cycle-following moves, one tile of scratch.
Status PermuteColumnTiles(char* a, int64_t ld, int64_t tile, size_t es,
                          const std::vector<int64_t>& perm, char* scratch, cudaStream_t stream) {
  const size_t bytes = es * ld * tile;
  auto at = [&](int64_t j) { return j == layout::kScratchTile ? scratch : a + j * bytes; };
  for (const layout::TileMove& m : layout::TileMoves(perm)) {
    JAXMG_CUDA(cudaMemcpyAsync(at(m.dst), at(m.src), bytes, cudaMemcpyDeviceToDevice, stream));
  }
  return Status();
}

Status PermuteRowTiles(char* a, int64_t ld, int64_t cols, int64_t tile, size_t es,
                       const std::vector<int64_t>& perm, char* scratch, cudaStream_t stream) {
  const size_t width = es * tile;
  auto at = [&](int64_t j) { return j == layout::kScratchTile ? scratch : a + j * width; };
  auto pitch = [&](int64_t j) { return j == layout::kScratchTile ? width : es * ld; };
  for (const layout::TileMove& m : layout::TileMoves(perm)) {
    JAXMG_CUDA(cudaMemcpy2DAsync(at(m.dst), pitch(m.dst), at(m.src), pitch(m.src), width, cols,
                                 cudaMemcpyDeviceToDevice, stream));
  }
  return Status();
}

// RAII cuBLASMp descriptor (for Gemr2D).
class BlasDescriptor {
 public:
  ~BlasDescriptor() {
    if (desc_) cublasMpMatrixDescriptorDestroy(desc_);
  }
  Status Create(Context& c, cudaDataType dt, int64_t m, int64_t n, int64_t mb, int64_t nb,
                int64_t lld) {
    JAXMG_BLASMP(cublasMpMatrixDescriptorCreate(m, n, mb, nb, 0, 0, lld, dt, c.blas_grid, &desc_));
    return Status();
  }
  cublasMpMatrixDescriptor_t get() const { return desc_; }

 private:
  cublasMpMatrixDescriptor_t desc_ = nullptr;
};

template <typename T>
constexpr cublasComputeType_t ComputeOf() {
  return sizeof(RealOf<T>) == 4 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_64F;
}

// cuBLASMp descriptors of QDWH's matrices: U (m x n, the engine matrix's layout, local rows lu)
// and Z (n x n, local rows lz), both in tiles of t.
struct PolarLayouts {
  BlasDescriptor u, z;
  template <typename T>
  Status Create(Context& c, int64_t m, int64_t n, int64_t t, int64_t lu, int64_t lz) {
    JAXMG_RETURN_IF_ERROR(u.Create(c, DataTypeOf<T>(), m, n, t, t, std::max<int64_t>(lu, 1)));
    return z.Create(c, DataTypeOf<T>(), n, n, t, t, std::max<int64_t>(lz, 1));
  }
};

// NonFinite's value when every entry is finite (its buffer is set with the byte 0x7f).
constexpr int32_t kNoColumn = 0x7f7f7f7f;

// RowsOut's chunks: bounded so that its scratch stays small.
constexpr size_t kRowsOutChunkBytes = size_t{1} << 30;

}  // namespace

Descriptor::~Descriptor() {
  if (desc_) cusolverMpDestroyMatrixDesc(desc_);
}

Status Descriptor::Create(Context& c, cudaDataType dt, int64_t m, int64_t n, int64_t mb, int64_t nb,
                          int64_t lld) {
  JAXMG_SOLVER(cusolverMpCreateMatrixDesc(&desc_, c.grid, dt, m, n, mb, nb, 0, 0, lld));
  return Status();
}

Status Engine::Scratch(size_t bytes, void** out) {
  auto p = scratch_.Allocate(std::max<size_t>(bytes, 256), 16);
  if (!p.has_value()) {
    return Status::Error("jaxmg: XLA could not provide " + std::to_string(bytes) +
                         " bytes of GPU scratch (lower XLA_PYTHON_CLIENT_MEM_FRACTION to leave "
                         "room, or use a smaller tile)");
  }
  *out = *p;
  return Status();
}

Status Engine::Workspace(size_t bytes, size_t host_bytes, void** out) {
  if (Debug()) {
    std::fprintf(stderr, "[jaxmg] engine workspace: %zu device bytes, %zu host bytes\n", bytes,
                 host_bytes);
  }
  if (bytes > workspace_bytes_ || workspace_ == nullptr) {
    JAXMG_RETURN_IF_ERROR(Scratch(bytes, &workspace_));
    workspace_bytes_ = std::max<size_t>(bytes, 256);
  }
  if (ctx_.host_work.size() < std::max<size_t>(host_bytes, 1)) {
    ctx_.host_work.resize(std::max<size_t>(host_bytes, 1));
  }
  *out = workspace_;
  return Status();
}

int64_t Engine::RemapBuffers::Sent(int qr, int qc) const {
  return static_cast<int64_t>(rows->send[qr].size() * cols->send[qc].size());
}

int64_t Engine::RemapBuffers::Received(int qr, int qc) const {
  return static_cast<int64_t>(rows->recv[qr].size() * cols->recv[qc].size());
}

template <typename T>
Status Engine::Redistribute(const void* from, bool to_tiles, void* to, const Status& allocated) {
  // Between the block layout (block (v, u) of the engine matrix on grid position (v, u), leading
  // dimension the shard's rows) and block-cyclic tiles. The ranks agree that every one of them
  // has its buffers (`allocated`: the caller's, and the exchange's) before the exchange, so that
  // a device short of scratch gives an error on all of them instead of leaving its peers in
  // NCCL.
  const layout::Plan& plan = state_.plan;
  const int64_t m = plan.rows.extent, n = plan.cols.extent, t = plan.tile;
  const Blocked blocks{plan.rows.shard, plan.cols.shard, plan.rows.shard};
  const Blocked tiles{t, t, std::max<int64_t>(local_rows_, 1)};
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

Status Engine::Small() {
  if (small_ != nullptr) return Status();
  void* small = nullptr;
  JAXMG_RETURN_IF_ERROR(Scratch(64, &small));
  small_ = static_cast<int32_t*>(small);
  JAXMG_CUDA(cudaMemsetAsync(small_, 0, 64, stream_));
  JAXMG_CUDA(cudaMemsetAsync(small_ + 8, 0x7f, 2 * sizeof(int32_t), stream_));  // kNoColumn
  return Status();
}

Status Engine::LocalHandle(const LocalBlas** lb, cublasHandle_t* handle) {
  JAXMG_RETURN_IF_ERROR(GetLocalBlas(lb));
  if (ctx_.local_blas == nullptr) {
    cublasHandle_t h = nullptr;
    JAXMG_RETURN_IF_ERROR(CublasCheck((*lb)->create(&h), "cublasCreate"));
    ctx_.local_blas = h;
  }
  *handle = static_cast<cublasHandle_t>(ctx_.local_blas);
  return CublasCheck((*lb)->set_stream(*handle, stream_), "cublasSetStream");
}

Status Engine::LocalSolver(const LocalBlas** lb, cublasHandle_t* blas, cusolverDnHandle_t* dn,
                           cusolverDnParams_t* params) {
  JAXMG_RETURN_IF_ERROR(LocalHandle(lb, blas));
  if (ctx_.dn == nullptr) {
    cusolverDnHandle_t h = nullptr;
    cusolverDnParams_t p = nullptr;
    JAXMG_SOLVER((*lb)->dn_create(&h));
    JAXMG_SOLVER((*lb)->dn_create_params(&p));
    ctx_.dn = h;
    ctx_.dn_params = p;
  }
  *dn = static_cast<cusolverDnHandle_t>(ctx_.dn);
  *params = static_cast<cusolverDnParams_t>(ctx_.dn_params);
  JAXMG_SOLVER((*lb)->dn_set_stream(*dn, stream_));
  return Status();
}

template <typename T>
Status Engine::SymmetryProducts(const void* shard, void** y) {
  // The shard is block (u, v) of the matrix handed, row-major: read column-major it is the
  // transpose of that block, so one gemm with op T gives its rows' parts of [A v, A u] in place
  // in the 2n vector y (common/symmetry.h).
  const layout::Plan& plan = state_.plan;
  const int64_t n = plan.rows.extent, sr = n / plan.mesh_rows, sc = n / plan.mesh_cols;
  const int64_t row0 = static_cast<int64_t>(ctx_.mesh_u) * sr;
  const int64_t col0 = static_cast<int64_t>(ctx_.mesh_v) * sc;
  const size_t es = sizeof(T);
  std::vector<T> probes(static_cast<size_t>(2 * sc));
  for (int64_t c = 0; c < sc; ++c) {
    probes[c] = symmetry::Probe<T>(1, col0 + c);       // v
    probes[sc + c] = symmetry::Probe<T>(0, col0 + c);  // u
  }
  void *d_probes = nullptr, *d_y = nullptr;
  JAXMG_RETURN_IF_ERROR(Scratch(es * 2 * sc, &d_probes));
  JAXMG_RETURN_IF_ERROR(Scratch(es * 2 * n, &d_y));
  JAXMG_CUDA(
      cudaMemcpyAsync(d_probes, probes.data(), es * 2 * sc, cudaMemcpyHostToDevice, stream_));
  JAXMG_CUDA(cudaMemsetAsync(d_y, 0, es * 2 * n, stream_));
  const LocalBlas* lb = nullptr;
  cublasHandle_t blas = nullptr;
  JAXMG_RETURN_IF_ERROR(LocalHandle(&lb, &blas));
  int isr = 0, isc = 0, in = 0;
  JAXMG_RETURN_IF_ERROR(CheckedInt(sr, "shard rows", &isr));
  JAXMG_RETURN_IF_ERROR(CheckedInt(sc, "shard columns", &isc));
  JAXMG_RETURN_IF_ERROR(CheckedInt(n, "matrix order", &in));
  const T one(1), zero(0);
  JAXMG_RETURN_IF_ERROR(CublasCheck(
      lb->gemm[Scalar<T>::kIndex](blas, CUBLAS_OP_T, CUBLAS_OP_N, isr, 2, isc, &one, shard,
                                  std::max(isc, 1), d_probes, std::max(isc, 1), &zero,
                                  static_cast<char*>(d_y) + es * row0, std::max(in, 1)),
      "cublas gemm (symmetry check)"));
  JAXMG_NCCL(ncclAllReduce(d_y, d_y, 2 * n * Scalar<T>::kParts, NcclRealOf<T>(), ncclSum, ctx_.comm,
                           stream_));
  // (A copy from pageable memory is staged before cudaMemcpyAsync returns: `probes` may go.)
  *y = d_y;
  return Status();
}

template <typename T>
Status Engine::Asymmetric(const void* shard, bool* out) {
  StepTimer timer("Asymmetric", stream_);
  const int64_t n = state_.plan.rows.extent;
  void* d_y = nullptr;
  JAXMG_RETURN_IF_ERROR(SymmetryProducts<T>(shard, &d_y));
  std::vector<T> y(static_cast<size_t>(2 * n));
  JAXMG_CUDA(cudaMemcpyAsync(y.data(), d_y, sizeof(T) * 2 * n, cudaMemcpyDeviceToHost, stream_));
  JAXMG_CUDA(cudaStreamSynchronize(stream_));
  int64_t differs = symmetry::Differs<T>(y.data(), n) ? 1 : 0;
  // One answer on every rank, whatever the rounding of the sum.
  JAXMG_RETURN_IF_ERROR(BoundedAllreduceMax(ctx_, &differs, 1));
  *out = differs != 0;
  return Small();  // the steps that report the outcome use it
}

template <typename T>
Status Engine::CheckSymmetry(const void* shard) {
  StepTimer timer("CheckSymmetry", stream_);
  const int64_t n = state_.plan.rows.extent;
  const size_t bytes = sizeof(T) * static_cast<size_t>(2 * n);
  if (ctx_.probe_host_bytes < bytes) {
    // Grown rarely; a copy of an earlier call (one that failed before its agreement) may still
    // be in flight into the old buffer.
    JAXMG_CUDA(cudaDeviceSynchronize());
    if (ctx_.probe_host != nullptr) JAXMG_CUDA(cudaFreeHost(ctx_.probe_host));
    ctx_.probe_host = nullptr;
    ctx_.probe_host_bytes = 0;
    JAXMG_CUDA(cudaMallocHost(&ctx_.probe_host, bytes));
    ctx_.probe_host_bytes = bytes;
  }
  void* d_y = nullptr;
  JAXMG_RETURN_IF_ERROR(SymmetryProducts<T>(shard, &d_y));
  JAXMG_CUDA(cudaMemcpyAsync(ctx_.probe_host, d_y, bytes, cudaMemcpyDeviceToHost, stream_));
  symmetry_n_ = n;
  return Small();
}

template <typename T>
Status Engine::Prepare(void* shard) {
  StepTimer timer("Prepare", stream_);
  const layout::Plan& plan = state_.plan;
  const size_t es = sizeof(T);
  const int64_t t = plan.tile;
  local_rows_ = layout::EngineLocalExtent(plan, plan.rows, ctx_.myrow);
  local_cols_ = layout::EngineLocalExtent(plan, plan.cols, ctx_.mycol);
  const int64_t lr = local_rows_, lc = local_cols_;
  JAXMG_SOLVER(cusolverMpSetStream(ctx_.handle, stream_));
  JAXMG_RETURN_IF_ERROR(Small());
  work_ = shard;
  if (plan.strategy == layout::Strategy::kRelabel) {
    if (plan.padded) {
      JAXMG_RETURN_IF_ERROR(Scratch(es * lr * lc, &work_));
      JAXMG_CUDA(cuda::PadCopy(KernelType<T>(), shard, plan.rows.shard, plan.cols.shard, work_, lr,
                               lc, plan.rows.piece, plan.rows.padded_piece, plan.cols.piece,
                               plan.cols.padded_piece, static_cast<int64_t>(ctx_.mesh_v) * lr,
                               static_cast<int64_t>(ctx_.mesh_u) * lc, plan.identity_padding,
                               stream_));
    }
    if (plan.rows.local_permutation || plan.cols.local_permutation) {
      void* p = nullptr;
      JAXMG_RETURN_IF_ERROR(Scratch(es * t * std::max(lr, lc), &p));
      char* tile_scratch = static_cast<char*>(p);
      char* a = static_cast<char*>(work_);
      if (plan.rows.local_permutation) {
        JAXMG_RETURN_IF_ERROR(
            PermuteRowTiles(a, lr, lc, t, es, state_.row_perm, tile_scratch, stream_));
      }
      if (plan.cols.local_permutation) {
        JAXMG_RETURN_IF_ERROR(
            PermuteColumnTiles(a, lr, t, es, state_.col_perm, tile_scratch, stream_));
      }
    }
  } else {
    // Redistribution from the block layout into block-cyclic tiles.
    const Status copy = Scratch(es * std::max<int64_t>(lr * lc, 1), &work_);
    JAXMG_RETURN_IF_ERROR(Redistribute<T>(shard, /*to_tiles=*/true, work_, copy));
  }
  return desc_a_.Create(ctx_, DataTypeOf<T>(), plan.engine_rows(), plan.engine_cols(), t, t,
                        std::max<int64_t>(lr, 1));
}

template <typename T>
Status Engine::NonFinite(int32_t* column) {
  JAXMG_CUDA(cudaMemsetAsync(column, 0x7f, sizeof(int32_t), stream_));  // kNoColumn
  JAXMG_CUDA(cuda::NonFiniteColumn(KernelType<T>(), work_, local_rows_, local_cols_,
                                   state_.plan.tile, ctx_.npcol, ctx_.mycol, column, stream_));
  return Status();
}

template <typename T>
Status Engine::Agree(bool failed, int* info, int64_t diag_limit) {
  // The local status: the engine's info when positive; else (the engine gave up without an order:
  // cuSOLVERMp returns INTERNAL_ERROR or EXECUTION_FAILED for some matrices that are not positive
  // definite) n + 1; else the first diagonal entry of the factor that is zero or not finite (NaN
  // or Inf input, or a singular matrix the engine did not flag). Then the status and the
  // position check (1 when this shard's position is not the context's) are agreed (max) over
  // every rank before anyone branches.
  const layout::Plan& plan = state_.plan;
  JAXMG_CUDA(cuda::DiagCheck(KernelType<T>(), work_, local_rows_, local_cols_, plan.tile,
                             ctx_.nprow, ctx_.npcol, ctx_.myrow, ctx_.mycol,
                             diag_limit < 0 ? plan.engine_rows() : diag_limit, small_ + 3,
                             stream_));
  JAXMG_RETURN_IF_ERROR(NonFinite<T>(small_ + 8));
  int32_t* host = ctx_.pinned;
  JAXMG_CUDA(cudaMemcpyAsync(host, small_, 4 * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
  JAXMG_CUDA(
      cudaMemcpyAsync(host + 4, position_, 2 * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
  JAXMG_CUDA(
      cudaMemcpyAsync(host + 6, small_ + 8, 2 * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
  JAXMG_CUDA(cudaStreamSynchronize(stream_));
  host[6] = std::min(host[6], host[7]);  // the factor's scan, the input's (Getrf; else kNoColumn)
  int32_t local = host[0] > 0 ? host[0] : 0;
  if (local == 0 && failed) {
    local = static_cast<int32_t>(std::min<int64_t>(plan.engine_rows() + 1, INT32_MAX));
  }
  if (local == 0) local = host[3];
  // A non-finite entry anywhere in the factor (a NaN that pivoting kept off the diagonal).
  if (host[6] != kNoColumn && (local == 0 || host[6] < local)) local = host[6];
  // Agreed (max) in one all-reduce: the status, the position check (1 when this shard's
  // position is not the context's) and a pending symmetry check's verdict.
  int32_t* agreed = host + 8;
  agreed[0] = local;
  agreed[1] = (host[4] != ctx_.mesh_u || host[5] != ctx_.mesh_v) ? 1 : 0;
  agreed[2] = 0;
  const bool symmetry = symmetry_n_ > 0;
  if (symmetry) {  // its products reached the host before the synchronization above
    agreed[2] = symmetry::Differs<T>(static_cast<const T*>(ctx_.probe_host), symmetry_n_) ? 1 : 0;
    symmetry_n_ = 0;
  }
  JAXMG_CUDA(
      cudaMemcpyAsync(small_ + 10, agreed, 3 * sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
  JAXMG_NCCL(ncclAllReduce(small_ + 10, small_ + 10, 3, ncclInt32, ncclMax, ctx_.comm, stream_));
  JAXMG_CUDA(
      cudaMemcpyAsync(agreed, small_ + 10, 3 * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
  JAXMG_CUDA(cudaStreamSynchronize(stream_));
  if (agreed[1] != 0) {  // the same branch on every rank
    return Status::Error(
        "jaxmg GPU context was made for another placement of the mesh's devices than this call's "
        "(a mesh whose device order differs from jax.make_mesh's, seen only as an abstract mesh "
        "inside jit): pass mesh=... (the concrete mesh) to the jaxmg call");
  }
  if (symmetry) asymmetric_ = agreed[2] != 0;
  *info = agreed[0];
  return Status();
}

template <typename T>
Status Engine::Potrf(int* info) {
  StepTimer timer("Potrf", stream_);
  const int64_t n = state_.plan.engine_rows();
  size_t dev = 0, host = 0;
  JAXMG_SOLVER(cusolverMpPotrf_bufferSize(ctx_.handle, CUBLAS_FILL_MODE_LOWER, n, work_, 1, 1,
                                          desc_a_.get(), DataTypeOf<T>(), &dev, &host));
  void* d_work = nullptr;
  JAXMG_RETURN_IF_ERROR(Workspace(dev, host, &d_work));
  const cusolverStatus_t s = cusolverMpPotrf(
      ctx_.handle, CUBLAS_FILL_MODE_LOWER, n, work_, 1, 1, desc_a_.get(), DataTypeOf<T>(), d_work,
      workspace_bytes_, ctx_.host_work.data(), ctx_.host_work.size(), small_);
  const bool failed = s == CUSOLVER_STATUS_INTERNAL_ERROR || s == CUSOLVER_STATUS_EXECUTION_FAILED;
  if (!failed) JAXMG_RETURN_IF_ERROR(SolverCheck(s, "cusolverMpPotrf"));
  return Agree<T>(failed, info);
}

template <typename T>
Status Engine::Getrf(int* info) {
  StepTimer timer("Getrf", stream_);
  // The input is scanned first: pivoting can keep a NaN off the diagonal, and the LU libraries
  // do not all carry it into the factor.
  JAXMG_RETURN_IF_ERROR(Small());
  JAXMG_RETURN_IF_ERROR(NonFinite<T>(small_ + 9));
  if (UseOwnLu()) return Lu1D<T>(info);
  const int64_t n = state_.plan.engine_rows();
  void* p = nullptr;
  const size_t pivots = std::max(local_rows_, local_cols_) + state_.plan.tile;
  JAXMG_RETURN_IF_ERROR(Scratch(sizeof(int64_t) * pivots, &p));
  ipiv_ = static_cast<int64_t*>(p);
  JAXMG_CUDA(cudaMemsetAsync(ipiv_, 0, sizeof(int64_t) * pivots, stream_));
  size_t dev = 0, host = 0;
  JAXMG_SOLVER(cusolverMpGetrf_bufferSize(ctx_.handle, n, n, work_, 1, 1, desc_a_.get(), ipiv_,
                                          DataTypeOf<T>(), &dev, &host));
  void* d_work = nullptr;
  JAXMG_RETURN_IF_ERROR(Workspace(dev, host, &d_work));
  JAXMG_SOLVER(cusolverMpGetrf(ctx_.handle, n, n, work_, 1, 1, desc_a_.get(), ipiv_,
                               DataTypeOf<T>(), d_work, workspace_bytes_, ctx_.host_work.data(),
                               ctx_.host_work.size(), small_));
  return Agree<T>(false, info);
}

bool Engine::UseOwnLu() const {
  // The 1-D LU needs every engine row on every process (a 1 x P grid) and the relabeled layout.
  const char* choice = std::getenv("JAXMG_GPU_LU");
  const bool library = choice != nullptr && std::string(choice) == "cusolvermp";
  return !library && ctx_.nprow == 1 && state_.plan.strategy == layout::Strategy::kRelabel;
}

// Right-looking LU with partial pivoting on a 1 x P grid (columns block-cyclic, every row local):
// for each tile column k, its owner factors the panel (rows k t .. n) with cusolverDn, broadcasts
// it and its pivots (NCCL); every rank interchanges the rows of its other columns, solves for its
// part of the block row of U (cuBLAS trsm) and updates its trailing columns (cuBLAS gemm). The
// factors are stored as ScaLAPACK's p?getrf stores them; the 1-based global pivots are kept on
// the host for the solve.
template <typename T>
Status Engine::Lu1D(int* info) {
  const LocalBlas* lb = nullptr;
  cublasHandle_t blas = nullptr;
  cusolverDnHandle_t dn = nullptr;
  cusolverDnParams_t params = nullptr;
  const int64_t n = state_.plan.engine_rows(), t = state_.plan.tile, lr = local_rows_;
  const int64_t lc = local_cols_, procs = ctx_.npcol, me = ctx_.mycol;
  const size_t es = sizeof(T);
  int ilr = 0, it = 0;
  void *panel = nullptr, *pivots = nullptr, *panel_info = nullptr, *d_work = nullptr;
  size_t dev = 0, host = 0;
  // Handles and buffers first, agreed; then the panels, where a local error stops this rank's
  // computing but not its part of the broadcasts, agreed at the end (no rank leaves alone).
  Deferred local;
  local.Run([&] { return LocalSolver(&lb, &blas, &dn, &params); });
  local.Run([&] { return CheckedInt(lr, "local rows", &ilr); });
  local.Run([&] { return CheckedInt(t, "tile", &it); });
  local.Run([&] { return Scratch(es * n * t, &panel); });
  local.Run([&] { return Scratch(sizeof(int64_t) * n, &pivots); });
  local.Run([&] { return Scratch(sizeof(int), &panel_info); });
  local.Run([&] {
    return SolverCheck(lb->getrf_buffer_size(dn, params, n, t, DataTypeOf<T>(), panel, n,
                                             DataTypeOf<T>(), &dev, &host),
                       "cusolverDnXgetrf_bufferSize");
  });
  local.Run([&] { return Workspace(dev, host, &d_work); });
  local.Run([&] {
    return CudaCheck(cudaMemsetAsync(pivots, 0, sizeof(int64_t) * n, stream_), "cudaMemsetAsync");
  });
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("lu", local));
  const T one(1), minus_one(-1);
  char* a = static_cast<char*>(work_);
  int64_t* piv = static_cast<int64_t*>(pivots);
  const size_t reals = static_cast<size_t>(Scalar<T>::kParts);
  Deferred failed;
  for (int64_t k = 0; k * t < n; ++k) {
    const int64_t owner = k % procs, row0 = k * t, m = n - row0, panel_col = (k / procs) * t;
    failed.Step("lu", ctx_.rank, k);
    if (me == owner) {
      char* column = a + es * (row0 + panel_col * lr);
      failed.Run([&] {
        return SolverCheck(
            lb->getrf(dn, params, m, t, DataTypeOf<T>(), column, lr, piv + row0, DataTypeOf<T>(),
                      d_work, workspace_bytes_, ctx_.host_work.data(), ctx_.host_work.size(),
                      static_cast<int*>(panel_info)),
            "cusolverDnXgetrf");
      });
      failed.Run([&] {
        return CudaCheck(cudaMemcpy2DAsync(panel, es * m, column, es * lr, es * m, t,
                                           cudaMemcpyDeviceToDevice, stream_),
                         "cudaMemcpy2DAsync (panel)");
      });
    }
    if (procs > 1) {
      JAXMG_NCCL(ncclGroupStart());
      JAXMG_NCCL(
          ncclBroadcast(panel, panel, m * t * reals, NcclRealOf<T>(), owner, ctx_.comm, stream_));
      JAXMG_NCCL(ncclBroadcast(piv + row0, piv + row0, t, ncclInt64, owner, ctx_.comm, stream_));
      JAXMG_NCCL(ncclGroupEnd());
    }
    if (!failed.ok()) continue;
    // This rank's columns right of tile k: local tiles j with j * procs + me > k.
    const int64_t first = k >= me ? (k - me) / procs + 1 : 0;
    const int64_t cols = lc - first * t;
    failed.Run([&]() -> Status {
      const int64_t skip_begin = me == owner ? panel_col : 0,
                    skip_end = me == owner ? panel_col + t : 0;
      JAXMG_CUDA(cuda::RowSwaps(KernelType<T>(), work_, lr, 0, lc, skip_begin, skip_end, row0,
                                piv + row0, std::min(t, m), stream_));
      if (cols <= 0) return Status();
      int icols = 0, im = 0;
      JAXMG_RETURN_IF_ERROR(CheckedInt(cols, "columns", &icols));
      JAXMG_RETURN_IF_ERROR(CheckedInt(m, "rows", &im));
      char* block = a + es * (row0 + first * t * lr);
      JAXMG_RETURN_IF_ERROR(CublasCheck(
          lb->trsm[Scalar<T>::kIndex](blas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N,
                                      CUBLAS_DIAG_UNIT, it, icols, &one, panel, im, block, ilr),
          "cublas trsm"));
      if (m <= t) return Status();
      return CublasCheck(
          lb->gemm[Scalar<T>::kIndex](blas, CUBLAS_OP_N, CUBLAS_OP_N, im - it, icols, it,
                                      &minus_one, static_cast<char*>(panel) + es * t, im, block,
                                      ilr, &one, block + es * t, ilr),
          "cublas gemm");
    });
  }
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("lu", failed));
  // Global 1-based pivots: panel k's are relative to its first row.
  own_pivots_.assign(static_cast<size_t>(n), 0);
  JAXMG_CUDA(cudaMemcpyAsync(own_pivots_.data(), piv, sizeof(int64_t) * n, cudaMemcpyDeviceToHost,
                             stream_));
  JAXMG_CUDA(cudaStreamSynchronize(stream_));
  for (int64_t i = 0; i < n; ++i) own_pivots_[i] += (i / t) * t;
  own_lu_ = true;
  return Agree<T>(false, info);  // the diagonal check finds a zero or non-finite pivot
}

template <typename T>
Status Engine::Potrs() {
  StepTimer timer("Potrs", stream_);
  const int64_t n = state_.plan.engine_rows();
  size_t dev = 0, host = 0;
  JAXMG_SOLVER(cusolverMpPotrs_bufferSize(ctx_.handle, CUBLAS_FILL_MODE_LOWER, n, nrhs_, work_, 1,
                                          1, desc_a_.get(), local_b_, 1, 1, desc_b_.get(),
                                          DataTypeOf<T>(), &dev, &host));
  void* d_work = nullptr;
  JAXMG_RETURN_IF_ERROR(Workspace(dev, host, &d_work));
  JAXMG_SOLVER(cusolverMpPotrs(ctx_.handle, CUBLAS_FILL_MODE_LOWER, n, nrhs_, work_, 1, 1,
                               desc_a_.get(), local_b_, 1, 1, desc_b_.get(), DataTypeOf<T>(),
                               d_work, workspace_bytes_, ctx_.host_work.data(),
                               ctx_.host_work.size(), small_ + 2));
  return Status();
}

template <typename T>
Status Engine::Getrs(bool transpose) {
  StepTimer timer("Getrs", stream_);
  if (own_lu_) return LuSolveWithPivots<T>(transpose, own_pivots_);
  if (transpose) {
    std::vector<int64_t> pivots;
    JAXMG_RETURN_IF_ERROR(EnginePivots(&pivots));
    return LuSolveWithPivots<T>(true, pivots);
  }
  const int64_t n = state_.plan.engine_rows();
  const cublasOperation_t op = CUBLAS_OP_N;
  size_t dev = 0, host = 0;
  JAXMG_SOLVER(cusolverMpGetrs_bufferSize(ctx_.handle, op, n, nrhs_, work_, 1, 1, desc_a_.get(),
                                          ipiv_, local_b_, 1, 1, desc_b_.get(), DataTypeOf<T>(),
                                          &dev, &host));
  void* d_work = nullptr;
  JAXMG_RETURN_IF_ERROR(Workspace(dev, host, &d_work));
  JAXMG_SOLVER(cusolverMpGetrs(ctx_.handle, op, n, nrhs_, work_, 1, 1, desc_a_.get(), ipiv_,
                               local_b_, 1, 1, desc_b_.get(), DataTypeOf<T>(), d_work,
                               workspace_bytes_, ctx_.host_work.data(), ctx_.host_work.size(),
                               small_ + 2));
  return Status();
}

// The global 1-based pivot list of cuSOLVERMp's Getrf. cuSOLVERMp distributes it with A's
// columns (seen on 2 H200s: local entry c is the pivot of global row CyclicGlobal(c) on the
// column axis, replicated over process rows); each rank writes its entries, max over every rank.
Status Engine::EnginePivots(std::vector<int64_t>* out) {
  const int64_t n = state_.plan.engine_rows(), t = state_.plan.tile, lc = local_cols_;
  std::vector<int64_t>& piv = *out;
  piv.assign(static_cast<size_t>(n), 0);
  std::vector<int64_t> local(static_cast<size_t>(lc));
  JAXMG_CUDA(
      cudaMemcpyAsync(local.data(), ipiv_, sizeof(int64_t) * lc, cudaMemcpyDeviceToHost, stream_));
  JAXMG_CUDA(cudaStreamSynchronize(stream_));
  for (int64_t c = 0; c < lc; ++c) {
    piv[layout::CyclicGlobal(c, t, ctx_.npcol, ctx_.mycol)] = local[c];
  }
  void* d_piv = nullptr;
  JAXMG_RETURN_IF_ERROR(Scratch(sizeof(int64_t) * n, &d_piv));
  JAXMG_CUDA(
      cudaMemcpyAsync(d_piv, piv.data(), sizeof(int64_t) * n, cudaMemcpyHostToDevice, stream_));
  JAXMG_NCCL(ncclAllReduce(d_piv, d_piv, n, ncclInt64, ncclMax, ctx_.comm, stream_));
  JAXMG_CUDA(
      cudaMemcpyAsync(piv.data(), d_piv, sizeof(int64_t) * n, cudaMemcpyDeviceToHost, stream_));
  JAXMG_CUDA(cudaStreamSynchronize(stream_));
  // 1-based (row i swaps with row piv[i] - 1 >= i): the last row can only swap with itself.
  if (piv[n - 1] == n - 1) {
    for (int64_t& p : piv) ++p;
  }
  return Status();
}

// Solves op(B) z = c with P B = L U held as p?getrf stores it and the global 1-based pivots:
// op = N: L U z = P c (pivots first, then two cuBLASMp triangular solves); op = T: Uᵀ Lᵀ (P z) =
// c (the solves with transposition, then the pivots in reverse order). cuSOLVERMp's Getrs has
// no transposed solve, and the engine's own LU keeps its pivots on the host. The pivots are
// applied to the whole right-hand side (n x nrhs, small) on the host, on every rank.
template <typename T>
Status Engine::LuSolveWithPivots(bool transpose, const std::vector<int64_t>& piv) {
  const int64_t n = state_.plan.engine_rows();
  for (int64_t i = 0; i < n; ++i) {  // (the same pivots on every rank)
    if (piv[i] - 1 < i || piv[i] > n) return JAXMG_ERROR("a pivot is out of range");
  }
  // Local errors are kept (every rank still enters each collective) and agreed at the end.
  Deferred failed;
  if (!transpose) JAXMG_RETURN_IF_ERROR(PivotRhs<T>(piv, /*reverse=*/false, &failed));
  JAXMG_RETURN_IF_ERROR(TriangularSolves<T>(transpose, &failed));
  if (transpose) JAXMG_RETURN_IF_ERROR(PivotRhs<T>(piv, /*reverse=*/true, &failed));
  return AgreeOnFailure("lu_solve", failed);
}

template <typename T>
Status Engine::TriangularSolves(bool transpose, Deferred* failed) {
  const layout::Plan& plan = state_.plan;
  const int64_t n = plan.engine_rows(), t = plan.tile, lr = local_rows_, nrhs = nrhs_;
  BlasDescriptor da, db;
  const cublasComputeType_t compute = ComputeOf<T>();
  const T one(1);
  const cublasOperation_t op = transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
  const std::pair<cublasFillMode_t, cublasDiagType_t> lower{CUBLAS_FILL_MODE_LOWER,
                                                            CUBLAS_DIAG_UNIT};
  const std::pair<cublasFillMode_t, cublasDiagType_t> upper{CUBLAS_FILL_MODE_UPPER,
                                                            CUBLAS_DIAG_NON_UNIT};
  const auto order = transpose ? std::array{upper, lower} : std::array{lower, upper};
  // Descriptors and the workspace of both solves first (agreed: the solves are collective).
  Deferred local;
  local.Run([&] { return da.Create(ctx_, DataTypeOf<T>(), n, n, t, t, std::max<int64_t>(lr, 1)); });
  local.Run(
      [&] { return db.Create(ctx_, DataTypeOf<T>(), n, nrhs, t, t, std::max<int64_t>(lr, 1)); });
  local.Run(
      [&] { return BlasMpCheck(cublasMpSetStream(ctx_.blas, stream_), "cublasMpSetStream"); });
  size_t dev = 0, host = 0;
  for (const auto& [uplo, diag] : order) {
    local.Run([&]() -> Status {
      size_t d = 0, h = 0;
      JAXMG_BLASMP(cublasMpTrsm_bufferSize(ctx_.blas, CUBLAS_SIDE_LEFT, uplo, op, diag, n, nrhs,
                                           &one, work_, 1, 1, da.get(), local_b_, 1, 1, db.get(),
                                           compute, &d, &h));
      dev = std::max(dev, d), host = std::max(host, h);
      return Status();
    });
  }
  void* d_work = nullptr;
  local.Run([&] { return Workspace(dev, host, &d_work); });
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("lu_solve", local));
  int64_t step = 0;
  for (const auto& [uplo, diag] : order) {
    failed->Step("lu_solve", ctx_.rank, step++);
    failed->Keep(
        BlasMpCheck(cublasMpTrsm(ctx_.blas, CUBLAS_SIDE_LEFT, uplo, op, diag, n, nrhs, &one, work_,
                                 1, 1, da.get(), local_b_, 1, 1, db.get(), compute, d_work,
                                 workspace_bytes_, ctx_.host_work.data(), ctx_.host_work.size()),
                    "cublasMpTrsm"));
  }
  return Status();
}

template <typename T>
Status Engine::InverseSolve(bool transpose) {
  // M = P L U: M⁻¹ = U⁻¹ L⁻¹ Pᵀ, in three steps of about N³/3, N³/3 and 2N³/3 flops (against
  // 2N³ for two triangular solves with the N columns of the identity): W_L = L⁻¹ and
  // W_U = U⁻¹ (TriangularInverse), X = W_U W_L by blocks (W_U's column block k is zero below
  // its end e_k and W_L's row block k beyond column e_k: one gemm into X's leading e_k x e_k
  // block each), then X Pᵀ, X's columns moved by the pivots (PermuteColumns).
  StepTimer timer("InverseSolve", stream_);
  const layout::Plan& plan = state_.plan;
  const int64_t n = plan.engine_rows(), t = plan.tile, lr = local_rows_, lc = local_cols_;
  const int64_t ld = std::max<int64_t>(lr, 1);
  std::vector<int64_t> piv;
  JAXMG_RETURN_IF_ERROR(Pivots(&piv));
  // Pᵀ = the identity with the pivots' row interchanges applied in order: its row i is
  // e_{order[i]}ᵀ, so column order[i] of X Pᵀ is column i of X.
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  for (int64_t i = 0; i < n; ++i) {
    if (piv[i] - 1 < i || piv[i] > n) return JAXMG_ERROR("a pivot is out of range");
    std::swap(order[i], order[piv[i] - 1]);
  }
  const size_t bytes = sizeof(T) * std::max<int64_t>(lr * lc, 1);
  void *w_upper = nullptr, *x = nullptr;
  BlasDescriptor dm;
  const cublasComputeType_t compute = ComputeOf<T>();
  const T one(1), zero(0);
  const int64_t tiles = (n + t - 1) / t;
  const int64_t nb = t * std::max<int64_t>(1, (tiles + 7) / 8);  // about 8 blocks, whole tiles
  // Buffers first, agreed; local errors after that are kept (every rank enters each collective)
  // and agreed at the end.
  Deferred local;
  local.Run([&] { return Identity<T>(); });  // W_L := I (local_b_, desc_b_)
  local.Run([&] { return Scratch(bytes, &w_upper); });
  local.Run([&] { return Scratch(bytes, &x); });
  local.Run([&] { return dm.Create(ctx_, DataTypeOf<T>(), n, n, t, t, ld); });
  local.Run([&]() -> Status {
    JAXMG_CUDA(
        cudaMemcpyAsync(w_upper, local_b_, sizeof(T) * lr * lc, cudaMemcpyDeviceToDevice, stream_));
    JAXMG_CUDA(cudaMemsetAsync(x, 0, sizeof(T) * lr * lc, stream_));
    return Status();
  });
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("inv", local));
  Deferred failed;
  JAXMG_RETURN_IF_ERROR(TriangularInverse<T>(work_, ld, local_b_, ld, n, false, true, &failed));
  JAXMG_RETURN_IF_ERROR(TriangularInverse<T>(work_, ld, w_upper, ld, n, true, false, &failed));
  size_t dev = 0, host = 0;
  for (int64_t k0 = 0; k0 < n && local.ok(); k0 += nb) {
    const int64_t kb = std::min(nb, n - k0), e = k0 + kb;
    local.Run([&]() -> Status {
      size_t d = 0, h = 0;
      JAXMG_BLASMP(cublasMpGemm_bufferSize(ctx_.blas, CUBLAS_OP_N, CUBLAS_OP_N, e, e, kb, &one,
                                           w_upper, 1, k0 + 1, dm.get(), local_b_, k0 + 1, 1,
                                           dm.get(), &one, x, 1, 1, dm.get(), compute, &d, &h));
      dev = std::max(dev, d), host = std::max(host, h);
      return Status();
    });
  }
  if (transpose) {
    local.Run([&]() -> Status {
      size_t d = 0, h = 0;
      JAXMG_BLASMP(cublasMpGeadd_bufferSize(ctx_.blas, CUBLAS_OP_T, n, n, &one, local_b_, 1, 1,
                                            dm.get(), &zero, x, 1, 1, dm.get(), &d, &h));
      dev = std::max(dev, d), host = std::max(host, h);
      return Status();
    });
  }
  void* d_work = nullptr;
  local.Run([&] { return Workspace(dev, host, &d_work); });
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("inv", local));
  for (int64_t k0 = 0; k0 < n; k0 += nb) {
    const int64_t kb = std::min(nb, n - k0), e = k0 + kb;
    failed.Step("inv", ctx_.rank, k0 / nb);
    failed.Keep(BlasMpCheck(
        cublasMpGemm(ctx_.blas, CUBLAS_OP_N, CUBLAS_OP_N, e, e, kb, &one, w_upper, 1, k0 + 1,
                     dm.get(), local_b_, k0 + 1, 1, dm.get(), &one, x, 1, 1, dm.get(), compute,
                     d_work, workspace_bytes_, ctx_.host_work.data(), ctx_.host_work.size()),
        "cublasMpGemm"));
  }
  // local_b_ := X Pᵀ = M⁻¹
  JAXMG_RETURN_IF_ERROR(PermuteColumns<T>(x, local_b_, order, &failed));
  if (transpose) {
    // M⁻ᵀ: the transpose (not the adjoint) of M⁻¹, into x (free again).
    failed.Keep(
        BlasMpCheck(cublasMpGeadd(ctx_.blas, CUBLAS_OP_T, n, n, &one, local_b_, 1, 1, dm.get(),
                                  &zero, x, 1, 1, dm.get(), d_work, workspace_bytes_,
                                  ctx_.host_work.data(), ctx_.host_work.size()),
                    "cublasMpGeadd"));
  }
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("inv", failed));
  if (transpose) local_b_ = x;  // (desc_b_ describes it)
  return Status();
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

// Applies the row interchanges of `piv` (1-based, global) to the distributed right-hand side
// (forward, or in reverse order), through its whole copy on every rank's host.
template <typename T>
Status Engine::PivotRhs(const std::vector<int64_t>& piv, bool reverse, Deferred* failed) {
  const int64_t n = state_.plan.engine_rows(), t = state_.plan.tile, lr = local_rows_;
  const int64_t nrhs = nrhs_, lbc = rhs_local_cols_;
  const size_t es = sizeof(T);
  std::vector<T> mine(static_cast<size_t>(std::max<int64_t>(lr * lbc, 1)));
  std::vector<T> whole(static_cast<size_t>(n * nrhs), T(0));
  auto each = [&](auto&& fn) {
    for (int64_t c = 0; c < lbc; ++c) {
      const int64_t j = layout::CyclicGlobal(c, t, ctx_.npcol, ctx_.mycol);
      for (int64_t r = 0; r < lr; ++r) {
        fn(mine[r + c * lr], whole[layout::CyclicGlobal(r, t, ctx_.nprow, ctx_.myrow) * nrhs + j]);
      }
    }
  };
  // After a local failure this rank adds zeros to the sum (full_ is n x nrhs on every rank).
  failed->Run([&]() -> Status {
    JAXMG_CUDA(
        cudaMemcpyAsync(mine.data(), local_b_, es * lr * lbc, cudaMemcpyDeviceToHost, stream_));
    JAXMG_CUDA(cudaStreamSynchronize(stream_));
    each([](const T& local, T& global) { global = local; });
    return Status();
  });
  JAXMG_CUDA(cudaMemcpyAsync(full_, whole.data(), es * n * nrhs, cudaMemcpyHostToDevice, stream_));
  JAXMG_NCCL(ncclAllReduce(full_, full_, static_cast<size_t>(n * nrhs * Scalar<T>::kParts),
                           NcclRealOf<T>(), ncclSum, ctx_.comm, stream_));
  JAXMG_CUDA(cudaMemcpyAsync(whole.data(), full_, es * n * nrhs, cudaMemcpyDeviceToHost, stream_));
  JAXMG_CUDA(cudaStreamSynchronize(stream_));
  if (!failed->ok()) return Status();
  for (int64_t s = 0; s < n; ++s) {
    const int64_t i = reverse ? n - 1 - s : s, p = piv[i] - 1;
    if (p != i) {
      std::swap_ranges(whole.begin() + i * nrhs, whole.begin() + (i + 1) * nrhs,
                       whole.begin() + p * nrhs);
    }
  }
  each([](T& local, const T& global) { local = global; });
  failed->Run([&]() -> Status {
    JAXMG_CUDA(
        cudaMemcpyAsync(local_b_, mine.data(), es * lr * lbc, cudaMemcpyHostToDevice, stream_));
    JAXMG_CUDA(cudaStreamSynchronize(stream_));  // `mine` is freed on return
    return Status();
  });
  return Status();
}

template <typename T>
Status Engine::LogAbsDiag(double scale, bool ok, void* out) {
  void* sum = small_ + 4;
  if (ok) {
    const layout::Plan& plan = state_.plan;
    JAXMG_CUDA(cuda::LogDiagSum(KernelType<T>(), work_, local_rows_, local_cols_, plan.tile,
                                ctx_.nprow, ctx_.npcol, ctx_.myrow, ctx_.mycol, sum, stream_));
    JAXMG_NCCL(ncclAllReduce(sum, sum, 1, NcclRealOf<T>(), ncclSum, ctx_.comm, stream_));
  }
  JAXMG_CUDA(cuda::FinishLogdet(KernelType<T>(), sum, scale, ok, out, stream_));
  return Status();
}

template <typename T>
Status Engine::RhsIn(const void* b, int64_t nrhs, Axis axis, bool conj) {
  StepTimer timer("RhsIn", stream_);
  const layout::Plan& plan = state_.plan;
  const size_t es = sizeof(T);
  const int64_t n = plan.rows.extent, t = plan.tile, lr = local_rows_;
  // This shard's block of b: split over the mesh's rows, or its columns when transposed.
  const int64_t block = rhs_by_cols_ ? ctx_.mesh_v : ctx_.mesh_u;
  const int64_t shard_rows = n / (rhs_by_cols_ ? plan.mesh_cols : plan.mesh_rows);
  const bool holder = (rhs_by_cols_ ? ctx_.mesh_u : ctx_.mesh_v) == 0;
  nrhs_ = nrhs;
  rhs_local_cols_ = CyclicLocalExtent(nrhs, t, ctx_.mycol, ctx_.npcol);
  JAXMG_RETURN_IF_ERROR(Scratch(es * std::max<int64_t>(lr * rhs_local_cols_, 1), &local_b_));
  const size_t full_bytes = es * n * nrhs;
  JAXMG_RETURN_IF_ERROR(Scratch(full_bytes, &full_));
  // The whole right-hand side on every rank (it is small): the shards of mesh column 0, summed.
  JAXMG_CUDA(cudaMemsetAsync(full_, 0, full_bytes, stream_));
  if (holder) {
    char* mine = static_cast<char*>(full_) + es * block * shard_rows * nrhs;
    JAXMG_CUDA(cudaMemcpyAsync(mine, b, es * shard_rows * nrhs, cudaMemcpyDeviceToDevice, stream_));
  }
  const size_t reals = static_cast<size_t>(n * nrhs * Scalar<T>::kParts);
  JAXMG_NCCL(ncclAllReduce(full_, full_, reals, NcclRealOf<T>(), ncclSum, ctx_.comm, stream_));
  JAXMG_CUDA(cuda::GatherRhs(KernelType<T>(), full_, nrhs, state_.d_rhs_map[static_cast<int>(axis)],
                             lr, rhs_local_cols_, t, ctx_.npcol, ctx_.mycol, conj, local_b_,
                             stream_));
  return desc_b_.Create(ctx_, DataTypeOf<T>(), plan.engine_rows(), nrhs, t, t,
                        std::max<int64_t>(lr, 1));
}

template <typename T>
Status Engine::RhsOut(void* x, Axis axis, bool conj) {
  StepTimer timer("RhsOut", stream_);
  const layout::Plan& plan = state_.plan;
  const size_t es = sizeof(T);
  const int64_t n = plan.rows.extent, t = plan.tile, nrhs = nrhs_;
  const int64_t block = rhs_by_cols_ ? ctx_.mesh_v : ctx_.mesh_u;
  const int64_t shard_rows = n / (rhs_by_cols_ ? plan.mesh_cols : plan.mesh_rows);
  const size_t full_bytes = es * n * nrhs;
  JAXMG_CUDA(cudaMemsetAsync(full_, 0, full_bytes, stream_));
  JAXMG_CUDA(cuda::ScatterRhs(KernelType<T>(), local_b_, nrhs,
                              state_.d_rhs_map[static_cast<int>(axis)], local_rows_,
                              rhs_local_cols_, t, ctx_.npcol, ctx_.mycol, conj, full_, stream_));
  const size_t reals = static_cast<size_t>(n * nrhs * Scalar<T>::kParts);
  JAXMG_NCCL(ncclAllReduce(full_, full_, reals, NcclRealOf<T>(), ncclSum, ctx_.comm, stream_));
  const char* mine = static_cast<const char*>(full_) + es * block * shard_rows * nrhs;
  JAXMG_CUDA(cudaMemcpyAsync(x, mine, es * shard_rows * nrhs, cudaMemcpyDeviceToDevice, stream_));
  return Status();
}

template <typename T>
Status Engine::Identity() {
  const layout::Plan& plan = state_.plan;
  const int64_t lr = local_rows_, lc = local_cols_;
  nrhs_ = plan.engine_cols();
  rhs_local_cols_ = lc;
  JAXMG_RETURN_IF_ERROR(Scratch(sizeof(T) * std::max<int64_t>(lr * lc, 1), &local_b_));
  JAXMG_CUDA(cudaMemsetAsync(local_b_, 0, sizeof(T) * lr * lc, stream_));
  JAXMG_CUDA(cuda::SetDiagonal(KernelType<T>(), local_b_, lr, lc, plan.tile, ctx_.nprow, ctx_.npcol,
                               ctx_.myrow, ctx_.mycol, stream_));
  return desc_b_.Create(ctx_, DataTypeOf<T>(), plan.engine_rows(), plan.engine_cols(), plan.tile,
                        plan.tile, std::max<int64_t>(lr, 1));
}

template <typename T>
Status Engine::TriangularInverse(const void* l, int64_t ll, void* w, int64_t lw, int64_t n,
                                 bool upper, bool unit, Deferred* failed) {
  // Column block k of W = L⁻¹ is L[k:, k:]⁻¹ I[k:, k] for a lower L, and of W = U⁻¹ it is
  // U[:e, :e]⁻¹ I[:e, k] for an upper U (e: the block's end): one cuBLASMp trsm per block of
  // about n / 8 (whole tiles), N³/3 flops in all instead of N³.
  const int64_t t = state_.plan.tile, tiles = (n + t - 1) / t;
  const int64_t nb = t * std::max<int64_t>(1, (tiles + 7) / 8);
  BlasDescriptor dl, dw;
  const cublasComputeType_t compute = ComputeOf<T>();
  const cublasFillMode_t fill = upper ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER;
  const cublasDiagType_t diag = unit ? CUBLAS_DIAG_UNIT : CUBLAS_DIAG_NON_UNIT;
  const T one(1);
  // The triangle's part that block k needs: rows and columns from `first` (1-based), m of them.
  auto part = [&](int64_t k0, int64_t* first, int64_t* m) {
    *first = upper ? 1 : k0 + 1;
    *m = upper ? k0 + std::min(nb, n - k0) : n - k0;
  };
  // Descriptors and the largest block's workspace first, agreed (the trsm are collective).
  Deferred local;
  local.Run([&] { return dl.Create(ctx_, DataTypeOf<T>(), n, n, t, t, std::max<int64_t>(ll, 1)); });
  local.Run([&] { return dw.Create(ctx_, DataTypeOf<T>(), n, n, t, t, std::max<int64_t>(lw, 1)); });
  local.Run(
      [&] { return BlasMpCheck(cublasMpSetStream(ctx_.blas, stream_), "cublasMpSetStream"); });
  size_t dev = 0, host = 0;
  for (int64_t k0 = 0; k0 < n && local.ok(); k0 += nb) {
    int64_t first = 0, m = 0;
    part(k0, &first, &m);
    local.Run([&]() -> Status {
      size_t d = 0, h = 0;
      JAXMG_BLASMP(cublasMpTrsm_bufferSize(ctx_.blas, CUBLAS_SIDE_LEFT, fill, CUBLAS_OP_N, diag, m,
                                           std::min(nb, n - k0), &one, l, first, first, dl.get(), w,
                                           first, k0 + 1, dw.get(), compute, &d, &h));
      dev = std::max(dev, d), host = std::max(host, h);
      return Status();
    });
  }
  void* d_work = nullptr;
  local.Run([&] { return Workspace(dev, host, &d_work); });
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("inv_triangular", local));
  for (int64_t k0 = 0; k0 < n; k0 += nb) {
    const int64_t kb = std::min(nb, n - k0);
    int64_t first = 0, m = 0;
    part(k0, &first, &m);
    failed->Step("inv_triangular", ctx_.rank, k0 / nb);
    failed->Keep(BlasMpCheck(
        cublasMpTrsm(ctx_.blas, CUBLAS_SIDE_LEFT, fill, CUBLAS_OP_N, diag, m, kb, &one, l, first,
                     first, dl.get(), w, first, k0 + 1, dw.get(), compute, d_work, workspace_bytes_,
                     ctx_.host_work.data(), ctx_.host_work.size()),
        "cublasMpTrsm"));
  }
  return Status();
}

template <typename T>
Status Engine::CholeskyInverse() {
  // W = L⁻¹ (TriangularInverse), then B⁻¹ = Wᴴ W = Σ_k W_kᴴ W_k over W's row blocks W_k = W[k,
  // :e_k], which are zero beyond column e_k = the block's end (one gemm each into the leading e_k x
  // e_k block, 2N³/3 flops in all, both triangles). With the factorization, N³ flops against 7N³/3
  // for the solve with the identity.
  StepTimer timer("CholeskyInverse", stream_);
  const layout::Plan& plan = state_.plan;
  const int64_t n = plan.engine_rows(), t = plan.tile, ld = std::max<int64_t>(local_rows_, 1);
  const int64_t tiles = (n + t - 1) / t;
  const int64_t nb = t * std::max<int64_t>(1, (tiles + 7) / 8);  // about 8 blocks, whole tiles
  BlasDescriptor dl, dw;
  const cublasComputeType_t compute = ComputeOf<T>();
  const T one(1);
  const cublasOperation_t adjoint = AdjointOp<T>();
  // B⁻¹ into a buffer of its own (work_ may be the shard, which InverseOut writes).
  void* y = nullptr;
  const size_t bytes = sizeof(T) * std::max<int64_t>(local_rows_ * local_cols_, 1);
  // Buffers and the products' workspace first, agreed; local errors after that are kept and
  // agreed at the end (every rank enters each collective product).
  Deferred local;
  local.Run([&] { return Identity<T>(); });  // W := I (local_b_, distributed like B)
  local.Run([&] { return dl.Create(ctx_, DataTypeOf<T>(), n, n, t, t, ld); });
  local.Run([&] { return dw.Create(ctx_, DataTypeOf<T>(), n, n, t, t, ld); });
  local.Run([&] { return Scratch(bytes, &y); });
  local.Run([&] { return CudaCheck(cudaMemsetAsync(y, 0, bytes, stream_), "cudaMemsetAsync"); });
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("inv_cholesky", local));
  Deferred failed;
  JAXMG_RETURN_IF_ERROR(TriangularInverse<T>(work_, ld, local_b_, ld, n, false, false, &failed));
  size_t dev = 0, host = 0;
  for (int64_t k0 = 0; k0 < n && local.ok(); k0 += nb) {
    const int64_t kb = std::min(nb, n - k0), e = k0 + kb;
    local.Run([&]() -> Status {
      size_t d = 0, h = 0;
      JAXMG_BLASMP(cublasMpGemm_bufferSize(ctx_.blas, adjoint, CUBLAS_OP_N, e, e, kb, &one,
                                           local_b_, k0 + 1, 1, dw.get(), local_b_, k0 + 1, 1,
                                           dw.get(), &one, y, 1, 1, dl.get(), compute, &d, &h));
      dev = std::max(dev, d), host = std::max(host, h);
      return Status();
    });
  }
  void* d_work = nullptr;
  local.Run([&] { return Workspace(dev, host, &d_work); });
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("inv_cholesky", local));
  for (int64_t k0 = 0; k0 < n; k0 += nb) {
    const int64_t kb = std::min(nb, n - k0), e = k0 + kb;
    failed.Step("inv_cholesky", ctx_.rank, k0 / nb);
    failed.Keep(BlasMpCheck(
        cublasMpGemm(ctx_.blas, adjoint, CUBLAS_OP_N, e, e, kb, &one, local_b_, k0 + 1, 1, dw.get(),
                     local_b_, k0 + 1, 1, dw.get(), &one, y, 1, 1, dl.get(), compute, d_work,
                     workspace_bytes_, ctx_.host_work.data(), ctx_.host_work.size()),
        "cublasMpGemm"));
  }
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("inv_cholesky", failed));
  local_b_ = y;  // (desc_b_ describes it: the same distribution as W's)
  return Status();
}

template <typename T>
Status Engine::InverseOut(void* shard) {
  StepTimer timer("InverseOut", stream_);
  return MatrixOut<T>(local_b_, shard);
}

template <typename T>
Status Engine::FactorOut(void* out, int64_t count) {
  if (work_ == out) return Status();  // the engine worked in the shard: kept as it is
  StepTimer timer("FactorOut", stream_);
  if (state_.plan.strategy != layout::Strategy::kRelabel) return MatrixOut<T>(work_, out);
  if (count != local_rows_ * local_cols_) {
    return JAXMG_ERROR("the factor buffer has " + std::to_string(count) + " entries, not " +
                       std::to_string(local_rows_ * local_cols_));
  }
  // The padded engine matrix.
  JAXMG_CUDA(cudaMemcpyAsync(out, work_, sizeof(T) * count, cudaMemcpyDeviceToDevice, stream_));
  return Status();
}

template <typename T>
Status Engine::MatrixOut(const void* from, void* shard) {
  // Y[er, ec] = Y_M[π(er), π(ec)] for the matrix Y_M that M (the shards read column-major) would
  // give: the entry at row π(ec), column π(er) of the JAX matrix, in this device's shard
  // (row-major). Padding is dropped.
  const layout::Plan& plan = state_.plan;
  const int64_t t = plan.tile, lr = local_rows_, lc = local_cols_;
  // The shard of the matrix handed: cols.extent x rows.extent, in blocks of cols.shard rows and
  // rows.shard columns.
  const int64_t sr = plan.cols.shard, sc = plan.rows.shard;
  if (plan.strategy != layout::Strategy::kRelabel) {
    // Back from block-cyclic tiles to the block layout.
    return Redistribute<T>(from, /*to_tiles=*/false, shard);
  }
  std::vector<int64_t> col_orig(static_cast<size_t>(std::max<int64_t>(lc, 1)), -1);
  for (int64_t c = 0; c < lc; ++c) {
    col_orig[c] = layout::EngineGlobalToOriginal(plan, plan.cols,
                                                 layout::CyclicGlobal(c, t, ctx_.npcol, ctx_.mycol))
                      .value;
  }
  void* d_cols = nullptr;
  JAXMG_RETURN_IF_ERROR(Scratch(sizeof(int64_t) * col_orig.size(), &d_cols));
  JAXMG_CUDA(cudaMemcpyAsync(d_cols, col_orig.data(), sizeof(int64_t) * col_orig.size(),
                             cudaMemcpyHostToDevice, stream_));
  JAXMG_CUDA(cuda::ScatterMatrix(KernelType<T>(), from, lr, lc, state_.d_rhs_map[0],
                                 static_cast<const int64_t*>(d_cols),
                                 static_cast<int64_t>(ctx_.mesh_u) * sr,
                                 static_cast<int64_t>(ctx_.mesh_v) * sc, sc, shard, stream_));
  // col_orig is pageable: the copy has read it when cudaMemcpyAsync returned.
  return Status();
}

template <typename T>
Status Engine::Adopt(const void* factor, int64_t count) {
  const layout::Plan& plan = state_.plan;
  if (plan.strategy == layout::Strategy::kRelabel) {
    // FactorOut left the engine-local matrix itself: read it where it is.
    local_rows_ = layout::EngineLocalExtent(plan, plan.rows, ctx_.myrow);
    local_cols_ = layout::EngineLocalExtent(plan, plan.cols, ctx_.mycol);
    if (count != local_rows_ * local_cols_) {
      return JAXMG_ERROR("the factor has " + std::to_string(count) + " entries here, the engine " +
                         std::to_string(local_rows_ * local_cols_));
    }
    JAXMG_SOLVER(cusolverMpSetStream(ctx_.handle, stream_));
    JAXMG_RETURN_IF_ERROR(Small());
    work_ = const_cast<void*>(factor);
    return desc_a_.Create(ctx_, DataTypeOf<T>(), plan.engine_rows(), plan.engine_cols(), plan.tile,
                          plan.tile, std::max<int64_t>(local_rows_, 1));
  }
  // Redistributed: Prepare reads the JAX layout and writes a copy of its own.
  if (count != plan.rows.shard * plan.cols.shard)
    return JAXMG_ERROR("the factor has the wrong size");
  return Prepare<T>(const_cast<void*>(factor));
}

Status Engine::Pivots(std::vector<int64_t>* out) {
  if (own_lu_) {
    *out = own_pivots_;
    return Status();
  }
  return EnginePivots(out);
}

Status Engine::PivotsOut(int32_t* out) {
  std::vector<int64_t> piv;
  JAXMG_RETURN_IF_ERROR(Pivots(&piv));
  std::vector<int32_t> narrow(piv.begin(), piv.end());
  // Pageable: the copy has read `narrow` when cudaMemcpyAsync returns.
  JAXMG_CUDA(cudaMemcpyAsync(out, narrow.data(), sizeof(int32_t) * narrow.size(),
                             cudaMemcpyHostToDevice, stream_));
  return Status();
}

Status Engine::PivotsIn(const int32_t* in) {
  // The kept pivots go to the solve that applies them on the host (LuSolveWithPivots), as the
  // engine's own LU does.
  const int64_t n = state_.plan.engine_rows();
  std::vector<int32_t> narrow(static_cast<size_t>(n));
  JAXMG_CUDA(
      cudaMemcpyAsync(narrow.data(), in, sizeof(int32_t) * n, cudaMemcpyDeviceToHost, stream_));
  JAXMG_CUDA(cudaStreamSynchronize(stream_));
  own_pivots_.assign(narrow.begin(), narrow.end());
  own_lu_ = true;
  return Status();
}

template <typename T>
Status Engine::SignLogDet(void* sign, void* logabsdet) {
  using R = RealOf<T>;
  // Over the local diagonal: Σ log|d|, Σ arg d, exact zeros, non-finite entries (one kernel,
  // one all-reduce); the pivots' and the relabeling's parities on the host.
  const layout::Plan& plan = state_.plan;
  void* sums = nullptr;
  JAXMG_RETURN_IF_ERROR(Scratch(4 * sizeof(double), &sums));
  JAXMG_CUDA(cuda::DiagSums(KernelType<T>(), work_, local_rows_, local_cols_, plan.tile, ctx_.nprow,
                            ctx_.npcol, ctx_.myrow, ctx_.mycol, static_cast<double*>(sums),
                            stream_));
  // A non-finite entry anywhere in the factor counts, not only on the diagonal.
  JAXMG_RETURN_IF_ERROR(NonFinite<T>(small_ + 8));
  int32_t columns[2] = {kNoColumn, kNoColumn};  // the factor's scan, the input's (Getrf)
  JAXMG_CUDA(
      cudaMemcpyAsync(columns, small_ + 8, sizeof(columns), cudaMemcpyDeviceToHost, stream_));
  JAXMG_CUDA(cudaStreamSynchronize(stream_));
  if (columns[0] != kNoColumn || columns[1] != kNoColumn) {
    const double one = 1.0;  // pageable: read when cudaMemcpyAsync returns
    JAXMG_CUDA(cudaMemcpyAsync(static_cast<double*>(sums) + 3, &one, sizeof(double),
                               cudaMemcpyHostToDevice, stream_));
  }
  JAXMG_NCCL(ncclAllReduce(sums, sums, 4, ncclDouble, ncclSum, ctx_.comm, stream_));
  double host[4];
  JAXMG_CUDA(cudaMemcpyAsync(host, sums, sizeof(host), cudaMemcpyDeviceToHost, stream_));
  JAXMG_CUDA(cudaStreamSynchronize(stream_));
  std::vector<int64_t> piv;
  JAXMG_RETURN_IF_ERROR(Pivots(&piv));
  int64_t swaps = 0;
  for (size_t i = 0; i < piv.size(); ++i) swaps += piv[i] != static_cast<int64_t>(i) + 1;
  const int parity = static_cast<int>((swaps + layout::RelabelParity(plan)) % 2);
  const T s = SignOf<T>(host[1], parity, host[2] > 0, host[3] > 0);
  const R nan = std::numeric_limits<R>::quiet_NaN(), inf = std::numeric_limits<R>::infinity();
  const R l = host[3] > 0 ? nan : host[2] > 0 ? -inf : static_cast<R>(host[0]);
  // Pageable: each copy has read its source when cudaMemcpyAsync returns.
  JAXMG_CUDA(cudaMemcpyAsync(sign, &s, sizeof(T), cudaMemcpyHostToDevice, stream_));
  JAXMG_CUDA(cudaMemcpyAsync(logabsdet, &l, sizeof(R), cudaMemcpyHostToDevice, stream_));
  return Status();
}

template <typename T>
Status Engine::Geqrf(int* info) {
  StepTimer timer("Geqrf", stream_);
  JAXMG_RETURN_IF_ERROR(QrFactor<T>());
  return Agree<T>(false, info, /*diag_limit=*/0);  // a zero on R's diagonal is a valid QR
}

// Least squares on grids of several process columns, where cuSOLVERMp 0.9.1's Gels and Ormqr
// answer NOT_SUPPORTED (its Geqrf and Orgqr run): QR; R's n rows on every rank (LeadingRows);
// Q formed (Orgqr); c = Qᴴ b from each rank's local columns of Q and its rows of b (one local
// gemm; the n x nrhs sum over the grid); then R x = c on every rank (one local trsm, O(n² nrhs)).
// The solution, whole on every rank, is what LeadingRowsOut then hands out.
template <typename T>
Status Engine::QrSolve(int* info) {
  StepTimer timer("QrSolve", stream_);
  const layout::Plan& plan = state_.plan;
  const size_t es = sizeof(T);
  const int64_t n = plan.cols.extent, t = plan.tile, lr = local_rows_, lc = local_cols_;
  const int64_t k = nrhs_;
  JAXMG_RETURN_IF_ERROR(QrFactor<T>());
  JAXMG_RETURN_IF_ERROR(Agree<T>(false, info, /*diag_limit=*/n));  // zero on R's diagonal
  if (*info != 0) return Status();
  void* r = nullptr;
  JAXMG_RETURN_IF_ERROR(LeadingRows<T>(/*from_matrix=*/true, &r));  // n x n, row-major
  JAXMG_RETURN_IF_ERROR(Orgqr<T>());
  // This rank's rows of b, all k columns: (lr x k) column-major.
  void *rows = nullptr, *part = nullptr, *c = nullptr;
  JAXMG_RETURN_IF_ERROR(Scratch(es * std::max<int64_t>(lr * k, 1), &rows));
  JAXMG_CUDA(cuda::GatherRhs(KernelType<T>(), full_, k, state_.d_rhs_map[0], lr, k, t, 1, 0,
                             /*conj=*/false, rows, stream_));
  // part (lc x k) = Q_localᴴ rows; row i of part is the engine column of local column i.
  JAXMG_RETURN_IF_ERROR(Scratch(es * std::max<int64_t>(lc * k, 1), &part));
  const LocalBlas* lb = nullptr;
  cublasHandle_t blas = nullptr;
  JAXMG_RETURN_IF_ERROR(LocalHandle(&lb, &blas));
  int ilr = 0, ilc = 0, ik = 0, in = 0;
  JAXMG_RETURN_IF_ERROR(CheckedInt(lr, "local rows", &ilr));
  JAXMG_RETURN_IF_ERROR(CheckedInt(lc, "local columns", &ilc));
  JAXMG_RETURN_IF_ERROR(CheckedInt(k, "right-hand sides", &ik));
  JAXMG_RETURN_IF_ERROR(CheckedInt(n, "columns", &in));
  const T one(1), zero(0);
  const cublasOperation_t adjoint = AdjointOp<T>();
  if (lc > 0 && k > 0) {
    JAXMG_RETURN_IF_ERROR(CublasCheck(
        lb->gemm[Scalar<T>::kIndex](blas, adjoint, CUBLAS_OP_N, ilc, ik, ilr, &one, work_,
                                    std::max(ilr, 1), rows, std::max(ilr, 1), &zero, part, ilc),
        "cublas gemm (Qᴴ b)"));
  }
  std::vector<int64_t> col_global(static_cast<size_t>(std::max<int64_t>(lc, 1)), -1);
  for (int64_t i = 0; i < lc; ++i) {
    const int64_t g = layout::CyclicGlobal(i, t, ctx_.npcol, ctx_.mycol);
    col_global[i] = g < n ? g : -1;
  }
  void* d_cols = nullptr;
  JAXMG_RETURN_IF_ERROR(Scratch(sizeof(int64_t) * col_global.size(), &d_cols));
  JAXMG_CUDA(cudaMemcpyAsync(d_cols, col_global.data(), sizeof(int64_t) * col_global.size(),
                             cudaMemcpyHostToDevice, stream_));
  JAXMG_RETURN_IF_ERROR(Scratch(es * n * k, &c));  // c (n x k) row-major: cᵀ column-major
  JAXMG_CUDA(cudaMemsetAsync(c, 0, es * n * k, stream_));
  JAXMG_CUDA(cuda::ScatterRhs(KernelType<T>(), part, k, static_cast<const int64_t*>(d_cols), lc, k,
                              t, 1, 0, /*conj=*/false, c, stream_));
  const size_t reals = static_cast<size_t>(n * k * Scalar<T>::kParts);
  JAXMG_NCCL(ncclAllReduce(c, c, reals, NcclRealOf<T>(), ncclSum, ctx_.comm, stream_));
  // R x = c  <=>  xᵀ = cᵀ R⁻ᵀ: with r read column-major (Rᵀ, lower), cᵀ := cᵀ (Rᵀ)⁻¹ in place.
  JAXMG_RETURN_IF_ERROR(CublasCheck(
      lb->trsm[Scalar<T>::kIndex](blas, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N,
                                  CUBLAS_DIAG_NON_UNIT, ik, in, &one, r, in, c, std::max(ik, 1)),
      "cublas trsm (R x = Qᴴ b)"));
  solution_ = c;  // col_global is pageable: the copy has read it when cudaMemcpyAsync returned
  return Status();
}

template <typename T>
Status Engine::QrFactor() {
  if (UseOwnQr()) return Qr1D<T>();
  const layout::Plan& plan = state_.plan;
  const int64_t m = plan.engine_rows(), n = plan.cols.extent;
  JAXMG_RETURN_IF_ERROR(Scratch(sizeof(T) * (local_cols_ + plan.tile), &tau_));
  size_t dev = 0, host = 0;
  JAXMG_SOLVER(cusolverMpGeqrf_bufferSize(ctx_.handle, m, n, work_, 1, 1, desc_a_.get(),
                                          DataTypeOf<T>(), &dev, &host));
  void* d_work = nullptr;
  JAXMG_RETURN_IF_ERROR(Workspace(dev, host, &d_work));
  JAXMG_SOLVER(cusolverMpGeqrf(ctx_.handle, m, n, work_, 1, 1, desc_a_.get(), tau_, DataTypeOf<T>(),
                               d_work, workspace_bytes_, ctx_.host_work.data(),
                               ctx_.host_work.size(), small_));
  return Status();
}

template <typename T>
Status Engine::Orgqr() {
  StepTimer timer("Orgqr", stream_);
  if (qr_t_ != nullptr) return Orgqr1D<T>();
  const layout::Plan& plan = state_.plan;
  const int64_t m = plan.engine_rows(), n = plan.cols.extent;
  size_t dev = 0, host = 0;
  JAXMG_SOLVER(cusolverMpOrgqr_bufferSize(ctx_.handle, m, n, n, work_, 1, 1, desc_a_.get(), tau_,
                                          DataTypeOf<T>(), &dev, &host));
  void* d_work = nullptr;
  JAXMG_RETURN_IF_ERROR(Workspace(dev, host, &d_work));
  JAXMG_SOLVER(cusolverMpOrgqr(ctx_.handle, m, n, n, work_, 1, 1, desc_a_.get(), tau_,
                               DataTypeOf<T>(), d_work, workspace_bytes_, ctx_.host_work.data(),
                               ctx_.host_work.size(), small_ + 2));
  return Status();
}

int64_t Engine::QrPanelBlock(int64_t t) {
  // JAXMG_QR_PANEL: the width of the blocks a panel is factored in (at most 512: cusolverDn's
  // geqrf answered INVALID_VALUE for a 32768 x 2048 panel on H200s).
  const char* value = std::getenv("JAXMG_QR_PANEL");
  const int64_t ib = value != nullptr ? std::atoll(value) : 256;
  return std::min<int64_t>({ib > 0 ? ib : 256, 512, t});
}

bool Engine::UseOwnQr() const {
  // The 1-D QR needs every engine row on every process: a 1 x P grid.
  const char* choice = std::getenv("JAXMG_GPU_QR");
  const bool library = choice != nullptr && std::string(choice) == "cusolvermp";
  return !library && ctx_.nprow == 1;
}

Engine::QrShape Engine::QrShapeOf() const {
  const layout::Plan& plan = state_.plan;
  QrShape q;
  q.m = plan.engine_rows(), q.n = plan.cols.extent, q.t = plan.tile, q.lr = local_rows_;
  q.procs = ctx_.npcol, q.me = ctx_.mycol;
  q.tiles = (q.n + q.t - 1) / q.t;
  q.held = layout::CyclicLocalExtent(q.n, q.t, q.me, q.procs);
  return q;
}

Status Engine::MainLane(Lane* out) {
  JAXMG_RETURN_IF_ERROR(LocalSolver(&out->lb, &out->blas, &out->dn, &out->params));
  out->stream = stream_;
  return Status();
}

Status Engine::SideLane(Lane* out) {
  JAXMG_RETURN_IF_ERROR(GetLocalBlas(&out->lb));
  if (ctx_.side_stream == nullptr) {
    int least = 0, greatest = 0;
    JAXMG_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    cudaStream_t s = nullptr;
    JAXMG_CUDA(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest));
    for (cudaEvent_t& e : ctx_.side_events) {
      JAXMG_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    }
    cublasHandle_t blas = nullptr;
    cusolverDnHandle_t dn = nullptr;
    cusolverDnParams_t params = nullptr;
    JAXMG_RETURN_IF_ERROR(CublasCheck(out->lb->create(&blas), "cublasCreate"));
    JAXMG_RETURN_IF_ERROR(CublasCheck(out->lb->set_stream(blas, s), "cublasSetStream"));
    JAXMG_SOLVER(out->lb->dn_create(&dn));
    JAXMG_SOLVER(out->lb->dn_create_params(&params));
    JAXMG_SOLVER(out->lb->dn_set_stream(dn, s));
    ctx_.side_blas = blas;
    ctx_.side_dn = dn;
    ctx_.side_dn_params = params;
    ctx_.side_stream = s;
  }
  out->stream = ctx_.side_stream;
  out->blas = static_cast<cublasHandle_t>(ctx_.side_blas);
  out->dn = static_cast<cusolverDnHandle_t>(ctx_.side_dn);
  out->params = static_cast<cusolverDnParams_t>(ctx_.side_dn_params);
  return Status();
}

Status Engine::Join(cudaStream_t from, cudaStream_t to, int event) {
  cudaEvent_t e = ctx_.side_events[event];
  JAXMG_CUDA(cudaEventRecord(e, from));
  JAXMG_CUDA(cudaStreamWaitEvent(to, e, 0));
  return Status();
}

// Blocked Householder QR on a 1 x P grid (columns block-cyclic in tiles of t, every row local),
// in the compact WY form Q_k = I − V T Vᴴ of each tile column k of the n factored: its owner
// factors the panel (rows k t .. m; QrPanel), builds V (unit lower trapezoidal) and T = S⁻¹ for
// S = striu(VᴴV) + diag(1/τ) (Joffrain et al.'s UT transform; one small trsm); one NCCL
// broadcast of V and T; every rank applies Q_kᴴ to its columns right of the panel (W = Vᴴ C,
// W' = Tᴴ W by trmm, C −= V W'). About 2 m n² − 2n³/3 flops, all but the panels' in gemm and
// trmm spread over the P devices (a trsm with S in each update instead: slower on H200s, see
// bench/results/qr_own_h200x2_*.json).
// Look-ahead: the owner of panel k + 1 updates that tile first, then factors it on the side
// stream while it updates the rest of its columns, so that the panels (latency-bound: cusolverDn
// geqrf's cost grows with their columns, not with their width) may overlap the updates.
// The matrix is left as geqrf leaves it (R on and above the diagonal, the vectors below, τ in
// tau_), and every T_k is kept in qr_t_ for Orgqr1D. A local library error (invalid arguments:
// not expected) stops this rank's computing but not its part of the broadcasts, and is agreed
// at the end, so that no rank waits for another.
template <typename T>
Status Engine::Qr1D() {
  const QrShape q = QrShapeOf();
  const int64_t m = q.m, n = q.n, t = q.t, lr = q.lr, tiles = q.tiles, held = q.held;
  const int procs = q.procs, me = q.me;
  const int64_t ib = QrPanelBlock(t);
  const size_t es = sizeof(T);
  Lane main, side;
  QrWork& work = qr_work_;
  QrWork side_work{};
  void *panels = nullptr, *info = nullptr;
  Status local = MainLane(&main);
  if (local.ok()) local = SideLane(&side);
  if (local.ok()) local = Scratch(es * n, &tau_);
  if (local.ok()) local = Scratch(2 * es * m * t, &panels);  // V_k and V_k+1
  if (local.ok()) local = Scratch(es * tiles * t * t, &qr_t_);
  for (void** p : {&work.w, &work.w2}) {
    if (local.ok()) local = Scratch(es * t * std::max<int64_t>(held, t), p);
  }
  for (void** p : {&side_work.w, &side_work.w2}) {
    if (local.ok()) local = Scratch(es * ib * t, p);
  }
  for (void** p : {&work.s, &side_work.s}) {
    if (local.ok()) local = Scratch(es * t * t, p);
  }
  if (local.ok()) local = Scratch(sizeof(int), &info);
  size_t dev = 0, host = 0;
  if (local.ok()) {
    local = SolverCheck(main.lb->geqrf_buffer_size(main.dn, main.params, m, ib, DataTypeOf<T>(),
                                                   work_, std::max<int64_t>(lr, 1), DataTypeOf<T>(),
                                                   tau_, DataTypeOf<T>(), &dev, &host),
                        "cusolverDnXgeqrf_bufferSize");
  }
  void* d_work = nullptr;
  if (local.ok()) local = Workspace(dev, host, &d_work);
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(local));
  qr_panel_ = panels;
  char* a = static_cast<char*>(work_);
  char* tau = static_cast<char*>(tau_);
  auto v_of = [&](int64_t k) { return static_cast<char*>(panels) + es * (k % 2) * m * t; };
  auto s_of = [&](int64_t k) { return static_cast<char*>(qr_t_) + es * k * t * t; };
  auto column_of = [&](int64_t k) { return a + es * (k * t + (k / procs) * t * lr); };
  auto panel = [&](const Lane& lane, int64_t k) {
    PartTimer part("panel (all)");
    const int64_t row0 = k * t;
    const QrPanelWork pw{ib, d_work, dev, static_cast<int*>(info),
                         lane.stream == stream_ ? work : side_work};
    return QrPanel<T>(lane, pw, column_of(k), m - row0, std::min(t, n - row0), tau + es * row0,
                      v_of(k), s_of(k));
  };
  Status failed;  // this rank's first local error
  if (me == 0) failed = panel(main, 0);
  for (int64_t k = 0; k < tiles; ++k) {
    const int owner = static_cast<int>(k % procs);
    const int64_t row0 = k * t, rows = m - row0, kb = std::min(t, n - row0);
    if (failed.ok()) failed = TestFailure("qr", ctx_.rank, k);
    if (procs > 1) {
      PartTimer part("broadcast");
      const size_t reals = static_cast<size_t>(Scalar<T>::kParts);
      JAXMG_NCCL(ncclGroupStart());
      JAXMG_NCCL(ncclBroadcast(v_of(k), v_of(k), rows * kb * reals, NcclRealOf<T>(), owner,
                               ctx_.comm, stream_));
      JAXMG_NCCL(ncclBroadcast(s_of(k), s_of(k), t * kb * reals, NcclRealOf<T>(), owner, ctx_.comm,
                               stream_));
      JAXMG_NCCL(ncclGroupEnd());
    }
    if (!failed.ok()) continue;
    // This rank's factored columns right of tile k: local tiles j with j * procs + me > k; the
    // first of them is tile k + 1 where this rank owns it.
    const int64_t first = k >= me ? (k - me) / procs + 1 : 0, cols = held - first * t;
    char* c = a + es * (row0 + first * t * lr);
    auto update = [&](char* at, int64_t width) {
      return ApplyReflectors<T>(main, v_of(k), rows, kb, s_of(k), t, /*adjoint=*/true, at, width,
                                lr, work);
    };
    if (k + 1 < tiles && (k + 1) % procs == me) {
      const int64_t next = std::min(t, n - (k + 1) * t);
      failed = update(c, next);
      if (failed.ok()) failed = Join(stream_, side.stream, 0);
      // The rest of the update is queued before the panel (cusolverDn may block the host until
      // its stream is done).
      if (failed.ok()) failed = update(c + es * next * lr, cols - next);
      if (failed.ok()) failed = panel(side, k + 1);
      if (failed.ok()) failed = Join(side.stream, stream_, 1);
    } else {
      failed = update(c, cols);
    }
  }
  if (DebugParts()) PrintParts("Qr1D");
  return AgreeOnFailure("qr", failed);
}

// The owner's part of panel k (rows x cols from `column`, leading dimension local_rows_): geqrf
// in blocks of ib columns, the panel's columns right of each block updated as the trailing
// matrix is (so that the BLAS2 part is ib wide); then v := the panel's V and f := its T.
template <typename T>
Status Engine::QrPanel(const Lane& lane, const QrPanelWork& pw, char* column, int64_t rows,
                       int64_t cols, char* tau, void* v, void* f) {
  const size_t es = sizeof(T);
  const int64_t lr = local_rows_, t = state_.plan.tile;
  for (int64_t j = 0; j < cols; j += pw.ib) {
    const int64_t jb = std::min(pw.ib, cols - j);
    char* block = column + es * (j + j * lr);
    {
      PartTimer part("panel geqrf");
      JAXMG_SOLVER(lane.lb->geqrf(lane.dn, lane.params, rows - j, jb, DataTypeOf<T>(), block, lr,
                                  DataTypeOf<T>(), tau + es * j, DataTypeOf<T>(), pw.d_work, pw.dev,
                                  ctx_.host_work.data(), ctx_.host_work.size(), pw.info));
    }
    if (j + jb == cols) break;
    JAXMG_CUDA(cuda::ReflectorBlock(KernelType<T>(), block, lr, rows - j, jb, tau + es * j, v,
                                    rows - j, lane.stream));
    JAXMG_RETURN_IF_ERROR(ReflectorFactorOf<T>(lane, v, rows - j, jb, tau + es * j, f, pw.work.s));
    JAXMG_RETURN_IF_ERROR(ApplyReflectors<T>(lane, v, rows - j, jb, f, t, /*adjoint=*/true,
                                             block + es * jb * lr, cols - j - jb, lr, pw.work));
  }
  JAXMG_CUDA(
      cuda::ReflectorBlock(KernelType<T>(), column, lr, rows, cols, tau, v, rows, lane.stream));
  return ReflectorFactorOf<T>(lane, v, rows, cols, tau, f, pw.work.s);
}

template <typename T>
Status Engine::ReflectorFactorOf(const Lane& lane, const void* v, int64_t rows, int64_t cols,
                                 const void* tau, void* f, void* s) {
  // S := VᴴV, then its strict upper part and diag(1/τ); F := S⁻¹ (trsm on the identity).
  const int64_t t = state_.plan.tile;
  int ir = 0, ic = 0, it = 0;
  JAXMG_RETURN_IF_ERROR(CheckedInt(rows, "rows", &ir));
  JAXMG_RETURN_IF_ERROR(CheckedInt(cols, "columns", &ic));
  JAXMG_RETURN_IF_ERROR(CheckedInt(t, "tile", &it));
  const T one(1), zero(0);
  const int x = Scalar<T>::kIndex;
  JAXMG_RETURN_IF_ERROR(CublasCheck(lane.lb->gemm[x](lane.blas, AdjointOp<T>(), CUBLAS_OP_N, ic, ic,
                                                     ir, &one, v, ir, v, ir, &zero, s, it),
                                    "cublas gemm (VᴴV)"));
  JAXMG_CUDA(cuda::ReflectorFactor(KernelType<T>(), s, t, cols, tau, lane.stream));
  JAXMG_CUDA(cuda::IdentityBlock(KernelType<T>(), f, t, cols, cols, 0, lane.stream));
  return CublasCheck(
      lane.lb->trsm[x](lane.blas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N,
                       CUBLAS_DIAG_NON_UNIT, ic, ic, &one, s, it, f, it),
      "cublas trsm (T = S⁻¹)");
}

template <typename T>
Status Engine::ApplyReflectors(const Lane& lane, const void* v, int64_t rows, int64_t k,
                               const void* f, int64_t ldf, bool adjoint, void* c, int64_t cols,
                               int64_t ldc, const QrWork& work) {
  if (cols <= 0 || rows <= 0 || k <= 0) return Status();
  int ir = 0, ic = 0, ik = 0, is = 0, il = 0;
  JAXMG_RETURN_IF_ERROR(CheckedInt(rows, "rows", &ir));
  JAXMG_RETURN_IF_ERROR(CheckedInt(cols, "columns", &ic));
  JAXMG_RETURN_IF_ERROR(CheckedInt(k, "reflectors", &ik));
  JAXMG_RETURN_IF_ERROR(CheckedInt(ldf, "tile", &is));
  JAXMG_RETURN_IF_ERROR(CheckedInt(ldc, "local rows", &il));
  const T one(1), zero(0), minus_one(-1);
  const LocalBlas& lb = *lane.lb;
  const int x = Scalar<T>::kIndex;
  {
    PartTimer part("gemm W = Vᴴ C");
    JAXMG_RETURN_IF_ERROR(CublasCheck(lb.gemm[x](lane.blas, AdjointOp<T>(), CUBLAS_OP_N, ik, ic, ir,
                                                 &one, v, ir, c, il, &zero, work.w, ik),
                                      "cublas gemm (Vᴴ C)"));
  }
  {
    PartTimer part(adjoint ? "trmm Tᴴ W" : "trmm T W");
    JAXMG_RETURN_IF_ERROR(
        CublasCheck(lb.trmm[x](lane.blas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER,
                               adjoint ? AdjointOp<T>() : CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, ik, ic,
                               &one, f, is, work.w, ik, work.w2, ik),
                    "cublas trmm (T W)"));
  }
  PartTimer part("gemm C -= V W");
  return CublasCheck(lb.gemm[x](lane.blas, CUBLAS_OP_N, CUBLAS_OP_N, ir, ic, ik, &minus_one, v, ir,
                                work.w2, ik, &one, c, il),
                     "cublas gemm (C − V W)");
}

// Q (the leading n columns, in place of the factors) by backward accumulation, tile column k
// from the last: its owner rebuilds V_k from its columns (before they are overwritten) and
// broadcasts it; every rank applies Q_k to its columns right of tile k (already Q's, rows
// k t .. m); the owner then writes tile k's own columns, Q_k [0; I; 0] = [0; I; 0] − [0; V X]
// with X = T (V's leading block)ᴴ. About 2 m n² − 2n³/3 flops, as the factorization. Local
// errors as in Qr1D.
template <typename T>
Status Engine::Orgqr1D() {
  const QrShape q = QrShapeOf();
  const int64_t m = q.m, n = q.n, t = q.t, lr = q.lr, tiles = q.tiles, held = q.held;
  const int procs = q.procs, me = q.me;
  const size_t es = sizeof(T);
  Lane main;
  const QrWork& work = qr_work_;  // Qr1D's
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(MainLane(&main)));
  char* a = static_cast<char*>(work_);
  const char* tau = static_cast<const char*>(tau_);
  void* v = qr_panel_;
  Status failed;
  // Tile k's own columns from row 0: [0; I; 0] − [0; V X].
  auto own_columns = [&](char* column, int64_t row0, int64_t rows, int64_t kb, const void* f) {
    int ir = 0, ik = 0, it = 0, il = 0;
    JAXMG_RETURN_IF_ERROR(CheckedInt(rows, "rows", &ir));
    JAXMG_RETURN_IF_ERROR(CheckedInt(kb, "reflectors", &ik));
    JAXMG_RETURN_IF_ERROR(CheckedInt(t, "tile", &it));
    JAXMG_RETURN_IF_ERROR(CheckedInt(lr, "local rows", &il));
    const T one(1), minus_one(-1);
    const int x = Scalar<T>::kIndex;
    JAXMG_CUDA(cuda::Adjoint(KernelType<T>(), v, rows, kb, kb, work.w, kb, stream_));
    JAXMG_RETURN_IF_ERROR(CublasCheck(
        main.lb->trmm[x](main.blas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N,
                         CUBLAS_DIAG_NON_UNIT, ik, ik, &one, f, it, work.w, ik, work.w2, ik),
        "cublas trmm (T Lᴴ)"));
    JAXMG_CUDA(cuda::IdentityBlock(KernelType<T>(), column, lr, m, kb, row0, stream_));
    return CublasCheck(main.lb->gemm[x](main.blas, CUBLAS_OP_N, CUBLAS_OP_N, ir, ik, ik, &minus_one,
                                        v, ir, work.w2, ik, &one, column + es * row0, il),
                       "cublas gemm (Q_k's columns)");
  };
  for (int64_t k = tiles - 1; k >= 0; --k) {
    const int owner = static_cast<int>(k % procs);
    const int64_t row0 = k * t, rows = m - row0, kb = std::min(t, n - row0);
    char* column = a + es * (k / procs) * t * lr;  // the tile's columns from row 0
    const void* f = static_cast<const char*>(qr_t_) + es * k * t * t;
    if (failed.ok()) failed = TestFailure("orgqr", ctx_.rank, tiles - 1 - k);
    if (me == owner && failed.ok()) {
      const cudaError_t e = cuda::ReflectorBlock(KernelType<T>(), column + es * row0, lr, rows, kb,
                                                 tau + es * row0, v, rows, stream_);
      if (e != cudaSuccess) failed = Status::Error(std::string("CUDA: ") + cudaGetErrorString(e));
    }
    if (procs > 1) {
      JAXMG_NCCL(ncclBroadcast(v, v, rows * kb * Scalar<T>::kParts, NcclRealOf<T>(), owner,
                               ctx_.comm, stream_));
    }
    if (!failed.ok()) continue;
    const int64_t first = k >= me ? (k - me) / procs + 1 : 0, cols = held - first * t;
    failed = ApplyReflectors<T>(main, v, rows, kb, f, t, /*adjoint=*/false,
                                a + es * (row0 + first * t * lr), cols, lr, work);
    if (failed.ok() && me == owner) failed = own_columns(column, row0, rows, kb, f);
  }
  if (DebugParts()) PrintParts("Orgqr1D");
  return AgreeOnFailure("orgqr", failed);
}

template <typename T>
Status Engine::Gels(int* info) {
  StepTimer timer("Gels", stream_);
  const layout::Plan& plan = state_.plan;
  const size_t es = sizeof(T);
  const int64_t m = plan.engine_rows(), n = plan.cols.extent, t = plan.tile, lr = local_rows_;
  if (ctx_.npcol > 1) return QrSolve<T>(info);
  // Every process column holds at least one tile of the right-hand side: zero columns are
  // appended where there are fewer (their solutions, zero, are never read).
  const int64_t held = std::max<int64_t>(nrhs_, t * ctx_.npcol);
  if (held != nrhs_) {
    const int64_t lc = CyclicLocalExtent(held, t, ctx_.mycol, ctx_.npcol);
    void* wide = nullptr;
    JAXMG_RETURN_IF_ERROR(Scratch(es * std::max<int64_t>(lr * lc, 1), &wide));
    JAXMG_CUDA(cudaMemsetAsync(wide, 0, es * lr * lc, stream_));
    // Global column j keeps its local index: the cyclic map does not depend on the width.
    if (lr * rhs_local_cols_ > 0) {
      JAXMG_CUDA(cudaMemcpyAsync(wide, local_b_, es * lr * rhs_local_cols_,
                                 cudaMemcpyDeviceToDevice, stream_));
    }
    local_b_ = wide;
    rhs_local_cols_ = lc;
    JAXMG_RETURN_IF_ERROR(
        desc_b_.Create(ctx_, DataTypeOf<T>(), m, held, t, t, std::max<int64_t>(lr, 1)));
  }
  size_t dev = 0, host = 0;
  JAXMG_SOLVER(cusolverMpGels_bufferSize(ctx_.handle, CUBLAS_OP_N, m, n, held, work_, 1, 1,
                                         desc_a_.get(), local_b_, 1, 1, desc_b_.get(),
                                         DataTypeOf<T>(), &dev, &host));
  void* d_work = nullptr;
  JAXMG_RETURN_IF_ERROR(Workspace(dev, host, &d_work));
  JAXMG_SOLVER(cusolverMpGels(ctx_.handle, CUBLAS_OP_N, m, n, held, work_, 1, 1, desc_a_.get(),
                              local_b_, 1, 1, desc_b_.get(), DataTypeOf<T>(), d_work,
                              workspace_bytes_, ctx_.host_work.data(), ctx_.host_work.size(),
                              small_));
  return Agree<T>(false, info, /*diag_limit=*/n);  // a zero on R's diagonal: rank deficient
}

template <typename T>
Status Engine::LeadingRows(bool from_matrix, void** out) {
  const layout::Plan& plan = state_.plan;
  const size_t es = sizeof(T);
  const int64_t n = plan.cols.extent, cols = from_matrix ? n : nrhs_;
  const int64_t lc = from_matrix ? local_cols_ : rhs_local_cols_;
  // Every entry is held by one process: the sum over the grid assembles the n x cols rows.
  JAXMG_RETURN_IF_ERROR(Scratch(es * n * cols, out));
  JAXMG_CUDA(cudaMemsetAsync(*out, 0, es * n * cols, stream_));
  JAXMG_CUDA(cuda::ScatterRhs(KernelType<T>(), from_matrix ? work_ : local_b_, cols,
                              state_.d_rhs_map[2], local_rows_, lc, plan.tile, ctx_.npcol,
                              ctx_.mycol, /*conj=*/false, *out, stream_));
  const size_t reals = static_cast<size_t>(n * cols * Scalar<T>::kParts);
  JAXMG_NCCL(ncclAllReduce(*out, *out, reals, NcclRealOf<T>(), ncclSum, ctx_.comm, stream_));
  return Status();
}

int64_t Engine::FirstRow(int64_t x_rows) const {
  const int64_t n = state_.plan.cols.extent;
  return x_rows == n ? 0 : x_rows * (rhs_by_cols_ ? ctx_.mesh_v : ctx_.mesh_u);
}

template <typename T>
Status Engine::LeadingRowsOut(bool from_matrix, void* x, int64_t x_rows) {
  StepTimer timer("LeadingRowsOut", stream_);
  const size_t es = sizeof(T);
  const int64_t cols = from_matrix ? state_.plan.cols.extent : nrhs_;
  if (!from_matrix && solution_ != nullptr) {  // QrSolve's, whole on every rank
    const char* mine = static_cast<const char*>(solution_) + es * FirstRow(x_rows) * cols;
    JAXMG_CUDA(cudaMemcpyAsync(x, mine, es * x_rows * cols, cudaMemcpyDeviceToDevice, stream_));
    return Status();
  }
  return RowsOut<T>(from_matrix ? work_ : local_b_, local_rows_,
                    from_matrix ? local_cols_ : rhs_local_cols_, cols, x, x_rows, cols);
}

template <typename T>
Status Engine::RowsOut(const void* local, int64_t ld, int64_t lc, int64_t cols, void* x,
                       int64_t x_rows, int64_t x_cols) {
  const layout::Plan& plan = state_.plan;
  const size_t es = sizeof(T);
  const int64_t n = plan.cols.extent, first = FirstRow(x_rows);
  // Chunks of rows (bounded scratch: R alone is n x n): each entry is held by one process, so
  // the sum over the grid assembles a chunk on every rank, which keeps its part of its block.
  // (The leading-rows map d_rhs_map[2] is the cyclic map for the first ld <= local_rows_ rows.)
  const int64_t chunk = RowsPerChunk(kRowsOutChunkBytes, es * cols, n);
  void* part = nullptr;
  JAXMG_RETURN_IF_ERROR(Scratch(es * chunk * cols, &part));
  for (int64_t r0 = 0; r0 < n; r0 += chunk) {
    const int64_t r1 = std::min(n, r0 + chunk);
    JAXMG_CUDA(cudaMemsetAsync(part, 0, es * (r1 - r0) * cols, stream_));
    JAXMG_CUDA(cuda::ScatterRhs(KernelType<T>(), local, cols, state_.d_rhs_map[2], ld, lc,
                                plan.tile, ctx_.npcol, ctx_.mycol, /*conj=*/false, part, stream_,
                                r0, r1));
    const size_t reals = static_cast<size_t>((r1 - r0) * cols * Scalar<T>::kParts);
    JAXMG_NCCL(ncclAllReduce(part, part, reals, NcclRealOf<T>(), ncclSum, ctx_.comm, stream_));
    const int64_t lo = std::max(r0, first), hi = std::min(r1, first + x_rows);
    if (lo < hi) {
      JAXMG_CUDA(cudaMemcpy2DAsync(static_cast<char*>(x) + es * (lo - first) * x_cols, es * x_cols,
                                   static_cast<const char*>(part) + es * (lo - r0) * cols,
                                   es * cols, es * cols, hi - lo, cudaMemcpyDeviceToDevice,
                                   stream_));
    }
  }
  return Status();
}

template <typename T>
Status Engine::SquareMatrix() {
  const layout::Plan& plan = state_.plan;
  const int64_t n = plan.cols.extent, t = plan.tile;
  square_rows_ = layout::CyclicLocalExtent(n, t, ctx_.myrow, ctx_.nprow);
  JAXMG_RETURN_IF_ERROR(
      Scratch(sizeof(T) * std::max<int64_t>(square_rows_ * local_cols_, 1), &square_));
  return desc_square_.Create(ctx_, DataTypeOf<T>(), n, n, t, t, std::max<int64_t>(square_rows_, 1));
}

template <typename T>
Status Engine::WorkOut(void* shard) {
  // In place (a relabeled plan without padding; general plans permute no local tiles): the
  // engine-local array is the shard.
  if (work_ == shard) return Status();
  StepTimer timer("WorkOut", stream_);
  return MatrixOut<T>(work_, shard);
}

// The status of a solver that wrote n real values to `values` (device) and its info to
// small_[0] (unless it `failed` outright: then n + 1): the info, else 1 + the first value that
// is not finite; agreed (max) by every rank.
template <typename T>
Status Engine::AgreeValues(const void* values, int64_t n, bool failed, int* info) {
  using R = RealOf<T>;
  std::vector<R> host(static_cast<size_t>(n));
  int32_t solver_info = 0;
  if (!failed) {
    JAXMG_CUDA(
        cudaMemcpyAsync(host.data(), values, sizeof(R) * n, cudaMemcpyDeviceToHost, stream_));
    JAXMG_CUDA(
        cudaMemcpyAsync(&solver_info, small_, sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
  }
  JAXMG_CUDA(cudaStreamSynchronize(stream_));
  int64_t local = failed ? n + 1 : std::max<int32_t>(solver_info, 0);
  for (int64_t i = 0; i < n && local == 0; ++i) {
    if (!std::isfinite(static_cast<double>(host[i]))) local = i + 1;
  }
  JAXMG_RETURN_IF_ERROR(BoundedAllreduceMax(ctx_, &local, 1));
  *info = static_cast<int>(std::min<int64_t>(local, INT32_MAX));
  return Status();
}

template <typename T>
Status Engine::Eigh(bool vectors, void* x, int* info) {
  StepTimer timer("Eigh", stream_);
  using R = RealOf<T>;
  const layout::Plan& plan = state_.plan;
  if (plan.strategy != layout::Strategy::kRedistribute) {
    return JAXMG_ERROR("the eigensolver runs on a redistributed matrix");
  }
  const size_t es = sizeof(T);
  const int64_t n = plan.engine_rows();
  JAXMG_CUDA(cudaMemsetAsync(x, 0, es * n, stream_));
  // A non-finite input is agreed on first (the agreement's scan of the matrix, no diagonal
  // check): the solver is not run on it.
  JAXMG_RETURN_IF_ERROR(Agree<T>(false, info, /*diag_limit=*/0));
  if (*info != 0) return Status();
  void* w = nullptr;
  JAXMG_RETURN_IF_ERROR(Scratch(sizeof(R) * std::max<int64_t>(n, 1), &w));
  nrhs_ = n;
  rhs_local_cols_ = local_cols_;
  if (!vectors && UseBandEigenvalues(plan.tile)) {
    JAXMG_RETURN_IF_ERROR(BandEigenvalues<T>(EngineMatrix(), w));
  } else if (vectors && UseBandEigh()) {
    JAXMG_RETURN_IF_ERROR(BandEigh<T>(w));
  } else {
    JAXMG_RETURN_IF_ERROR(LibraryEigh<T>(vectors, w));
  }
  JAXMG_RETURN_IF_ERROR(AgreeValues<T>(w, n, /*failed=*/false, info));
  // x := the eigenvalues, in the real parts (the imaginary parts stay 0).
  JAXMG_CUDA(
      cudaMemcpy2DAsync(x, es, w, sizeof(R), sizeof(R), n, cudaMemcpyDeviceToDevice, stream_));
  return Status();
}

// cuSOLVERMp's Syevd (one-stage tridiagonal reduction): w := the eigenvalues and, with vectors,
// local_b_ := the eigenvectors.
template <typename T>
Status Engine::LibraryEigh(bool vectors, void* w) {
  const int64_t n = state_.plan.engine_rows(), t = state_.plan.tile, lr = local_rows_;
  JAXMG_RETURN_IF_ERROR(Scratch(sizeof(T) * std::max<int64_t>(lr * local_cols_, 1), &local_b_));
  JAXMG_RETURN_IF_ERROR(
      desc_b_.Create(ctx_, DataTypeOf<T>(), n, n, t, t, std::max<int64_t>(lr, 1)));
  char jobz[2] = {vectors ? 'V' : 'N', 0};
  size_t dev = 0, host = 0;
  JAXMG_SOLVER(cusolverMpSyevd_bufferSize(ctx_.handle, jobz, CUBLAS_FILL_MODE_LOWER, n, work_, 1, 1,
                                          desc_a_.get(), w, local_b_, 1, 1, desc_b_.get(),
                                          DataTypeOf<T>(), &dev, &host));
  void* d_work = nullptr;
  JAXMG_RETURN_IF_ERROR(Workspace(dev, host, &d_work));
  JAXMG_SOLVER(cusolverMpSyevd(ctx_.handle, jobz, CUBLAS_FILL_MODE_LOWER, n, work_, 1, 1,
                               desc_a_.get(), w, local_b_, 1, 1, desc_b_.get(), DataTypeOf<T>(),
                               d_work, workspace_bytes_, ctx_.host_work.data(),
                               ctx_.host_work.size(), small_));
  return Status();
}

template <typename T>
Status Engine::VectorsOut(void* shard) {
  StepTimer timer("VectorsOut", stream_);
  // The two-stage path on a P x 1 grid leaves Zᴴ itself in local_b_.
  if (vectors_adjointed_) return MatrixOut<T>(local_b_, shard);
  // work_ (the redistributed copy, no longer needed) := Zᴴ, then back to the block layout.
  JAXMG_RETURN_IF_ERROR(GridAdjoint<T>(local_b_, work_));
  return MatrixOut<T>(work_, shard);
}

template <typename U>
Status Engine::GridAdjoint(const void* src, void* dst) {
  const layout::Plan& plan = state_.plan;
  const int64_t n = plan.engine_rows(), t = plan.tile, ld = std::max<int64_t>(local_rows_, 1);
  BlasDescriptor ds, dd;
  const cublasOperation_t adjoint = AdjointOp<U>();
  const U one(1), zero(0);
  size_t dev = 0, host = 0;
  void* d_work = nullptr;
  // Descriptors and workspace, agreed before the collective Geadd.
  Deferred local;
  local.Run([&]() -> Status {
    JAXMG_RETURN_IF_ERROR(ds.Create(ctx_, DataTypeOf<U>(), n, n, t, t, ld));
    JAXMG_RETURN_IF_ERROR(dd.Create(ctx_, DataTypeOf<U>(), n, n, t, t, ld));
    JAXMG_CUDA(cudaMemsetAsync(dst, 0, sizeof(U) * local_rows_ * local_cols_, stream_));
    JAXMG_BLASMP(cublasMpSetStream(ctx_.blas, stream_));
    JAXMG_BLASMP(cublasMpGeadd_bufferSize(ctx_.blas, adjoint, n, n, &one, src, 1, 1, ds.get(),
                                          &zero, dst, 1, 1, dd.get(), &dev, &host));
    return Workspace(dev, host, &d_work);
  });
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(local.status()));
  JAXMG_BLASMP(cublasMpGeadd(ctx_.blas, adjoint, n, n, &one, src, 1, 1, ds.get(), &zero, dst, 1, 1,
                             dd.get(), d_work, workspace_bytes_, ctx_.host_work.data(),
                             ctx_.host_work.size()));
  return Status();
}

namespace {
struct GesvdOptions {
  cusolverMpGesvdDescriptor_t d = nullptr;
  ~GesvdOptions() {
    if (d) cusolverMpGesvdDescriptorDestroy(d);
  }
};
}  // namespace

template <typename T>
Status Engine::Gesvd(bool vectors_u, bool vectors_vt, void* x, int64_t x_rows, int64_t x_cols,
                     int* info) {
  StepTimer timer("Gesvd", stream_);
  using R = RealOf<T>;
  const layout::Plan& plan = state_.plan;
  if (plan.strategy != layout::Strategy::kRedistribute) {
    return JAXMG_ERROR("the SVD runs on a redistributed matrix");
  }
  const size_t es = sizeof(T);
  const int64_t m = plan.engine_rows(), n = plan.cols.extent, t = plan.tile;
  const int64_t lr = local_rows_, lc = local_cols_;
  JAXMG_CUDA(cudaMemsetAsync(x, 0, es * x_rows * x_cols, stream_));
  // A non-finite input is agreed on first (the agreement's scan of the matrix, no diagonal
  // check): the solver is not run on it.
  JAXMG_RETURN_IF_ERROR(Agree<T>(false, info, /*diag_limit=*/0));
  if (*info != 0) return Status();
  void *s = nullptr, *u = nullptr;
  JAXMG_RETURN_IF_ERROR(Scratch(sizeof(R) * std::max<int64_t>(n, 1), &s));
  Descriptor desc_u;
  if (vectors_u) {  // U (m x n) distributed like the matrix
    JAXMG_RETURN_IF_ERROR(Scratch(es * std::max<int64_t>(lr * lc, 1), &u));
    JAXMG_RETURN_IF_ERROR(
        desc_u.Create(ctx_, DataTypeOf<T>(), m, n, t, t, std::max<int64_t>(lr, 1)));
  }
  if (vectors_vt) JAXMG_RETURN_IF_ERROR(SquareMatrix<T>());
  GesvdOptions options;
  JAXMG_SOLVER(cusolverMpGesvdDescriptorCreate(&options.d));
  const cusolverEigMode_t ju = vectors_u ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
  const cusolverEigMode_t jvt = vectors_vt ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
  cusolverMpMatrixDescriptor_t du = vectors_u ? desc_u.get() : nullptr;
  cusolverMpMatrixDescriptor_t dvt = vectors_vt ? desc_square_.get() : nullptr;
  void* vt = vectors_vt ? square_ : nullptr;
  size_t dev = 0, host = 0;
  JAXMG_SOLVER(cusolverMpGesvd_bufferSize(ctx_.handle, options.d, ju, jvt, m, n, work_, 1, 1,
                                          desc_a_.get(), s, u, 1, 1, du, vt, 1, 1, dvt,
                                          DataTypeOf<T>(), &dev, &host));
  void* d_work = nullptr;
  JAXMG_RETURN_IF_ERROR(Workspace(dev, host, &d_work));
  JAXMG_SOLVER(cusolverMpGesvd(ctx_.handle, options.d, ju, jvt, m, n, work_, 1, 1, desc_a_.get(), s,
                               u, 1, 1, du, vt, 1, 1, dvt, DataTypeOf<T>(), d_work,
                               workspace_bytes_, ctx_.host_work.data(), ctx_.host_work.size(),
                               small_));
  JAXMG_RETURN_IF_ERROR(AgreeValues<T>(s, n, /*failed=*/false, info));
  // The singular values of x's rows into its last column (real parts).
  JAXMG_CUDA(cudaMemcpy2DAsync(static_cast<char*>(x) + es * (x_cols - 1), es * x_cols,
                               static_cast<const char*>(s) + sizeof(R) * FirstRow(x_rows),
                               sizeof(R), sizeof(R), x_rows, cudaMemcpyDeviceToDevice, stream_));
  if (vectors_u) work_ = u;  // the engine matrix := U
  return Status();
}

Status Engine::PolarSum(double* out) {
  JAXMG_NCCL(ncclAllReduce(polar_sum_, polar_sum_, 1, ncclDouble, ncclSum, ctx_.comm, stream_));
  double sum = 0;
  JAXMG_CUDA(cudaMemcpyAsync(&sum, polar_sum_, sizeof(double), cudaMemcpyDeviceToHost, stream_));
  JAXMG_CUDA(cudaStreamSynchronize(stream_));
  *out = sum;
  return AgreeOnValue(out);
}

Status Engine::AgreeOnValue(double* value) {
  // The largest reading, as its bits (which order non-negative doubles, and NaN after them).
  int64_t bits = 0;
  std::memcpy(&bits, value, sizeof(bits));
  JAXMG_RETURN_IF_ERROR(BoundedAllreduceMax(ctx_, &bits, 1));
  std::memcpy(value, &bits, sizeof(bits));
  return Status();
}

template <typename T>
Status Engine::Product(char op_a, char op_b, int64_t m, int64_t n, int64_t k, double alpha,
                       const Tiled& a, const Tiled& b, double beta, const Tiled& c) {
  const auto op = [](char o) { return o == 'N' ? CUBLAS_OP_N : AdjointOp<T>(); };
  const int64_t t = state_.plan.tile;
  BlasDescriptor da, db, dc;
  const cublasComputeType_t compute = ComputeOf<T>();
  const T ta(alpha), tb(beta);
  void* cp = const_cast<void*>(c.p);
  size_t dev = 0, host = 0;
  void* d_work = nullptr;
  // Descriptors and workspace, agreed before the collective product.
  Deferred local;
  local.Run([&]() -> Status {
    JAXMG_RETURN_IF_ERROR(
        da.Create(ctx_, DataTypeOf<T>(), a.rows, a.cols, t, t, std::max<int64_t>(a.ld, 1)));
    JAXMG_RETURN_IF_ERROR(
        db.Create(ctx_, DataTypeOf<T>(), b.rows, b.cols, t, t, std::max<int64_t>(b.ld, 1)));
    JAXMG_RETURN_IF_ERROR(
        dc.Create(ctx_, DataTypeOf<T>(), c.rows, c.cols, t, t, std::max<int64_t>(c.ld, 1)));
    JAXMG_BLASMP(cublasMpSetStream(ctx_.blas, stream_));
    JAXMG_BLASMP(cublasMpGemm_bufferSize(ctx_.blas, op(op_a), op(op_b), m, n, k, &ta, a.p, a.row, 1,
                                         da.get(), b.p, b.row, 1, db.get(), &tb, cp, c.row, 1,
                                         dc.get(), compute, &dev, &host));
    return Workspace(dev, host, &d_work);
  });
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(local.status()));
  JAXMG_BLASMP(cublasMpGemm(ctx_.blas, op(op_a), op(op_b), m, n, k, &ta, a.p, a.row, 1, da.get(),
                            b.p, b.row, 1, db.get(), &tb, cp, c.row, 1, dc.get(), compute, d_work,
                            workspace_bytes_, ctx_.host_work.data(), ctx_.host_work.size()));
  return Status();
}

template <typename T>
Status Engine::PolarBegin(bool keep_a, double* lower, int* info) {
  StepTimer timer("PolarBegin", stream_);
  const layout::Plan& plan = state_.plan;
  const int64_t m = plan.engine_rows(), n = plan.cols.extent, t = plan.tile;
  const int64_t count = local_rows_ * local_cols_;
  const size_t bytes = sizeof(T) * std::max<int64_t>(count, 1);
  *lower = 0;
  // Every buffer of the iteration first, agreed: no rank leaves alone before a collective.
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(PolarBuffers<T>(keep_a)));
  JAXMG_RETURN_IF_ERROR(Agree<T>(false, info, /*diag_limit=*/0));  // a non-finite input
  if (*info != 0) return Status();
  polar_iteration_ = 0;
  // Local errors from here on are kept (every rank enters each collective) and agreed at the
  // norms and at the end.
  Deferred failed;
  failed.Step("polar", ctx_.rank, 0);
  double* sums = polar_norms_;
  failed.Run([&]() -> Status {
    if (keep_a) {
      JAXMG_CUDA(cudaMemcpyAsync(polar_a_, work_, bytes, cudaMemcpyDeviceToDevice, stream_));
    }
    // α = (‖A‖₁ ‖A‖∞)^½ from the column sums (n) and row sums (m) of |A|, summed over the ranks.
    JAXMG_CUDA(cudaMemsetAsync(sums, 0, sizeof(double) * (n + m), stream_));
    JAXMG_CUDA(cuda::AbsSums(KernelType<T>(), work_, local_rows_, local_cols_, t, ctx_.nprow,
                             ctx_.npcol, ctx_.myrow, ctx_.mycol, sums, sums + n, stream_));
    return Status();
  });
  JAXMG_NCCL(ncclAllReduce(sums, sums, n + m, ncclDouble, ncclSum, ctx_.comm, stream_));
  std::vector<double> host(static_cast<size_t>(n + m));
  JAXMG_CUDA(cudaMemcpyAsync(host.data(), sums, sizeof(double) * (n + m), cudaMemcpyDeviceToHost,
                             stream_));
  JAXMG_CUDA(cudaStreamSynchronize(stream_));
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("polar", failed));
  double norms = *std::max_element(host.begin(), host.begin() + n) *
                 *std::max_element(host.begin() + n, host.end());
  JAXMG_RETURN_IF_ERROR(AgreeOnValue(&norms));
  if (norms == 0) return Status();  // U = 0 stays 0
  failed.Keep(CudaCheck(cuda::Scale(KernelType<T>(), work_, count, 1 / std::sqrt(norms), stream_),
                        "Scale"));
  // The bound 1 / ‖L⁻¹‖_F, UᴴU = L Lᴴ: L in Z, L⁻¹ in W.
  JAXMG_RETURN_IF_ERROR(PolarGram<T>(1, 0));
  JAXMG_RETURN_IF_ERROR(PolarFactor<T>());
  int32_t factored = 0;
  JAXMG_CUDA(
      cudaMemcpyAsync(&factored, small_ + 2, sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
  JAXMG_CUDA(cudaStreamSynchronize(stream_));
  int64_t gave_up = factored != 0 ? 1 : 0;
  JAXMG_RETURN_IF_ERROR(BoundedAllreduceMax(ctx_, &gave_up, 1));
  if (gave_up != 0) return Status();
  failed.Run([&]() -> Status {
    JAXMG_CUDA(cudaMemsetAsync(polar_w_, 0, sizeof(T) * z_rows_ * local_cols_, stream_));
    JAXMG_CUDA(cuda::SetDiagonal(KernelType<T>(), polar_w_, z_rows_, local_cols_, t, ctx_.nprow,
                                 ctx_.npcol, ctx_.myrow, ctx_.mycol, stream_));
    return Status();
  });
  JAXMG_RETURN_IF_ERROR(
      TriangularInverse<T>(polar_z_, z_rows_, polar_w_, z_rows_, n, false, false, &failed));
  failed.Run([&]() -> Status {
    JAXMG_CUDA(cudaMemsetAsync(polar_sum_, 0, sizeof(double), stream_));
    JAXMG_CUDA(
        cuda::SumSquares(KernelType<T>(), polar_w_, z_rows_ * local_cols_, polar_sum_, stream_));
    return Status();
  });
  double squares = 0;
  JAXMG_RETURN_IF_ERROR(PolarSum(&squares));
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("polar", failed));
  if (std::isfinite(squares) && squares > 0) *lower = 1 / std::sqrt(squares);
  return Status();
}

Status Engine::AgreeOnBuffers(const Status& local) { return AgreeOnFailure("buffers", local); }

Status Engine::AgreeOnFailure(const char* algorithm, const Status& local) {
  // Round one: the lowest failing rank (as nranks − rank; 0: none). Only when one failed, round
  // two: its message, so that every rank returns the same error.
  if (ctx_.nranks == 1) return local;
  int64_t slots[1 + kMessageSlots] = {};
  slots[0] = local.ok() ? 0 : ctx_.nranks - ctx_.rank;
  JAXMG_RETURN_IF_ERROR(BoundedAllreduceMax(ctx_, slots, 1));
  if (slots[0] == 0) return Status();
  const int failing = ctx_.nranks - static_cast<int>(slots[0]);
  int64_t* message = slots + 1;
  if (failing == ctx_.rank) {
    PackMessage(local.message(), message);
  } else {
    std::fill(message, message + kMessageSlots, int64_t{0});
  }
  JAXMG_RETURN_IF_ERROR(BoundedAllreduceMax(ctx_, message, kMessageSlots));
  // (the failing rank's message as every rank received it: the same text everywhere)
  return AgreedError(algorithm, UnpackMessage(message), failing, ctx_.nranks);
}

Status Engine::AgreedWorkspace(size_t bytes, size_t host_bytes, void** out) {
  return AgreeOnBuffers(Workspace(bytes, host_bytes, out));
}

template <typename T>
Status Engine::PolarBuffers(bool keep_a) {
  // A kept, W (a copy of U), Z (n x n), two sums, the stacked matrix Y of the QR steps with its
  // Householder scalars, and the workspace of Y's QR (the largest of the steps').
  const layout::Plan& plan = state_.plan;
  const int64_t m = plan.engine_rows(), n = plan.cols.extent, t = plan.tile;
  const int64_t lc = local_cols_;
  const size_t bytes = sizeof(T) * std::max<int64_t>(local_rows_ * lc, 1);
  if (keep_a) JAXMG_RETURN_IF_ERROR(Scratch(bytes, &polar_a_));
  JAXMG_RETURN_IF_ERROR(Scratch(bytes, &polar_w_));
  z_rows_ = CyclicLocalExtent(n, t, ctx_.myrow, ctx_.nprow);
  JAXMG_RETURN_IF_ERROR(Scratch(sizeof(T) * std::max<int64_t>(z_rows_ * lc, 1), &polar_z_));
  void* sums = nullptr;
  JAXMG_RETURN_IF_ERROR(Scratch(sizeof(double) * (n + m + 1), &sums));
  polar_norms_ = static_cast<double*>(sums);
  polar_sum_ = polar_norms_ + n + m;
  const int64_t round = t * ctx_.nprow, mp = (m + round - 1) / round * round;
  const int64_t ly = mp / ctx_.nprow + z_rows_;
  JAXMG_RETURN_IF_ERROR(Scratch(sizeof(T) * std::max<int64_t>(ly * lc, 1), &polar_y_));
  JAXMG_RETURN_IF_ERROR(Scratch(sizeof(T) * (lc + t), &polar_tau_));
  Descriptor desc_y;
  JAXMG_RETURN_IF_ERROR(
      desc_y.Create(ctx_, DataTypeOf<T>(), mp + n, n, t, t, std::max<int64_t>(ly, 1)));
  size_t dev = 0, host = 0, dev2 = 0, host2 = 0;
  JAXMG_SOLVER(cusolverMpGeqrf_bufferSize(ctx_.handle, mp + n, n, polar_y_, 1, 1, desc_y.get(),
                                          DataTypeOf<T>(), &dev, &host));
  JAXMG_SOLVER(cusolverMpOrgqr_bufferSize(ctx_.handle, mp + n, n, n, polar_y_, 1, 1, desc_y.get(),
                                          polar_tau_, DataTypeOf<T>(), &dev2, &host2));
  void* d_work = nullptr;
  return Workspace(std::max(dev, dev2), std::max(host, host2), &d_work);
}

template <typename T>
Status Engine::PolarGram(double c, double beta) {
  StepTimer timer("PolarGram", stream_);
  const layout::Plan& plan = state_.plan;
  const int64_t m = plan.engine_rows(), n = plan.cols.extent, t = plan.tile;
  PolarLayouts d;
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(d.Create<T>(ctx_, m, n, t, local_rows_, z_rows_)));
  const BlasDescriptor &du = d.u, &dz = d.z;
  JAXMG_BLASMP(cublasMpSetStream(ctx_.blas, stream_));
  const cublasComputeType_t compute = ComputeOf<T>();
  size_t dev = 0, host = 0;
  void* d_work = nullptr;
  if (Scalar<T>::kParts == 2) {  // Herk: real alpha and beta
    const RealOf<T> alpha(c), b(beta);
    JAXMG_BLASMP(cublasMpHerk_bufferSize(ctx_.blas, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_C, n, m,
                                         &alpha, work_, 1, 1, du.get(), &b, polar_z_, 1, 1,
                                         dz.get(), compute, &dev, &host));
    JAXMG_RETURN_IF_ERROR(AgreedWorkspace(dev, host, &d_work));
    JAXMG_BLASMP(cublasMpHerk(ctx_.blas, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_C, n, m, &alpha, work_,
                              1, 1, du.get(), &b, polar_z_, 1, 1, dz.get(), compute, d_work,
                              workspace_bytes_, ctx_.host_work.data(), ctx_.host_work.size()));
  } else {
    const T alpha(c), b(beta);
    JAXMG_BLASMP(cublasMpSyrk_bufferSize(ctx_.blas, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_T, n, m,
                                         &alpha, work_, 1, 1, du.get(), &b, polar_z_, 1, 1,
                                         dz.get(), compute, &dev, &host));
    JAXMG_RETURN_IF_ERROR(AgreedWorkspace(dev, host, &d_work));
    JAXMG_BLASMP(cublasMpSyrk(ctx_.blas, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_T, n, m, &alpha, work_,
                              1, 1, du.get(), &b, polar_z_, 1, 1, dz.get(), compute, d_work,
                              workspace_bytes_, ctx_.host_work.data(), ctx_.host_work.size()));
  }
  return Status();
}

template <typename T>
Status Engine::PolarFactor() {
  StepTimer timer("PolarFactor", stream_);
  const layout::Plan& plan = state_.plan;
  const int64_t n = plan.cols.extent, t = plan.tile;
  Descriptor desc_z;
  size_t dev = 0, host = 0;
  void* d_work = nullptr;
  Deferred local;  // agreed before the collective factorization
  local.Run([&]() -> Status {
    JAXMG_RETURN_IF_ERROR(
        desc_z.Create(ctx_, DataTypeOf<T>(), n, n, t, t, std::max<int64_t>(z_rows_, 1)));
    JAXMG_SOLVER(cusolverMpPotrf_bufferSize(ctx_.handle, CUBLAS_FILL_MODE_LOWER, n, polar_z_, 1, 1,
                                            desc_z.get(), DataTypeOf<T>(), &dev, &host));
    JAXMG_RETURN_IF_ERROR(Workspace(dev, host, &d_work));
    JAXMG_CUDA(cudaMemsetAsync(small_ + 2, 0, sizeof(int32_t), stream_));
    return Status();
  });
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(local.status()));
  const cusolverStatus_t st = cusolverMpPotrf(
      ctx_.handle, CUBLAS_FILL_MODE_LOWER, n, polar_z_, 1, 1, desc_z.get(), DataTypeOf<T>(), d_work,
      workspace_bytes_, ctx_.host_work.data(), ctx_.host_work.size(), small_ + 2);
  if (st == CUSOLVER_STATUS_INTERNAL_ERROR || st == CUSOLVER_STATUS_EXECUTION_FAILED) {
    // (cuSOLVERMp gives up on some matrices that are not positive definite): a failure info.
    const int32_t one = 1;
    JAXMG_CUDA(cudaMemcpyAsync(small_ + 2, &one, sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
    return Status();
  }
  return SolverCheck(st, "cusolverMpPotrf");
}

template <typename T>
Status Engine::PolarQr(double sqrt_c, double coef, double e) {
  // Y = [sqrt_c U; 0; I] ((mp + n) x n, mp = m rounded up to whole rounds of tiles over the
  // process rows): each rank holds its rows of U, zeros to mp / nprow, then its rows of I. Zero
  // rows change neither R nor Q's other rows; Q₂ starts at Y's row mp + 1, on a tile boundary.
  StepTimer timer("PolarQr", stream_);
  const layout::Plan& plan = state_.plan;
  const int64_t m = plan.engine_rows(), n = plan.cols.extent, t = plan.tile;
  const int64_t round = t * ctx_.nprow, mp = (m + round - 1) / round * round;
  const int64_t top = mp / ctx_.nprow;
  const int64_t ly = top + CyclicLocalExtent(n, t, ctx_.myrow, ctx_.nprow), lc = local_cols_;
  // A local error is kept (every rank enters each collective) and agreed at the end.
  Deferred failed;
  failed.Step("polar", ctx_.rank, ++polar_iteration_);
  failed.Keep(
      CudaCheck(cuda::QdwhStack(KernelType<T>(), work_, local_rows_, lc, sqrt_c, polar_y_, ly, top,
                                t, ctx_.nprow, ctx_.npcol, ctx_.myrow, ctx_.mycol, stream_),
                "QdwhStack"));
  Descriptor desc_y;
  size_t dev = 0, host = 0;
  void* d_work = nullptr;
  Deferred local;  // (PolarBuffers sized the workspace: it does not grow here)
  local.Run([&]() -> Status {
    JAXMG_RETURN_IF_ERROR(
        desc_y.Create(ctx_, DataTypeOf<T>(), mp + n, n, t, t, std::max<int64_t>(ly, 1)));
    JAXMG_SOLVER(cusolverMpGeqrf_bufferSize(ctx_.handle, mp + n, n, polar_y_, 1, 1, desc_y.get(),
                                            DataTypeOf<T>(), &dev, &host));
    return Workspace(dev, host, &d_work);
  });
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(local.status()));
  JAXMG_SOLVER(cusolverMpGeqrf(ctx_.handle, mp + n, n, polar_y_, 1, 1, desc_y.get(), polar_tau_,
                               DataTypeOf<T>(), d_work, workspace_bytes_, ctx_.host_work.data(),
                               ctx_.host_work.size(), small_ + 2));
  JAXMG_SOLVER(cusolverMpOrgqr_bufferSize(ctx_.handle, mp + n, n, n, polar_y_, 1, 1, desc_y.get(),
                                          polar_tau_, DataTypeOf<T>(), &dev, &host));
  JAXMG_RETURN_IF_ERROR(Workspace(dev, host, &d_work));
  JAXMG_SOLVER(cusolverMpOrgqr(ctx_.handle, mp + n, n, n, polar_y_, 1, 1, desc_y.get(), polar_tau_,
                               DataTypeOf<T>(), d_work, workspace_bytes_, ctx_.host_work.data(),
                               ctx_.host_work.size(), small_ + 2));
  // U := e U + coef Q₁ Q₂ᴴ.
  const Tiled y{polar_y_, mp + n, n, ly}, q2{polar_y_, mp + n, n, ly, mp + 1};
  JAXMG_RETURN_IF_ERROR(Product<T>('N', 'C', m, n, n, coef, y, q2, e, {work_, m, n, local_rows_}));
  return AgreeOnFailure("polar", failed);
}

template <typename T>
Status Engine::PolarCholesky(double c, double coef, double e, double* change) {
  StepTimer timer("PolarCholesky", stream_);
  const layout::Plan& plan = state_.plan;
  const int64_t m = plan.engine_rows(), n = plan.cols.extent, t = plan.tile;
  const int64_t count = local_rows_ * local_cols_;
  // Z := I + c UᴴU (lower triangle), then Z = L Lᴴ (a NaN in Z leaves NaN in U, which PolarEnd
  // reports).
  // A local error is kept (every rank enters each collective) and agreed at the end.
  Deferred failed;
  failed.Step("polar", ctx_.rank, ++polar_iteration_);
  failed.Run([&]() -> Status {
    JAXMG_CUDA(cudaMemsetAsync(polar_z_, 0, sizeof(T) * z_rows_ * local_cols_, stream_));
    JAXMG_CUDA(cuda::SetDiagonal(KernelType<T>(), polar_z_, z_rows_, local_cols_, t, ctx_.nprow,
                                 ctx_.npcol, ctx_.myrow, ctx_.mycol, stream_));
    return Status();
  });
  JAXMG_RETURN_IF_ERROR(PolarGram<T>(c, 1));
  JAXMG_RETURN_IF_ERROR(PolarFactor<T>());
  PolarLayouts d;
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(d.Create<T>(ctx_, m, n, t, local_rows_, z_rows_)));
  const BlasDescriptor &du = d.u, &dz = d.z;
  JAXMG_BLASMP(cublasMpSetStream(ctx_.blas, stream_));
  const cublasComputeType_t compute = ComputeOf<T>();
  size_t dev = 0, host = 0;
  void* d_work = nullptr;
  // W := U Z⁻¹ = U L⁻ᴴ L⁻¹.
  const size_t bytes = sizeof(T) * std::max<int64_t>(count, 1);
  failed.Keep(CudaCheck(cudaMemcpyAsync(polar_w_, work_, bytes, cudaMemcpyDeviceToDevice, stream_),
                        "cudaMemcpyAsync"));
  const cublasOperation_t adjoint = AdjointOp<T>();
  const T one(1);
  StepTimer solves("PolarCholesky: two Trsm", stream_);
  for (const cublasOperation_t op : {adjoint, CUBLAS_OP_N}) {
    JAXMG_BLASMP(cublasMpTrsm_bufferSize(ctx_.blas, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER, op,
                                         CUBLAS_DIAG_NON_UNIT, m, n, &one, polar_z_, 1, 1, dz.get(),
                                         polar_w_, 1, 1, du.get(), compute, &dev, &host));
    JAXMG_RETURN_IF_ERROR(AgreedWorkspace(dev, host, &d_work));
    JAXMG_BLASMP(cublasMpTrsm(ctx_.blas, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER, op,
                              CUBLAS_DIAG_NON_UNIT, m, n, &one, polar_z_, 1, 1, dz.get(), polar_w_,
                              1, 1, du.get(), compute, d_work, workspace_bytes_,
                              ctx_.host_work.data(), ctx_.host_work.size()));
  }
  failed.Run([&]() -> Status {
    JAXMG_CUDA(cudaMemsetAsync(polar_sum_, 0, sizeof(double), stream_));
    JAXMG_CUDA(
        cuda::AxpbyChange(KernelType<T>(), work_, polar_w_, count, e, coef, polar_sum_, stream_));
    return Status();
  });
  double squares = 0;
  JAXMG_RETURN_IF_ERROR(PolarSum(&squares));
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("polar", failed));
  *change = std::sqrt(squares);
  return Status();
}

template <typename T>
Status Engine::PolarEnd(bool h, int* info) {
  StepTimer timer("PolarEnd", stream_);
  const layout::Plan& plan = state_.plan;
  const int64_t m = plan.engine_rows(), n = plan.cols.extent, t = plan.tile;
  const int64_t count = local_rows_ * local_cols_;
  const Tiled u{work_, m, n, local_rows_};
  const Tiled z{polar_z_, n, n, z_rows_};
  // Newton–Schulz: U := 1.5 U − 0.5 W G, G = UᴴU (lower triangle), W a copy of U.
  Deferred failed;
  failed.Step("polar", ctx_.rank, ++polar_iteration_);
  JAXMG_RETURN_IF_ERROR(PolarGram<T>(1, 0));
  failed.Keep(CudaCheck(cudaMemcpyAsync(polar_w_, work_, sizeof(T) * std::max<int64_t>(count, 1),
                                        cudaMemcpyDeviceToDevice, stream_),
                        "cudaMemcpyAsync"));
  {
    StepTimer symm("PolarEnd: Symm", stream_);
    PolarLayouts d;
    JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(d.Create<T>(ctx_, m, n, t, local_rows_, z_rows_)));
    const BlasDescriptor &du = d.u, &dz = d.z;
    JAXMG_BLASMP(cublasMpSetStream(ctx_.blas, stream_));
    const cublasComputeType_t compute = ComputeOf<T>();
    const T alpha(-0.5), beta(1.5);
    size_t dev = 0, host = 0;
    JAXMG_BLASMP(cublasMpSymm_bufferSize(ctx_.blas, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER, m, n,
                                         &alpha, polar_z_, 1, 1, dz.get(), polar_w_, 1, 1, du.get(),
                                         &beta, work_, 1, 1, du.get(), compute, &dev, &host));
    void* d_work = nullptr;
    JAXMG_RETURN_IF_ERROR(AgreedWorkspace(dev, host, &d_work));
    JAXMG_BLASMP(cublasMpSymm(ctx_.blas, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER, m, n, &alpha,
                              polar_z_, 1, 1, dz.get(), polar_w_, 1, 1, du.get(), &beta, work_, 1,
                              1, du.get(), compute, d_work, workspace_bytes_, ctx_.host_work.data(),
                              ctx_.host_work.size()));
  }
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("polar", failed));
  JAXMG_RETURN_IF_ERROR(Agree<T>(false, info, /*diag_limit=*/0));  // a non-finite entry of U
  if (*info != 0 || !h) return Status();
  // H := ½ (G + Gᴴ), G = Uᴴ A.
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(SquareMatrix<T>()));
  JAXMG_RETURN_IF_ERROR(Product<T>('C', 'N', n, n, m, 1, u, {polar_a_, m, n, local_rows_}, 0, z));
  BlasDescriptor dz, dh;
  failed.Run([&]() -> Status {
    JAXMG_CUDA(cudaMemcpyAsync(square_, polar_z_, sizeof(T) * z_rows_ * local_cols_,
                               cudaMemcpyDeviceToDevice, stream_));
    JAXMG_RETURN_IF_ERROR(
        dz.Create(ctx_, DataTypeOf<T>(), n, n, t, t, std::max<int64_t>(z_rows_, 1)));
    return dh.Create(ctx_, DataTypeOf<T>(), n, n, t, t, std::max<int64_t>(square_rows_, 1));
  });
  JAXMG_RETURN_IF_ERROR(AgreeOnFailure("polar", failed));
  const cublasOperation_t adjoint = AdjointOp<T>();
  const T half(0.5);
  size_t dev = 0, host = 0;
  JAXMG_BLASMP(cublasMpGeadd_bufferSize(ctx_.blas, adjoint, n, n, &half, polar_z_, 1, 1, dz.get(),
                                        &half, square_, 1, 1, dh.get(), &dev, &host));
  void* d_work = nullptr;
  JAXMG_RETURN_IF_ERROR(AgreedWorkspace(dev, host, &d_work));
  JAXMG_BLASMP(cublasMpGeadd(ctx_.blas, adjoint, n, n, &half, polar_z_, 1, 1, dz.get(), &half,
                             square_, 1, 1, dh.get(), d_work, workspace_bytes_,
                             ctx_.host_work.data(), ctx_.host_work.size()));
  return Status();
}

template <typename T>
Status Engine::PolarValues(void* x, int64_t x_rows, int64_t x_cols, int* info) {
  StepTimer timer("PolarValues", stream_);
  using R = RealOf<T>;
  const layout::Plan& plan = state_.plan;
  const int64_t n = plan.cols.extent, t = plan.tile;
  const size_t es = sizeof(T);
  JAXMG_CUDA(cudaMemsetAsync(x, 0, es * x_rows * x_cols, stream_));
  if (UseBandEigenvalues(t)) {
    // H's eigenvalues in two stages (band_eigenvalues.cc), on H in place.
    void* w = nullptr;
    JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(Scratch(sizeof(R) * std::max<int64_t>(n, 1), &w)));
    JAXMG_RETURN_IF_ERROR(BandEigenvalues<T>(BandSource{square_, n, t, square_rows_}, w));
    JAXMG_RETURN_IF_ERROR(AgreeValues<T>(w, n, /*failed=*/false, info));
    return SingularValuesOut<T>(w, n, x, x_rows, x_cols);
  }
  // cuSOLVERMp's Syevd is fastest at tile 256 (syevd_tiles_16384_*: 3.25 s against 3.87 s at
  // 1024), QDWH at 1024 or more: H goes into tiles of 256 (Remap) for the eigensolver, with a
  // Z (not computed) of the same layout. Buffers and workspaces first, agreed.
  const int64_t te = std::min<int64_t>(t, 256);
  const bool retile = te != t;
  const int64_t lh = retile ? CyclicLocalExtent(n, te, ctx_.myrow, ctx_.nprow) : square_rows_;
  void *h = square_, *z = polar_z_, *w = nullptr, *d_work = nullptr;
  RemapBuffers move;
  Descriptor dh, dz;
  char jobz[2] = {'N', 0};
  size_t dev = 0, host = 0;
  const Status buffers = [&]() -> Status {
    JAXMG_RETURN_IF_ERROR(Scratch(sizeof(R) * std::max<int64_t>(n, 1), &w));
    if (retile) {
      const size_t bytes =
          es * std::max<int64_t>(lh * CyclicLocalExtent(n, te, ctx_.mycol, ctx_.npcol), 1);
      JAXMG_RETURN_IF_ERROR(Scratch(bytes, &h));
      JAXMG_RETURN_IF_ERROR(Scratch(bytes, &z));
      JAXMG_RETURN_IF_ERROR(RemapPrepare<T>(Blocked{t, t, std::max<int64_t>(square_rows_, 1)},
                                            Blocked{te, te, std::max<int64_t>(lh, 1)}, n, n,
                                            &move));
    }
    JAXMG_RETURN_IF_ERROR(dh.Create(ctx_, DataTypeOf<T>(), n, n, te, te, std::max<int64_t>(lh, 1)));
    JAXMG_RETURN_IF_ERROR(dz.Create(ctx_, DataTypeOf<T>(), n, n, te, te, std::max<int64_t>(lh, 1)));
    JAXMG_SOLVER(cusolverMpSyevd_bufferSize(ctx_.handle, jobz, CUBLAS_FILL_MODE_LOWER, n, h, 1, 1,
                                            dh.get(), w, z, 1, 1, dz.get(), DataTypeOf<T>(), &dev,
                                            &host));
    return Workspace(dev, host, &d_work);
  }();
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(buffers));
  if (retile) JAXMG_RETURN_IF_ERROR(RemapRun<T>(square_, h, move));
  JAXMG_SOLVER(cusolverMpSyevd(ctx_.handle, jobz, CUBLAS_FILL_MODE_LOWER, n, h, 1, 1, dh.get(), w,
                               z, 1, 1, dz.get(), DataTypeOf<T>(), d_work, workspace_bytes_,
                               ctx_.host_work.data(), ctx_.host_work.size(), small_));
  JAXMG_RETURN_IF_ERROR(AgreeValues<T>(w, n, /*failed=*/false, info));
  return SingularValuesOut<T>(w, n, x, x_rows, x_cols);
}

template <typename T>
Status Engine::SingularValuesOut(const void* w, int64_t n, void* x, int64_t x_rows,
                                 int64_t x_cols) {
  using R = RealOf<T>;
  const size_t es = sizeof(T);
  // Descending, at least 0 (H is positive semi-definite), into x's last column for x's rows.
  std::vector<R> values(static_cast<size_t>(n));
  JAXMG_CUDA(cudaMemcpyAsync(values.data(), w, sizeof(R) * n, cudaMemcpyDeviceToHost, stream_));
  JAXMG_CUDA(cudaStreamSynchronize(stream_));
  const int64_t first = FirstRow(x_rows);
  std::vector<T> column(static_cast<size_t>(std::max<int64_t>(x_rows, 1)));
  for (int64_t i = 0; i < x_rows; ++i) column[i] = T(std::max<R>(values[n - 1 - (first + i)], 0));
  // From pageable memory: the copy has read `column` when cudaMemcpy2DAsync returns.
  JAXMG_CUDA(cudaMemcpy2DAsync(static_cast<char*>(x) + es * (x_cols - 1), es * x_cols,
                               column.data(), es, es, x_rows, cudaMemcpyHostToDevice, stream_));
  return Status();
}

template <typename T>
Status Engine::MatrixIn(const void* shard) {
  StepTimer timer("MatrixIn", stream_);
  const layout::Plan& plan = state_.plan;
  if (plan.strategy != layout::Strategy::kRedistribute) {
    return JAXMG_ERROR("a second matrix is read into a redistributed plan only");
  }
  const int64_t lr = local_rows_, lc = local_cols_;
  const Status copy = Scratch(sizeof(T) * std::max<int64_t>(lr * lc, 1), &local_b_);
  JAXMG_RETURN_IF_ERROR(Redistribute<T>(shard, /*to_tiles=*/true, local_b_, copy));
  nrhs_ = plan.cols.extent;
  rhs_local_cols_ = lc;
  return desc_b_.Create(ctx_, DataTypeOf<T>(), plan.rows.extent, plan.cols.extent, plan.tile,
                        plan.tile, std::max<int64_t>(lr, 1));
}

template <typename T>
Status Engine::Gemm(char op_b, char op_a) {
  StepTimer timer("Gemm", stream_);
  const layout::Plan& plan = state_.plan;
  const int64_t n = plan.engine_rows(), t = plan.tile, ld = std::max<int64_t>(local_rows_, 1);
  const auto op = [](char o) {
    if (o == 'N') return CUBLAS_OP_N;
    return o == 'C' && Scalar<T>::kParts == 2 ? CUBLAS_OP_C : CUBLAS_OP_T;
  };
  void* c = nullptr;
  JAXMG_RETURN_IF_ERROR(Scratch(sizeof(T) * std::max<int64_t>(local_rows_ * local_cols_, 1), &c));
  BlasDescriptor da, db, dc;
  JAXMG_RETURN_IF_ERROR(da.Create(ctx_, DataTypeOf<T>(), n, n, t, t, ld));
  JAXMG_RETURN_IF_ERROR(db.Create(ctx_, DataTypeOf<T>(), n, n, t, t, ld));
  JAXMG_RETURN_IF_ERROR(dc.Create(ctx_, DataTypeOf<T>(), n, n, t, t, ld));
  JAXMG_BLASMP(cublasMpSetStream(ctx_.blas, stream_));
  const cublasComputeType_t compute = ComputeOf<T>();
  const T one(1), zero(0);
  size_t dev = 0, host = 0;
  JAXMG_BLASMP(cublasMpGemm_bufferSize(ctx_.blas, op(op_b), op(op_a), n, n, n, &one, local_b_, 1, 1,
                                       db.get(), work_, 1, 1, da.get(), &zero, c, 1, 1, dc.get(),
                                       compute, &dev, &host));
  void* d_work = nullptr;
  JAXMG_RETURN_IF_ERROR(Workspace(dev, host, &d_work));
  JAXMG_BLASMP(cublasMpGemm(ctx_.blas, op(op_b), op(op_a), n, n, n, &one, local_b_, 1, 1, db.get(),
                            work_, 1, 1, da.get(), &zero, c, 1, 1, dc.get(), compute, d_work, dev,
                            ctx_.host_work.data(), host));
  work_ = c;
  return Status();
}

template <typename T>
Status Engine::Sygvd(bool vectors, void* x, int* info) {
  StepTimer timer("Sygvd", stream_);
  using R = RealOf<T>;
  const layout::Plan& plan = state_.plan;
  const size_t es = sizeof(T);
  const int64_t n = plan.engine_rows(), t = plan.tile, lr = local_rows_, lc = local_cols_;
  JAXMG_CUDA(cudaMemsetAsync(x, 0, es * n, stream_));
  // A non-finite A is agreed on first (the agreement's scan, no diagonal check); a non-finite
  // B ends as a failed factorization or non-finite eigenvalues.
  JAXMG_RETURN_IF_ERROR(Agree<T>(false, info, /*diag_limit=*/0));
  if (*info != 0) return Status();
  void *w = nullptr, *z = nullptr;
  JAXMG_RETURN_IF_ERROR(Scratch(sizeof(R) * std::max<int64_t>(n, 1), &w));
  JAXMG_RETURN_IF_ERROR(Scratch(es * std::max<int64_t>(lr * lc, 1), &z));
  Descriptor desc_z;
  JAXMG_RETURN_IF_ERROR(desc_z.Create(ctx_, DataTypeOf<T>(), n, n, t, t, std::max<int64_t>(lr, 1)));
  const cusolverEigMode_t jobz = vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
  size_t dev = 0, host = 0;
  JAXMG_SOLVER(cusolverMpSygvd_bufferSize(
      ctx_.handle, CUSOLVER_EIG_TYPE_1, jobz, CUBLAS_FILL_MODE_LOWER, n, 1, 1, desc_a_.get(), 1, 1,
      desc_b_.get(), 1, 1, desc_z.get(), DataTypeOf<T>(), &dev, &host));
  void* d_work = nullptr;
  JAXMG_RETURN_IF_ERROR(Workspace(dev, host, &d_work));
  // cuSOLVERMp 0.9.1 answers a B that is not positive definite (or holds NaN) with
  // INTERNAL_ERROR rather than an info (found on 2 H200s): status n + 1, agreed below.
  const cusolverStatus_t st = cusolverMpSygvd(
      ctx_.handle, CUSOLVER_EIG_TYPE_1, jobz, CUBLAS_FILL_MODE_LOWER, n, work_, 1, 1, desc_a_.get(),
      local_b_, 1, 1, desc_b_.get(), w, z, 1, 1, desc_z.get(), DataTypeOf<T>(), d_work,
      workspace_bytes_, ctx_.host_work.data(), ctx_.host_work.size(), small_);
  const bool failed =
      st == CUSOLVER_STATUS_INTERNAL_ERROR || st == CUSOLVER_STATUS_EXECUTION_FAILED;
  if (!failed) JAXMG_RETURN_IF_ERROR(SolverCheck(st, "cusolverMpSygvd"));
  // (The solver's info n + i: B's minor of order i is not positive definite.)
  JAXMG_RETURN_IF_ERROR(AgreeValues<T>(w, n, failed, info));
  JAXMG_CUDA(
      cudaMemcpy2DAsync(x, es, w, sizeof(R), sizeof(R), n, cudaMemcpyDeviceToDevice, stream_));
  local_b_ = z;  // the eigenvectors, where VectorsOut reads them (desc_b_ is Z's layout too)
  return Status();
}

template <typename T>
Status Engine::SquareRowsOut(void* x, int64_t x_rows, int64_t x_cols) {
  StepTimer timer("SquareRowsOut", stream_);
  return RowsOut<T>(square_, square_rows_, local_cols_, state_.plan.cols.extent, x, x_rows, x_cols);
}

template <typename T>
Status Engine::FillNan(void* x, int64_t count) {
  JAXMG_CUDA(cuda::FillNan(KernelType<T>(), x, count, stream_));
  return Status();
}

Status Engine::WriteStatus(int info, int32_t* status) {
  // From pageable memory: the copy has read `value` when cudaMemcpyAsync returns.
  const int32_t value = info;
  JAXMG_CUDA(cudaMemcpyAsync(status, &value, sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
  return Status();
}

JAXMG_INSTANTIATE_ENGINE(Engine)

// Used by band_eigenvalues.cc.
#define JAXMG_INSTANTIATE_REFLECTORS(T)                                                           \
  template Status Engine::ReflectorFactorOf<T>(const Lane&, const void*, int64_t, int64_t,        \
                                               const void*, void*, void*);                        \
  template Status Engine::ApplyReflectors<T>(const Lane&, const void*, int64_t, int64_t,          \
                                             const void*, int64_t, bool, void*, int64_t, int64_t, \
                                             const QrWork&);                                      \
  template Status Engine::GridAdjoint<T>(const void*, void*);
JAXMG_FOR_EACH_SCALAR(JAXMG_INSTANTIATE_REFLECTORS)
#undef JAXMG_INSTANTIATE_REFLECTORS

}  // namespace jaxmg::cusolvermp
