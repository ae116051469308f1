// The routines that have an FFI target, declared once: JAXMG_ROUTINES(X) calls
// X(name, Routine, family) for each, where `name` is the target's suffix (jaxmg_<engine>_<name>),
// `Routine` the struct in jaxmg::routines that runs it, and `family` the binding its target takes
// (ffi/families.h: its operands, results and their checks):
//   solve    a, b, pivots -> work, x, logdet, status, sign, pivots  (solves, factors, inverses,
//            determinants, QR, least squares, triangular solves)
//   eigen    a, b -> w, vectors, status                              (syevd, sygvd)
//   svd      a -> u, s, vh, status                                   (gesvd)
//   polar    a -> u, h, status                                       (polar)
//   product  a, b -> c, status                                       (matmul)
// Both engines' libraries generate their registrations from this list (ffi/cpu_targets.cc,
// ffi/cuda_targets.cc) and export it as text (RoutineListText: a line per routine, its name, its
// family and its traits, contract.h's RoutineTraits), which jaxmg/_core/native.py reads: there
// is no other list. No XLA here.
#pragma once

#include <string>

#include "routines/factor.h"
#include "routines/gesvd.h"
#include "routines/inv.h"
#include "routines/lu_solve.h"
#include "routines/matmul.h"
#include "routines/polar.h"
#include "routines/potri.h"
#include "routines/potrs.h"
#include "routines/qr.h"
#include "routines/slogdet.h"
#include "routines/solve_triangular.h"
#include "routines/syevd.h"
#include "routines/sygvd.h"

// clang-format off
#define JAXMG_ROUTINES(X)                                          \
  X(potrs, Posv, solve)                                            \
  X(lu_solve, LuSolve, solve)                                      \
  X(potri, Potri, solve)                                           \
  X(inv, Inv, solve)                                               \
  X(inv_t, InvTransposed, solve)                                   \
  X(slogdet, Slogdet, solve)                                       \
  X(cho_factor, ChoFactor, solve)                                  \
  X(cho_solve, ChoSolve, solve)                                    \
  X(lu_factor, LuFactor, solve)                                    \
  X(lu_solve_factored, LuSolveFactored, solve)                     \
  X(lu_solve_factored_t, LuSolveFactoredTransposed, solve)         \
  X(qr, Qr, solve)                                                 \
  X(least_squares, LeastSquares, solve)                            \
  X(solve_triangular, SolveTriangular, solve)                      \
  X(solve_triangular_matrix, SolveTriangularMatrix, solve)         \
  X(syevd, Syevd, eigen)                                           \
  X(eigvalsh, Eigvalsh, eigen)                                     \
  X(sygvd, Sygvd, eigen)                                           \
  X(sygvd_values, SygvdValues, eigen)                              \
  X(gesvd, Gesvd, svd)                                             \
  X(gesvd_u, GesvdU, svd)                                          \
  X(gesvd_vh, GesvdVh, svd)                                        \
  X(gesvd_values, GesvdValues, svd)                                \
  X(polar, Polar, polar)                                           \
  X(polar_up, PolarUp, polar)                                      \
  X(matmul_nn, MatmulNN, product)                                  \
  X(matmul_cn, MatmulCN, product)                                  \
  X(matmul_nc, MatmulNC, product)
// clang-format on

namespace jaxmg::routines {

// One routine's line: "name family reads_factor=0 rectangular=0 own_solution=0 second_matrix=0".
template <class R>
std::string RoutineLine(const char* name, const char* family) {
  auto flag = [](const char* trait, bool value) {
    return std::string(" ") + trait + (value ? "=1" : "=0");
  };
  return std::string(name) + " " + family + flag("reads_factor", R::kReadsFactor) +
         flag("rectangular", R::kRectangular) + flag("own_solution", R::kOwnSolution) +
         flag("second_matrix", R::kSecondMatrix) + "\n";
}

// The list as text, one line a routine (RoutineLine), for the libraries' exported
// jaxmg_<engine>_routines.
inline const char* RoutineListText() {
  static const std::string text = [] {
    std::string out;
#define JAXMG_ROUTINE_LINE(name, routine, family) out += RoutineLine<routine>(#name, #family);
    JAXMG_ROUTINES(JAXMG_ROUTINE_LINE)
#undef JAXMG_ROUTINE_LINE
    return out;
  }();
  return text.c_str();
}

}  // namespace jaxmg::routines
