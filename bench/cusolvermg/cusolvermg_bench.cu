// cusolvermg_bench: times NVIDIA cuSOLVERMg (libcusolverMg, the single-process multi-GPU dense
// solver) on float64 potrf (Cholesky, lower) or syevd (eigenvalues and eigenvectors, lower), for
// comparison with jaxmg's own engine on the same GPUs.
//
// The matrix is Kac-Murdock-Szego, A[i,j] = r^|i-j| with r = 0.5 (SPD, log det = (N-1) log(1-r^2),
// trace = N), laid out as cuSOLVERMg wants it: a 1 x NDEV device grid, column block-cyclic with
// TILE columns a tile (device d holds the global tiles d, d+NDEV, d+2 NDEV, ... one after the
// other, leading dimension N; the last, partial tile is padded to TILE columns of zeros). Each
// device fills its own tiles with a kernel before every run (not timed). The first run is a
// warm-up; REPEATS more runs are timed, each from just before the cuSOLVERMg call to the end of a
// synchronize of every device. Checks: potrf, 2 sum log diag(L) against the exact log det;
// syevd, the sum of the eigenvalues against the trace (and every eigenvalue in the KMS bounds
// [(1-r)/(1+r), (1+r)/(1-r)]).
//
// Build: bash bench/cusolvermg/build.sh            (-> .gpu/bin/cusolvermg_bench, sm_90)
// Run:   LD_LIBRARY_PATH=<nvidia/*/lib of the cusolver, cublas, nvjitlink wheels>
//        .gpu/bin/cusolvermg_bench potrf|syevd N TILE REPEATS [NDEV]
// Output: one JSON line on stdout ({"error": ...} and exit status 1 on failure).

#define DISABLE_CUSOLVERMG_DEPRECATED  // the whole cusolverMg API is marked deprecated
#include <cuda_runtime.h>
#include <cusolverMg.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

constexpr double kR = 0.5;

[[noreturn]] void fail(const std::string& msg) {
  std::string esc;
  for (char c : msg) {
    if (c == '"' || c == '\\') esc += '\\';
    esc += (c == '\n' || c == '\t') ? ' ' : c;
  }
  std::printf("{\"engine\": \"cusolvermg\", \"error\": \"%s\"}\n", esc.c_str());
  std::fflush(stdout);
  std::exit(1);
}

