// sygvd: the generalized Hermitian eigenproblem A v = λ B v (A Hermitian, B Hermitian positive
// definite), eigenvalues ascending and eigenvectors.
//
// As for syevd (routines/syevd.h), the engine redistributes A into block-cyclic tiles and holds
// M = conj(A) (the shards read column-major); B comes as the call's b, a second matrix sharded
// like a, read the same way: K = conj(B) (MatrixIn). The engine's eigenvectors z of
// M z = λ K z are conj(v), written back as for syevd (VectorsOut); the eigenvalues (real) in x.
#pragma once

#include "routines/syevd.h"

namespace jaxmg::routines {

using Sygvd = SyevdOf<true, /*kGeneralized=*/true>;
using SygvdValues = SyevdOf<false, /*kGeneralized=*/true>;

}  // namespace jaxmg::routines
