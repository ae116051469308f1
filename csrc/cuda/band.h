// Device kernels of the GPU backend's two-stage eigensolver (algorithms/band_*.h over
// engines/cusolvermp/backend.h; kernels in band_chase.cu, band_bisect.cu, band_vectors.cu): the
// band of a Hermitian matrix reduced to band form, its reduction to a tridiagonal matrix by bulge
// chasing, the tridiagonal matrix's eigenvalues by bisection, and the row moves between a
// column-cyclic distribution and global order that the first stage needs.
//
// Band storage: an n x n Hermitian matrix of lower bandwidth b, held as its lower band with room
// for the bulges of the chase (2b subdiagonals): entry (i, j), j <= i <= j + 2b, at
// band[i + 2b j] (LAPACK's band layout with leading dimension 2b + 1, read with the stride
// 2b between columns); n (2b + 1) elements.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/kernels.h"

namespace jaxmg::cuda {

// Elements of band storage for an n x n matrix of bandwidth b.
inline int64_t BandElements(int64_t n, int64_t b) { return n * (2 * b + 1); }

// band := entries (i, j) of the lower band (j <= i <= min(j + b, n - 1)) of `cols` columns
// from global column c0, read from a (global row i of column j at a[i - row0 + (j - c0) lda]).
cudaError_t BandFromColumns(Dtype dt, const void* a, int64_t lda, int64_t row0, int64_t c0,
                            int64_t cols, int64_t n, int64_t b, void* band, cudaStream_t stream);

// The band (bandwidth b >= 2, band storage above) := a tridiagonal matrix unitarily similar to
// it (on its diagonal and first subdiagonal; the rest is left as scratch), by Householder bulge
// chasing (Lang's one-column sweeps in the task order of LAPACK's ?sytrd_sb2st, Haidar, Ltaief
// and Dongarra, SC '11): sweep s annihilates column s and chases the bulge it makes down the
// band, each of its tasks waiting for the sweep before to be three tasks ahead. Persistent
// thread blocks take the sweeps in order (an atomic counter), so no block waits for one that has
// not started. `sync`: n + 1 ints of device scratch. Values only: the reflectors are not kept.
// With v2 (algorithms/band_chase.h ChaseReflectors(n, b) x b elements) and tau2 (ChaseReflectors
// elements) not null, the chase keeps its reflectors: reflector (s, j) of sweep s at block row j
// (rows s + 1 + (j − 1) b .. s + j b, clipped at n − 1), the (ChaseOffset(j) + s)-th, its b entries
// (v₀ = 1, zero past its length) and τ; H = I − τ v vᴴ, and the band = Q₂ T Q₂ᴴ for Q₂ the
// product of the reflectors in the chase's order.
cudaError_t BandToTridiagonal(Dtype dt, void* band, int64_t n, int64_t b, int* sync, void* v2,
                              void* tau2, cudaStream_t stream);
// The widest band BandToTridiagonal takes: 128 (64 for complex128, whose block of 128 x 129
// elements would not fit a multiprocessor's shared memory).
int MaxChaseBand(Dtype dt);

// From the chased band: d and e (n reals each, e >= 0, e[n − 1] = 0) of a real symmetric
// tridiagonal matrix and the phases (n elements of dt; signs for real types) p with
// T = diag(p) T_real diag(p)ᴴ.
cudaError_t TridiagonalOf(Dtype dt, const void* band, int64_t n, int64_t b, void* d, void* e,
                          void* phase, cudaStream_t stream);

// z (ld ldz) := diag(phase) q for q real (rows x cols, ld ldq).
cudaError_t PhaseRows(Dtype dt, const void* q, int64_t ldq, const void* phase, int64_t rows,
                      int64_t cols, void* z, int64_t ldz, cudaStream_t stream);

// The back-transformation by Q₂ in waves. Group g holds sweeps g ℓ .. g ℓ + ℓ − 1; its block at
// block row j, H(g ℓ, j) ⋯ H(g ℓ + ℓ − 1, j) = I − V T Vᴴ, acts on rows g ℓ + 1 + (j − 1) b ..
// + b + ℓ − 1. Q₂ = G₀ G₁ ⋯ with G_g = B(g, J) ⋯ B(g, 1) (for any ℓ), so Q₂ Z applies the groups
// from the last, each from block row 1 down; wave w = (j − 1) + 2 (G − 1 − g) holds blocks that
// share no row, and the waves in order respect every overlap. WaveBlocks: vb (count blocks of
// ldv x ℓ, ldv >= b + ℓ − 1, zero past row b + ℓ − 1) and taub (count x ℓ) of the wave's blocks
// g0 + i at block rows j0 + 2i.
cudaError_t WaveBlocks(Dtype dt, const void* v2, const void* tau2, int64_t n, int64_t b,
                       int64_t ell, int64_t g0, int64_t j0, int64_t count, int64_t ldv, void* vb,
                       void* taub, cudaStream_t stream);
// Z_i −= V_i (T_i (V_iᵀ Z_i)) for the count blocks of a wave (band_apply.cu): V_i = vb[i]
// (ldv x ℓ, from WaveBlocks), T_i = t[i] (WaveFactors), Z_i the b + ℓ − 1 rows of z from row
// i·stride (ld ldz, `cols` columns): one pass over Z per block, on the tensor cores. Where
// WaveApplies(dt, b, ℓ): float64, ℓ a multiple of 8 up to 64, b + ℓ − 1 up to 192 rows; ldv a
// multiple of 8 at least b + ℓ − 1 rounded up to 8.
bool WaveApplies(Dtype dt, int64_t b, int64_t ell);
cudaError_t WaveApply(Dtype dt, const void* vb, int64_t ldv, const void* t, int64_t b, int64_t ell,
                      int64_t count, void* z, int64_t ldz, int64_t stride, int64_t cols,
                      cudaStream_t stream);
// t[i] := the compact WY factor T of block i from s[i] = V_iᴴ V_i and its τ (ℓ x ℓ each).
cudaError_t WaveFactors(Dtype dt, const void* s, const void* taub, int64_t ell, int64_t count,
                        void* t, cudaStream_t stream);

// w (n reals of dt's precision, ascending) := the eigenvalues of the Hermitian tridiagonal
// matrix on the band's diagonal and first subdiagonal, by bisection with Sturm counts (in double)
// inside the Gershgorin interval, each eigenvalue to about 2 ε max|λ| (ε of double); NaN
// everywhere when an entry is not finite. `scratch`: 2n + 4 doubles of device memory.
cudaError_t TridiagonalEigenvalues(Dtype dt, const void* band, int64_t n, int64_t b,
                                   double* scratch, void* w, cudaStream_t stream);

// Rows between a column-cyclic distribution and global order: local column first + i of this
// process (tiles of t over procs processes, this one at `me`) is global index g; its row of
// `local` (count x cols, ld ldl) is row g - offset of `global` (ld ldg).
// to_global: global[g - offset + c ldg] = local[i + c ldl] (other rows untouched);
// otherwise local[i + c ldl] = global[g - offset + ((c + shift) mod cols) ldg].
cudaError_t CyclicRows(Dtype dt, bool to_global, void* local, int64_t ldl, int64_t count,
                       int64_t cols, int64_t first, int64_t t, int procs, int me, int64_t offset,
                       void* global, int64_t ldg, int64_t shift, cudaStream_t stream);

}  // namespace jaxmg::cuda
