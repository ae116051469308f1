// Device kernels of the GPU engine: local layout transforms, right-hand-side gather/scatter,
// logdet reduction and NaN fill. Host launchers, enqueued on `stream`; element types are chosen
// at run time (the FFI handler dispatches on the XLA dtype).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace jaxmg::cuda {

enum class Dtype : int { kF32 = 0, kF64 = 1, kC64 = 2, kC128 = 3 };

size_t DtypeBytes(Dtype dt);

// out (out_rows x out_cols, column-major, ld out_rows) = the shard (in_rows x in_cols, ld
// in_rows) cut into pieces of `rse` rows (`cse` cols), each padded to `rps` (`cps`) with zeros,
// and, with `identity`, 1 on padded diagonal entries. (row0, col0) = padded-global index of
// out's first row/column.
cudaError_t PadCopy(Dtype dt, const void* shard, int64_t in_rows, int64_t in_cols, void* out,
                    int64_t out_rows, int64_t out_cols, int64_t rse, int64_t rps, int64_t cse,
                    int64_t cps, int64_t row0, int64_t col0, bool identity, cudaStream_t stream);

// local_b[r + c * lr] = conj?(full[row_global[r] * nrhs + j(c)]) (0 where row_global[r] < 0),
// with j(c) the global column of local column c on a block-cyclic axis (tile t, npcol, mycol).
cudaError_t GatherRhs(Dtype dt, const void* full, int64_t nrhs, const int64_t* row_global,
                      int64_t lr, int64_t lbc, int64_t t, int npcol, int mycol, bool conj,
                      void* local_b, cudaStream_t stream);

// The reverse: full[(row_global[r] - row_begin) * nrhs + j(c)] = conj?(local_b[r + c * lr])
// where row_begin <= row_global[r] < row_end and j(c) < nrhs (other entries untouched).
cudaError_t ScatterRhs(Dtype dt, const void* local_b, int64_t nrhs, const int64_t* row_global,
                       int64_t lr, int64_t lbc, int64_t t, int npcol, int mycol, bool conj,
                       void* full, cudaStream_t stream, int64_t row_begin = 0,
                       int64_t row_end = INT64_MAX);

// *sum (real type of dt) = sum of log|a[r + c * lr]| over the local entries of the global
// diagonal of a block-cyclic matrix (tile t, grid nprow x npcol, this process at myrow, mycol).
cudaError_t LogDiagSum(Dtype dt, const void* a, int64_t lr, int64_t lc, int64_t t, int nprow,
                       int npcol, int myrow, int mycol, void* sum, cudaStream_t stream);

// *out = min(*out, 1 + the smallest engine-global column of a non-finite local entry) (a stays
// at its value when every entry is finite). Grid-stride over the whole local matrix.
cudaError_t NonFiniteColumn(Dtype dt, const void* a, int64_t lr, int64_t lc, int64_t t, int npcol,
                            int mycol, int32_t* out, cudaStream_t stream);

// out[0..3] (doubles) = over the local entries of the global diagonal (as LogDiagSum): the sum of
// log|d| and of arg d (0 or π for reals) over finite nonzero entries, the number of zeros, the
// number of non-finite entries.
cudaError_t DiagSums(Dtype dt, const void* a, int64_t lr, int64_t lc, int64_t t, int nprow,
                     int npcol, int myrow, int mycol, double* out, cudaStream_t stream);

// Row interchanges of a column-major array (leading dimension ld): rows row0 + i and
// row0 + piv[i] - 1 (piv 1-based, relative to row0) for i = 0..count-1 in order, on columns
// [begin, end) except [skip_begin, skip_end).
cudaError_t RowSwaps(Dtype dt, void* a, int64_t ld, int64_t begin, int64_t end, int64_t skip_begin,
                     int64_t skip_end, int64_t row0, const int64_t* piv, int64_t count,
                     cudaStream_t stream);

// *out = the smallest 1-based engine-global index (below `limit`) of a local diagonal entry of a
// block-cyclic matrix that is zero or not finite, or 0 when there is none.
cudaError_t DiagCheck(Dtype dt, const void* a, int64_t lr, int64_t lc, int64_t t, int nprow,
                      int npcol, int myrow, int mycol, int64_t limit, int32_t* out,
                      cudaStream_t stream);

// *out = ok ? scale * *sum : NaN (real type of dt).
cudaError_t FinishLogdet(Dtype dt, const void* sum, double scale, bool ok, void* out,
                         cudaStream_t stream);