#define CUDA_OK(call)                                                                   \
  do {                                                                                  \
    const cudaError_t e_ = (call);                                                      \
    if (e_ != cudaSuccess) fail(std::string(#call) + ": " + cudaGetErrorString(e_));    \
  } while (0)

#define MG_OK(call)                                                                     \
  do {                                                                                  \
    const cusolverStatus_t s_ = (call);                                                 \
    if (s_ != CUSOLVER_STATUS_SUCCESS)                                                  \
      fail(std::string(#call) + ": cusolverStatus_t " + std::to_string(static_cast<int>(s_))); \
  } while (0)

// Global column of local column c on device dev (1 x ndev grid, column block-cyclic).
__host__ __device__ inline int64_t global_col(int64_t c, int tile, int ndev, int dev) {
  return ((c / tile) * ndev + dev) * tile + c % tile;
}

// Fills device dev's local tiles (n rows, ncols local columns, leading dimension n) with KMS.
__global__ void fill_kms(double* a, int n, int tile, int ndev, int dev, int64_t ncols, double r) {
  const int64_t total = static_cast<int64_t>(n) * ncols;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = idx / n, i = idx - c * n;
    const int64_t j = global_col(c, tile, ndev, dev);
    a[idx] = j < n ? pow(r, static_cast<double>(i > j ? i - j : j - i)) : 0.0;
  }
}

// d[c] = A[j, j] for the global column j of local column c; 1 for padding columns.
__global__ void gather_diag(const double* a, int n, int tile, int ndev, int dev, int64_t ncols,
                            double* d) {
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < ncols;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = global_col(c, tile, ndev, dev);
    d[c] = j < n ? a[c * n + j] : 1.0;
  }
}

void sync_all(int ndev) {
  for (int d = 0; d < ndev; ++d) {
    CUDA_OK(cudaSetDevice(d));
    CUDA_OK(cudaDeviceSynchronize());
  }
}

// Every device may read every other's memory, as cuSOLVERMg expects; returns whether all pairs can.
bool enable_peer_access(int ndev) {
  bool all = true;
  for (int i = 0; i < ndev; ++i) {
    CUDA_OK(cudaSetDevice(i));
    for (int j = 0; j < ndev; ++j) {
      if (i == j) continue;
      int can = 0;
      CUDA_OK(cudaDeviceCanAccessPeer(&can, i, j));
      if (!can) {
        all = false;
        continue;
      }
      const cudaError_t e = cudaDeviceEnablePeerAccess(j, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled)
        (void)cudaGetLastError();  // not an error: clear it so later checks do not see it
      else
        CUDA_OK(e);
    }
  }
  return all;
}

// JSON has no NaN or infinity: those become null.
std::string num(double x, const char* fmt) {
  if (!std::isfinite(x)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, x);
  return buf;
}

int parse_int(const char* s, const char* what) {
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (end == s || *end != '\0' || v <= 0 || v > 2147483647L)
    fail(std::string(what) + " must be a positive integer, got '" + s + "'");
  return static_cast<int>(v);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5 || argc > 6)
    fail("usage: cusolvermg_bench potrf|syevd N TILE REPEATS [NDEV]  (float64; REPEATS timed runs "
         "after one warm-up; NDEV defaults to all visible GPUs)");
  const std::string routine = argv[1];
  if (routine != "potrf" && routine != "syevd") fail("ROUTINE must be potrf or syevd");
  const bool potrf = routine == "potrf";
  const int n = parse_int(argv[2], "N");
  const int tile = parse_int(argv[3], "TILE");
  const int repeats = parse_int(argv[4], "REPEATS");
  int visible = 0;
  CUDA_OK(cudaGetDeviceCount(&visible));
  const int ndev = argc > 5 ? parse_int(argv[5], "NDEV") : visible;
  if (ndev < 1 || ndev > visible)
    fail("NDEV must be between 1 and the " + std::to_string(visible) + " visible GPUs");

  // Local storage: every device gets the same number of whole tiles (the most any device owns).
  const int64_t ntiles = (static_cast<int64_t>(n) + tile - 1) / tile;
  const int64_t tiles_per_dev = (ntiles + ndev - 1) / ndev;
  const int64_t ncols = tiles_per_dev * tile;
  const size_t a_bytes = sizeof(double) * static_cast<size_t>(n) * static_cast<size_t>(ncols);

  std::vector<int> devs(ndev);
  for (int d = 0; d < ndev; ++d) devs[d] = d;

  cusolverMgHandle_t handle = nullptr;
  MG_OK(cusolverMgCreate(&handle));
  MG_OK(cusolverMgDeviceSelect(handle, ndev, devs.data()));
  const bool peer = enable_peer_access(ndev);

  cudaLibMgGrid_t grid = nullptr;
  cudaLibMgMatrixDesc_t desc = nullptr;
  MG_OK(cusolverMgCreateDeviceGrid(&grid, 1, ndev, devs.data(), CUDALIBMG_GRID_MAPPING_COL_MAJOR));
  MG_OK(cusolverMgCreateMatrixDesc(&desc, n, n, n, tile, CUDA_R_64F, grid));

  std::vector<double*> a(ndev, nullptr);
  for (int d = 0; d < ndev; ++d) {
    CUDA_OK(cudaSetDevice(d));
    CUDA_OK(cudaMalloc(&a[d], a_bytes));
  }
  void** a_parts = reinterpret_cast<void**>(a.data());

  const int ia = 1, ja = 1;  // 1-based sub-matrix origin: the whole matrix
  const cublasFillMode_t uplo = CUBLAS_FILL_MODE_LOWER;
  const cusolverEigMode_t jobz = CUSOLVER_EIG_MODE_VECTOR;
  std::vector<double> w(n, 0.0);  // syevd's eigenvalues: a host array
  int64_t lwork = 0;              // elements of the compute type, per device
  CUDA_OK(cudaSetDevice(0));
  if (potrf)
    MG_OK(cusolverMgPotrf_bufferSize(handle, uplo, n, a_parts, ia, ja, desc, CUDA_R_64F, &lwork));
  else
    MG_OK(cusolverMgSyevd_bufferSize(handle, jobz, uplo, n, a_parts, ia, ja, desc, w.data(),
                                     CUDA_R_64F, CUDA_R_64F, &lwork));
  const size_t work_bytes = sizeof(double) * static_cast<size_t>(std::max<int64_t>(lwork, 1));
  std::vector<double*> work(ndev, nullptr);
  for (int d = 0; d < ndev; ++d) {
    CUDA_OK(cudaSetDevice(d));
    CUDA_OK(cudaMalloc(&work[d], work_bytes));
  }
  void** work_parts = reinterpret_cast<void**>(work.data());

  const int threads = 256;
  const int fill_blocks =
      static_cast<int>(std::min<int64_t>((static_cast<int64_t>(n) * ncols + threads - 1) / threads, 8192));
  std::vector<double> all_s;
  int info_out = 0;
  for (int rep = 0; rep <= repeats; ++rep) {
    for (int d = 0; d < ndev; ++d) {
      CUDA_OK(cudaSetDevice(d));
      fill_kms<<<fill_blocks, threads>>>(a[d], n, tile, ndev, d, ncols, kR);
      CUDA_OK(cudaGetLastError());
    }
    sync_all(ndev);
    CUDA_OK(cudaSetDevice(0));
    int info = 0;  // a host int: < 0 a bad argument, > 0 potrf's failed minor / syevd's no convergence
    const auto t0 = std::chrono::steady_clock::now();
    if (potrf)
      MG_OK(cusolverMgPotrf(handle, uplo, n, a_parts, ia, ja, desc, CUDA_R_64F, work_parts, lwork,
                            &info));
    else
      MG_OK(cusolverMgSyevd(handle, jobz, uplo, n, a_parts, ia, ja, desc, w.data(), CUDA_R_64F,
                            CUDA_R_64F, work_parts, lwork, &info));
    sync_all(ndev);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rep > 0) all_s.push_back(s);
    if (info != 0 && info_out == 0) info_out = info;
  }

  double rel_err = 0.0;
  bool eig_in_bounds = true;
  if (potrf) {  // the last run's factor is still in place
    double logdet = 0.0;
    std::vector<double> diag(static_cast<size_t>(ncols));
    for (int d = 0; d < ndev; ++d) {
      CUDA_OK(cudaSetDevice(d));
      double* d_diag = nullptr;
      CUDA_OK(cudaMalloc(&d_diag, sizeof(double) * diag.size()));
      gather_diag<<<static_cast<int>(std::min<int64_t>((ncols + threads - 1) / threads, 4096)), threads>>>(
          a[d], n, tile, ndev, d, ncols, d_diag);
      CUDA_OK(cudaGetLastError());
      CUDA_OK(cudaMemcpy(diag.data(), d_diag, sizeof(double) * diag.size(), cudaMemcpyDeviceToHost));
      CUDA_OK(cudaFree(d_diag));
      for (double x : diag) logdet += 2.0 * std::log(x);  // NaN if a pivot was not positive
    }
    const double exact = (n - 1) * std::log(1.0 - kR * kR);
    rel_err = n > 1 ? std::fabs(logdet - exact) / std::fabs(exact) : std::fabs(logdet);
  } else {
    double sum = 0.0;
    const double lo = (1.0 - kR) / (1.0 + kR), hi = (1.0 + kR) / (1.0 - kR), slack = 1e-10;
    for (double x : w) {
      sum += x;
      eig_in_bounds = eig_in_bounds && x >= lo - slack && x <= hi + slack;
    }
    rel_err = std::fabs(sum - n) / n;
  }

  for (int d = 0; d < ndev; ++d) {
    CUDA_OK(cudaSetDevice(d));
    CUDA_OK(cudaFree(a[d]));
    CUDA_OK(cudaFree(work[d]));
  }
  MG_OK(cusolverMgDestroyMatrixDesc(desc));
  MG_OK(cusolverMgDestroyGrid(grid));
  MG_OK(cusolverMgDestroy(handle));

  std::string times;
  for (size_t k = 0; k < all_s.size(); ++k) times += (k ? ", " : "") + num(all_s[k], "%.6f");
  std::printf("{\"engine\": \"cusolvermg\", \"routine\": \"%s\", \"dtype\": \"float64\", \"n\": %d, "
              "\"tile\": %d, \"devices\": %d, \"seconds\": %s, \"all_s\": [%s], \"info\": %d, "
              "\"check_rel_err\": %s, ",
              routine.c_str(), n, tile, ndev,
              num(*std::min_element(all_s.begin(), all_s.end()), "%.6f").c_str(), times.c_str(),
              info_out, num(rel_err, "%.3e").c_str());
  if (!potrf) std::printf("\"eig_in_bounds\": %s, ", eig_in_bounds ? "true" : "false");
  std::printf("\"workspace_bytes_per_device\": %zu, \"matrix_bytes_per_device\": %zu, "
              "\"peer_access\": %s}\n",
              sizeof(double) * static_cast<size_t>(lwork), a_bytes, peer ? "true" : "false");
  return 0;
}
