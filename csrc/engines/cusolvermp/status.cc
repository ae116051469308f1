// Status and agreement: the symmetry check, the agreed solver status (Agree, AgreeValues), the
// agreement of local failures (AgreeOnFailure, AgreeOnBuffers), agreed values, logdet.
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
  Status buffers = Scratch(es * 2 * sc, &d_probes);
  if (buffers.ok()) buffers = Scratch(es * 2 * n, &d_y);
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(buffers));
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
Status Engine::Asymmetric(const T* shard, bool* out) {
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

// Asymmetric's products and sum, queued; the host compares at the next Agree (one all-reduce
// with the status), which sets asymmetric().
template <typename T>
Status Engine::CheckSymmetry(const T* shard) {
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
Status Engine::NonFinite(const Matrix<T>& a, int32_t* column) {
  JAXMG_CUDA(cudaMemsetAsync(column, 0x7f, sizeof(int32_t), stream_));  // kNoColumn
  JAXMG_CUDA(cuda::NonFiniteColumn(KernelType<T>(), a.data, a.local_rows, a.local_cols, a.tile,
                                   ctx_.npcol, ctx_.mycol, column, stream_));
  return Status();
}

template <typename T>
Status Engine::Agree(const Matrix<T>& a, bool failed, int* info, int64_t diag_limit, bool scan) {
  // The local status: the engine's info when positive; else (the engine gave up without an order:
  // cuSOLVERMp returns INTERNAL_ERROR or EXECUTION_FAILED for some matrices that are not positive
  // definite) n + 1; else the first diagonal entry of the factor that is zero or not finite (NaN
  // or Inf input, or a singular matrix the engine did not flag). Then the status and the
  // position check (1 when this shard's position is not the context's) are agreed (max) over
  // every rank before anyone branches.
  JAXMG_CUDA(cuda::DiagCheck(KernelType<T>(), a.data, a.local_rows, a.local_cols, a.tile,
                             ctx_.nprow, ctx_.npcol, ctx_.myrow, ctx_.mycol,
                             diag_limit < 0 ? a.rows : diag_limit, Slot(Slots::kDiagonal),
                             stream_));
  if (scan)
    JAXMG_RETURN_IF_ERROR(
        NonFinite<T>(a, Slot(Slots::kFactorNonFinite)));  // else kNoColumn, from Small()
  int32_t* host = ctx_.pinned;
  JAXMG_CUDA(cudaMemcpyAsync(host, small_, 4 * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
  JAXMG_CUDA(
      cudaMemcpyAsync(host + 4, position_, 2 * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
  JAXMG_CUDA(cudaMemcpyAsync(host + 6, Slot(Slots::kFactorNonFinite), 2 * sizeof(int32_t),
                             cudaMemcpyDeviceToHost, stream_));
  JAXMG_CUDA(cudaStreamSynchronize(stream_));
  host[6] = std::min(host[6], host[7]);  // the factor's scan, the input's (Getrf; else kNoColumn)
  int32_t local = host[0] > 0 ? host[0] : 0;
  if (local == 0 && failed) {
    local = static_cast<int32_t>(std::min<int64_t>(a.rows + 1, INT32_MAX));
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
  JAXMG_CUDA(cudaMemcpyAsync(Slot(Slots::kAgreed), agreed, 3 * sizeof(int32_t),
                             cudaMemcpyHostToDevice, stream_));
  JAXMG_NCCL(ncclAllReduce(Slot(Slots::kAgreed), Slot(Slots::kAgreed), 3, ncclInt32, ncclMax,
                           ctx_.comm, stream_));
  JAXMG_CUDA(cudaMemcpyAsync(agreed, Slot(Slots::kAgreed), 3 * sizeof(int32_t),
                             cudaMemcpyDeviceToHost, stream_));
  JAXMG_CUDA(cudaStreamSynchronize(stream_));
  if (agreed[1] != 0) {  // the same branch on every rank
    return Status::Error(
        "jaxmg GPU context was made for another placement of the mesh's devices than this call's "
        "(the mesh handed does not hold the arrays' devices in their order): pass mesh=... (the "
        "arrays' concrete mesh) to the jaxmg call");
  }
  if (symmetry) asymmetric_ = agreed[2] != 0;
  *info = agreed[0];
  return Status();
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

Status Engine::AgreeOnValue(double* value) {
  // The largest reading, as its bits (which order non-negative doubles, and NaN after them).
  int64_t bits = 0;
  std::memcpy(&bits, value, sizeof(bits));
  JAXMG_RETURN_IF_ERROR(BoundedAllreduceMax(ctx_, &bits, 1));
  std::memcpy(value, &bits, sizeof(bits));
  return Status();
}

Status Engine::AgreeOnBuffers(const Status& local) {
  const int64_t step = buffer_agreements_++;
  return AgreeOnFailure("buffers", local.ok() ? TestFailure("buffers", ctx_.rank, step) : local);
}

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

// NCCL collectives complete on the stream without the host: nothing left to progress.
Status Engine::Finish(const Status& result) { return result; }

Status Engine::WriteStatus(int info, int32_t* status) {
  // From pageable memory: the copy has read `value` when cudaMemcpyAsync returns.
  const int32_t value = info;
  JAXMG_CUDA(cudaMemcpyAsync(status, &value, sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
  return Status();
}

template <typename T>
Status Engine::LogAbsDiag(const Matrix<T>& a, double scale, bool ok, RealOf<T>* out) {
  void* sum = Slot(Slots::kSum);
  if (ok) {
    JAXMG_CUDA(cuda::LogDiagSum(KernelType<T>(), a.data, a.local_rows, a.local_cols, a.tile,
                                ctx_.nprow, ctx_.npcol, ctx_.myrow, ctx_.mycol, sum, stream_));
    JAXMG_NCCL(ncclAllReduce(sum, sum, 1, NcclRealOf<T>(), ncclSum, ctx_.comm, stream_));
  }
  JAXMG_CUDA(cuda::FinishLogdet(KernelType<T>(), sum, scale, ok, out, stream_));
  return Status();
}

template <typename T>
Status Engine::SignLogDet(const Matrix<T>& lu, const Pivots& pivots, T* sign,
                          RealOf<T>* logabsdet) {
  using R = RealOf<T>;
  JAXMG_RETURN_IF_ERROR(CheckLu(lu.factored, "SignLogDet"));
  // Over the local diagonal: Σ log|d|, Σ arg d, exact zeros, non-finite entries (one kernel),
  // then whether the input held a non-finite entry (one all-reduce of the five); the pivots' and
  // the relabeling's parities on the host.
  const layout::Plan& plan = state_.plan;
  void* sums = nullptr;
  JAXMG_RETURN_IF_ERROR(AgreeOnBuffers(Scratch(5 * sizeof(double), &sums)));
  JAXMG_CUDA(cuda::DiagSums(KernelType<T>(), lu.data, lu.local_rows, lu.local_cols, lu.tile,
                            ctx_.nprow, ctx_.npcol, ctx_.myrow, ctx_.mycol,
                            static_cast<double*>(sums), stream_));
  // A non-finite entry anywhere in the factor counts, not only on the diagonal.
  JAXMG_RETURN_IF_ERROR(NonFinite<T>(lu, Slot(Slots::kFactorNonFinite)));
  int32_t columns[2] = {kNoColumn, kNoColumn};  // the factor's scan, the input's (Getrf)
  JAXMG_CUDA(cudaMemcpyAsync(columns, Slot(Slots::kFactorNonFinite), sizeof(columns),
                             cudaMemcpyDeviceToHost, stream_));
  JAXMG_CUDA(cudaStreamSynchronize(stream_));
  // Pageable: each copy has read its source when cudaMemcpyAsync returns.
  const double factor_nonfinite = columns[0] != kNoColumn ? 1.0 : 0.0;
  const double input_nonfinite = columns[1] != kNoColumn ? 1.0 : 0.0;
  if (factor_nonfinite > 0) {
    JAXMG_CUDA(cudaMemcpyAsync(static_cast<double*>(sums) + 3, &factor_nonfinite, sizeof(double),
                               cudaMemcpyHostToDevice, stream_));
  }
  JAXMG_CUDA(cudaMemcpyAsync(static_cast<double*>(sums) + 4, &input_nonfinite, sizeof(double),
                             cudaMemcpyHostToDevice, stream_));
  JAXMG_NCCL(ncclAllReduce(sums, sums, 5, ncclDouble, ncclSum, ctx_.comm, stream_));
  double host[5];
  JAXMG_CUDA(cudaMemcpyAsync(host, sums, sizeof(host), cudaMemcpyDeviceToHost, stream_));
  JAXMG_CUDA(cudaStreamSynchronize(stream_));
  std::vector<int64_t> piv;
  JAXMG_RETURN_IF_ERROR(GlobalPivots(lu, pivots, &piv));
  int64_t swaps = 0;
  for (size_t i = 0; i < piv.size(); ++i) swaps += piv[i] != static_cast<int64_t>(i) + 1;
  const int parity = static_cast<int>((swaps + layout::RelabelParity(plan)) % 2);
  const bool nonfinite = SlogdetNonFinite(host[4] > 0, host[3] > 0, host[2] > 0);
  const T s = SignOf<T>(host[1], parity, host[2] > 0, nonfinite);
  const R nan = std::numeric_limits<R>::quiet_NaN(), inf = std::numeric_limits<R>::infinity();
  const R l = nonfinite ? nan : host[2] > 0 ? -inf : static_cast<R>(host[0]);
  JAXMG_CUDA(cudaMemcpyAsync(sign, &s, sizeof(T), cudaMemcpyHostToDevice, stream_));
  JAXMG_CUDA(cudaMemcpyAsync(logabsdet, &l, sizeof(R), cudaMemcpyHostToDevice, stream_));
  return Status();
}

#define JAXMG_INSTANTIATE_STATUS(T)                                                                \
  template Status Engine::SymmetryProducts<T>(const void* shard, void** y);                        \
  template Status Engine::Asymmetric<T>(const T* shard, bool* out);                                \
  template Status Engine::CheckSymmetry<T>(const T* shard);                                        \
  template Status Engine::NonFinite<T>(const Matrix<T>& a, int32_t* column);                       \
  template Status Engine::Agree<T>(const Matrix<T>& a, bool failed, int* info, int64_t diag_limit, \
                                   bool scan);                                                     \
  template Status Engine::AgreeValues<T>(const void* values, int64_t n, bool failed, int* info);   \
  template Status Engine::LogAbsDiag<T>(const Matrix<T>& a, double scale, bool ok,                 \
                                        RealOf<T>* out);                                           \
  template Status Engine::SignLogDet<T>(const Matrix<T>& lu, const Pivots& pivots, T* sign,        \
                                        RealOf<T>* logabsdet);
JAXMG_FOR_EACH_SCALAR(JAXMG_INSTANTIATE_STATUS)
#undef JAXMG_INSTANTIATE_STATUS

}  // namespace jaxmg::cusolvermp
