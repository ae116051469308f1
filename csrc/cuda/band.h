// Device kernels of the GPU engine's two-stage eigenvalues
// (engines/cusolvermp/band_eigenvalues.cc): the band of a Hermitian matrix reduced to band form,
// its reduction to a tridiagonal matrix by bulge chasing, the tridiagonal matrix's eigenvalues by
// bisection, and the row moves between a column-cyclic distribution and global order that the first
// stage needs.
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
cudaError_t BandToTridiagonal(Dtype dt, void* band, int64_t n, int64_t b, int* sync,
                              cudaStream_t stream);

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
