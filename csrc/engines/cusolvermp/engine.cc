// The GPU engine's object: descriptors, scratch and workspaces, the single-GPU handles and lanes,
// and the engine matrix in and out (engine.h).
#include "engines/cusolvermp/engine.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <complex>
#include <cstdint>
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
#include "engines/cusolvermp/engine_internal.h"
#include "engines/cusolvermp/engine_util.h"
#include "engines/cusolvermp/local_blas.h"
#include "routines/steps.h"

namespace jaxmg::cusolvermp {

// The steps Engine declares are the contract's, for every element type (routines/steps.h).
static_assert(StepsMatch<Engine>());

Descriptor::~Descriptor() {
  if (desc_) cusolverMpDestroyMatrixDesc(desc_);
}

Status Descriptor::Create(Context& c, cudaDataType dt, int64_t m, int64_t n, int64_t mb, int64_t nb,
                          int64_t lld) {
  JAXMG_SOLVER(cusolverMpCreateMatrixDesc(&desc_, c.grid, dt, m, n, mb, nb, 0, 0, lld));
  return Status();
}

Status Engine::Scratch(size_t bytes, void** out) {
  // 256-byte aligned (the tensor-core fragments need 32): XLA's allocator takes alignments up
  // to 16 only, so 240 bytes more and the pointer rounded up.
  constexpr size_t kAlign = 256, kGiven = 16;
  void* p = scratch_.Allocate(std::max<size_t>(bytes, kAlign) + kAlign - kGiven, kGiven);
  if (p != nullptr) {
    const uintptr_t at = reinterpret_cast<uintptr_t>(p);
    p = reinterpret_cast<void*>((at + kAlign - 1) / kAlign * kAlign);
  }
  if (p == nullptr) {
    return Status::Error("jaxmg: XLA could not provide " + std::to_string(bytes) +
                         " bytes of GPU scratch (lower XLA_PYTHON_CLIENT_MEM_FRACTION to leave "
                         "room, or use a smaller tile)");
  }
  *out = p;
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

Status Engine::Workspace(size_t bytes, size_t host_bytes, vendor::Work* out) {
  void* dev = nullptr;
  JAXMG_RETURN_IF_ERROR(Workspace(bytes, host_bytes, &dev));
  // The sizes asked (cuBLASMp wants them unchanged; the buffers may be larger).
  *out = vendor::Work{dev, bytes, ctx_.host_work.data(), host_bytes};
  return Status();
}

Status Engine::Small() {
  if (small_ != nullptr) return Status();
  void* small = nullptr;
  JAXMG_RETURN_IF_ERROR(Scratch(64, &small));
  small_ = static_cast<int32_t*>(small);
  JAXMG_CUDA(cudaMemsetAsync(small_, 0, 64, stream_));
  JAXMG_CUDA(cudaMemsetAsync(Slot(Slots::kFactorNonFinite), 0x7f, 2 * sizeof(int32_t),
                             stream_));  // kNoColumn
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
  JAXMG_RETURN_IF_ERROR(CublasCheck((*lb)->set_stream(*handle, stream_), "cublasSetStream"));
  return BlasMath(*lb, *handle, &ctx_.math_blas);
}

Status Engine::BlasMath(const LocalBlas* lb, cublasHandle_t h, int64_t* applied) {
  return ApplyMath(config_.gpu_math, applied, "cublasSetMathMode", lb->set_math_mode != nullptr,
                   [&] {
                     return CublasCheck(lb->set_math_mode(h, BlasMathMode(config_.gpu_math)),
                                        "cublasSetMathMode");
                   });
}

Status Engine::SolverMath(const LocalBlas* lb, cusolverDnHandle_t h, int64_t* applied) {
  return ApplyMath(config_.gpu_math, applied, "cusolverDnSetMathMode",
                   lb->dn_set_math_mode != nullptr, [&] {
                     JAXMG_SOLVER(lb->dn_set_math_mode(h, SolverMathMode(config_.gpu_math)));
                     return Status();
                   });
}

Status Engine::LibraryMath() {
  return ApplyMath(config_.gpu_math, &ctx_.math_mp, "cusolverMpSetMathMode", true, [&] {
    JAXMG_SOLVER(cusolverMpSetMathMode(ctx_.handle, SolverMathMode(config_.gpu_math)));
    return Status();
  });
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
  return SolverMath(*lb, *dn, &ctx_.math_dn);
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
  JAXMG_RETURN_IF_ERROR(BlasMath(out->lb, out->blas, &ctx_.math_side_blas));
  return SolverMath(out->lb, out->dn, &ctx_.math_side_dn);
}

Status Engine::Join(cudaStream_t from, cudaStream_t to, int event) {
  cudaEvent_t e = ctx_.side_events[event];
  JAXMG_CUDA(cudaEventRecord(e, from));
  JAXMG_CUDA(cudaStreamWaitEvent(to, e, 0));
  return Status();
}

template <typename T>
Engine::Matrix<T> Engine::EngineMatrix() const {
  const layout::Plan& plan = state_.plan;
  return Matrix<T>::Of(static_cast<T*>(work_), &desc_a_, plan.engine_rows(), plan.engine_cols(),
                       local_rows_, local_cols_, plan.tile);
}

template <typename T>
Status Engine::NewLike(const Matrix<T>& like, Matrix<T>* out) {
  *out = like;
  out->factored = Factorization::kNone;
  JAXMG_RETURN_IF_ERROR(
      Scratch(sizeof(T) * std::max<int64_t>(like.local_rows * like.local_cols, 1), &out->data));
  Descriptor& desc = descriptors_.emplace_back();
  out->desc = &desc;
  return desc.Create(ctx_, DataTypeOf<T>(), like.rows, like.cols, like.tile, like.tile, like.ld);
}

Status Engine::CheckLu(Factorization held, const char* step) {
  if (held == Factorization::kLu || held == Factorization::kLuHostPivots) {
    return Status();
  }
  return JAXMG_ERROR(std::string(step) + ": the matrix handed holds no LU factorization");
}

template <typename T>
Status Engine::Prepare(T* shard, Matrix<T>* a) {
  StepTimer timer("Prepare", stream_);
  const layout::Plan& plan = state_.plan;
  const size_t es = sizeof(T);
  const int64_t t = plan.tile;
  local_rows_ = layout::EngineLocalExtent(plan, plan.rows, ctx_.myrow);
  local_cols_ = layout::EngineLocalExtent(plan, plan.cols, ctx_.mycol);
  const int64_t lr = local_rows_, lc = local_cols_;
  JAXMG_SOLVER(cusolverMpSetStream(ctx_.handle, stream_));
  JAXMG_RETURN_IF_ERROR(LibraryMath());
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
  JAXMG_RETURN_IF_ERROR(desc_a_.Create(ctx_, DataTypeOf<T>(), plan.engine_rows(),
                                       plan.engine_cols(), t, t, std::max<int64_t>(lr, 1)));
  *a = EngineMatrix<T>();
  return Status();
}

template <typename T>
Status Engine::MatrixIn(const T* shard, Matrix<T>* k) {
  return RhsMatrixIn<T>(shard, state_.plan.rows.extent, k);
}

template <typename T>
Status Engine::RhsMatrixIn(const T* b, int64_t rows, Matrix<T>* c) {
  StepTimer timer("MatrixIn", stream_);
  const layout::Plan& plan = state_.plan;
  if (plan.strategy != layout::Strategy::kRedistribute) {
    return JAXMG_ERROR("a second matrix is read into a redistributed plan only");
  }
  // The shards of b read column-major: blocks of rows / mesh_cols x cols.shard of Bᵀ, block
  // (v, u) on mesh position (u, v), as the engine matrix's (Prepare).
  // A local failure to allocate is agreed in the redistribution, before its collectives.
  const Status allocated = NewMatrix<T>(rows, plan.cols.extent, c);
  return Redistribute<T>(b, /*to_tiles=*/true, c->data, allocated, rows);
}

template <typename T>
Status Engine::RhsMatrixOut(const Matrix<T>& c, T* x) {
  StepTimer timer("RhsMatrixOut", stream_);
  return Redistribute<T>(c.data, /*to_tiles=*/false, x, Status(), c.rows);
}

template <typename T>
Status Engine::NewMatrix(int64_t rows, int64_t cols, Matrix<T>* out) {
  const int64_t t = state_.plan.tile;
  const int64_t lr = layout::CyclicAxis{t, ctx_.nprow, ctx_.myrow}.Extent(rows);
  const int64_t lc = layout::CyclicAxis{t, ctx_.npcol, ctx_.mycol}.Extent(cols);
  Descriptor& desc = descriptors_.emplace_back();
  *out = Matrix<T>::Of(nullptr, &desc, rows, cols, lr, lc, t);
  JAXMG_RETURN_IF_ERROR(Scratch(sizeof(T) * std::max<int64_t>(lr * lc, 1), &out->data));
  return desc.Create(ctx_, DataTypeOf<T>(), rows, cols, t, t, out->ld);
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
    col_orig[c] =
        layout::EngineGlobalToOriginal(
            plan, plan.cols,
            layout::CyclicAxis{t, ctx_.npcol, ctx_.mycol}.Global(layout::LocalIndex{c}).value)
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
Status Engine::ShardOut(const Matrix<T>& y, T* shard) {
  if (y.data == shard) return Status();  // the engine worked in the shard
  StepTimer timer("ShardOut", stream_);
  return MatrixOut<T>(y.data, shard);
}

template <typename T>
Status Engine::FactorOut(const Matrix<T>& f, T* out, int64_t count) {
  if (f.data == out) return Status();  // the engine worked in the shard: kept as it is
  StepTimer timer("FactorOut", stream_);
  if (state_.plan.strategy != layout::Strategy::kRelabel) return MatrixOut<T>(f.data, out);
  if (count != f.local_rows * f.local_cols) {
    return JAXMG_ERROR("the factor buffer has " + std::to_string(count) + " entries, not " +
                       std::to_string(f.local_rows * f.local_cols));
  }
  // The padded engine matrix.
  JAXMG_CUDA(cudaMemcpyAsync(out, f.data, sizeof(T) * count, cudaMemcpyDeviceToDevice, stream_));
  return Status();
}

template <typename T>
Status Engine::Adopt(const T* factor, int64_t count, Factorization holds, Matrix<T>* f) {
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
    JAXMG_RETURN_IF_ERROR(LibraryMath());
    JAXMG_RETURN_IF_ERROR(Small());
    work_ = const_cast<T*>(factor);
    JAXMG_RETURN_IF_ERROR(desc_a_.Create(ctx_, DataTypeOf<T>(), plan.engine_rows(),
                                         plan.engine_cols(), plan.tile, plan.tile,
                                         std::max<int64_t>(local_rows_, 1)));
    *f = EngineMatrix<T>();
  } else {
    // Redistributed: Prepare reads the JAX layout and writes a copy of its own.
    if (count != plan.rows.shard * plan.cols.shard)
      return JAXMG_ERROR("the factor has the wrong size");
    JAXMG_RETURN_IF_ERROR(Prepare(const_cast<T*>(factor), f));
  }
  f->factored = holds;
  return Status();
}

template <typename T>
Status Engine::FillNan(T* x, int64_t count) {
  JAXMG_CUDA(cuda::FillNan(KernelType<T>(), x, count, stream_));
  return Status();
}

#define JAXMG_INSTANTIATE_ENGINE_CORE(T)                                                \
  template Status Engine::Prepare<T>(T * shard, Matrix<T> * a);                         \
  template Status Engine::NewLike<T>(const Matrix<T>& like, Matrix<T>* out);            \
  template Status Engine::MatrixIn<T>(const T* shard, Matrix<T>* k);                    \
  template Status Engine::RhsMatrixIn<T>(const T* b, int64_t rows, Matrix<T>* c);       \
  template Status Engine::RhsMatrixOut<T>(const Matrix<T>& c, T* x);                    \
  template Status Engine::NewMatrix<T>(int64_t rows, int64_t cols, Matrix<T>* out);     \
  template Status Engine::MatrixOut<T>(const void* from, void* shard);                  \
  template Status Engine::ShardOut<T>(const Matrix<T>& y, T* shard);                    \
  template Status Engine::FactorOut<T>(const Matrix<T>& f, T* out, int64_t count);      \
  template Status Engine::Adopt<T>(const T* factor, int64_t count, Factorization holds, \
                                   Matrix<T>* f);                                       \
  template Status Engine::FillNan<T>(T * x, int64_t count);
JAXMG_FOR_EACH_SCALAR(JAXMG_INSTANTIATE_ENGINE_CORE)
#undef JAXMG_INSTANTIATE_ENGINE_CORE

}  // namespace jaxmg::cusolvermp