// dst[dr[i] + dc[j] * ld_dst] = src[sr[i] + sc[j] * ld_src] for i < rows, j < cols
// (column-major); a null index list stands for 0, 1, 2, ...
cudaError_t MoveBlock(Dtype dt, const void* src, int64_t ld_src, const int64_t* sr,
                      const int64_t* sc, int64_t rows, int64_t cols, void* dst, int64_t ld_dst,
                      const int64_t* dr, const int64_t* dc, cudaStream_t stream);

// a[r + c * lr] = 1 on the local entries of the global diagonal of a block-cyclic matrix.
cudaError_t SetDiagonal(Dtype dt, void* a, int64_t lr, int64_t lc, int64_t t, int nprow, int npcol,
                        int myrow, int mycol, cudaStream_t stream);

// out[(col_orig[c] - row0) * ld_out + (row_orig[r] - col0)] = y[r + c * lr] wherever both maps
// are >= 0: an engine-local block (column-major, the transpose of the matrix's entries) written
// back into a row-major shard whose first row and column are row0 and col0.
cudaError_t ScatterMatrix(Dtype dt, const void* y, int64_t lr, int64_t lc, const int64_t* row_orig,
                          const int64_t* col_orig, int64_t row0, int64_t col0, int64_t ld_out,
                          void* out, cudaStream_t stream);

// QDWH (routines/polar.h). y (ly x lc, column-major) := scale u (u: lr x lc, ld lr) in rows
// 0..lr-1, zeros to row top, then from row top this process's rows of the identity (a
// block-cyclic square matrix of tile t over the nprow x npcol grid, rows below ly - top).
cudaError_t QdwhStack(Dtype dt, const void* u, int64_t lr, int64_t lc, double scale, void* y,
                      int64_t ly, int64_t top, int64_t t, int nprow, int npcol, int myrow,
                      int mycol, cudaStream_t stream);

// u := e u + coef w over count entries, *sum += Σ |u_new − u_old|² (a device double).
cudaError_t AxpbyChange(Dtype dt, void* u, const void* w, int64_t count, double e, double coef,
                        double* sum, cudaStream_t stream);

// col[global column] = Σ |a| over each local column and row[global row] = Σ |a| over each
// local row of a block-cyclic matrix (lr x lc, ld lr; doubles; other entries untouched).
cudaError_t AbsSums(Dtype dt, const void* a, int64_t lr, int64_t lc, int64_t t, int nprow,
                    int npcol, int myrow, int mycol, double* col, double* row, cudaStream_t stream);

// *sum += Σ |a|² over count entries (a device double).
cudaError_t SumSquares(Dtype dt, const void* a, int64_t count, double* sum, cudaStream_t stream);

// Householder QR's blocks (the GPU engine's 1-D QR), column-major:
// v (rows x cols, ld ldv) := the unit lower trapezoidal vectors that geqrf left below the
// diagonal of a (lda), with column j zero where tau[j] = 0 (H_j = I);
cudaError_t ReflectorBlock(Dtype dt, const void* a, int64_t lda, int64_t rows, int64_t cols,
                           const void* tau, void* v, int64_t ldv, cudaStream_t stream);
// s (k x k, ld ld, holding VᴴV) := striu(s) + diag(1/tau) (1 where tau = 0), zero below: the
// inverse of the compact WY form's T (Q = I − V T Vᴴ);
cudaError_t ReflectorFactor(Dtype dt, void* s, int64_t ld, int64_t k, const void* tau,
                            cudaStream_t stream);
// dst (cols x rows, ld ldd) := srcᴴ (src rows x cols, ld lds);
cudaError_t Adjoint(Dtype dt, const void* src, int64_t lds, int64_t rows, int64_t cols, void* dst,
                    int64_t ldd, cudaStream_t stream);
// a (rows x cols, ld ld) := columns row0 .. row0 + cols - 1 of the identity.
cudaError_t IdentityBlock(Dtype dt, void* a, int64_t ld, int64_t rows, int64_t cols, int64_t row0,
                          cudaStream_t stream);

// a := s a over count entries.
cudaError_t Scale(Dtype dt, void* a, int64_t count, double s, cudaStream_t stream);

// count elements of dt set to NaN (complex: NaN + 0i, like the CPU engine).
cudaError_t FillNan(Dtype dt, void* p, int64_t count, cudaStream_t stream);

}  // namespace jaxmg::cuda
