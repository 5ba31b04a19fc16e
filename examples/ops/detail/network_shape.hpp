// What the shape family (matmul, gemm, flatten2, reshape2, concat) shares: outputs that view
// their input's storage, Fluid's XShape, batched matrix products with transposes and
// broadcast batch dimensions (their geometry and their CPU, OpenCL and cuBLAS runs), and the
// family's OpenCL C source.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <fluidk/execution_context.hpp>
#include <fluidk/tensor.hpp>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ops/detail/common.hpp"
#include "ops/detail/gemm.hpp"
#if FLUIDK_OPS_ONEDNN
#include "ops/detail/onednn.hpp"
#endif
#if FLUIDK_OPS_OPENCL
#include "ops/detail/opencl.hpp"
#endif
#if FLUIDK_OPS_CUDA
#include "ops/detail/cuda.hpp"
#include "ops/detail/cuda_launch_shape.hpp"
#endif

namespace fluidk::ops::detail {

// --- views -----------------------------------------------------------------------------------

// `x` with other dims over the same storage: its elements in their row-major order, so the view
// is of layout ANY (an NCHW tensor reshaped to 2-D is no longer NCHW). `x` must be in row-major
// order (row_major_order) and `shape` of its element count.
inline Tensor reshaped_view(const Tensor& x, const dims& shape) {
  Tensor view = x;
  view.set_layout(data_layout::any);
  view.reshape(shape);
  return view;
}

// Writes a view of an input as output `slot`. A variable's tensor is replaced without counting
// as a write to the storage it held: on a rerun that storage is the input's own (the view of
// the last run), and ctx.set_output would move the input's version on every run, so that no
// cached copy of the input was ever served again. Nothing writes those bytes: the variable's
// own version moves, which is what caches of the output compare.
inline void set_output_sharing_input(const execution_context& ctx, std::string_view slot, Tensor view,
                                     const lod& offsets) {
  kernel_arg& a = ctx.output_arg(slot);
  if (Variable* v = a.variable(); v != nullptr) {
    LoDTensor result(std::move(view), offsets);
    v->get_mutable<LoDTensor>() = std::move(result);
  } else {
    ctx.set_output(slot, std::move(view));
  }
}

// The offsets of input `slot` when an output of shape `out` keeps its rows (dimension 0), as
// Fluid's reshape and flatten share them; none otherwise.
inline lod offsets_if_rows_kept(const execution_context& ctx, std::string_view slot, const dims& in,
                                const dims& out) {
  if (in.rank() == 0 || out.rank() == 0 || in[0] != out[0]) return {};
  return ctx.input_lod(slot);
}

// Whether an optional output slot was given.
inline bool output_requested(const execution_context& ctx, std::string_view slot) {
  const auto args = ctx.outputs(slot);
  return !args.empty() && !args[0].empty();
}

// Fluid's XShape output, when given: a tensor of dims [0, X's dims...] that holds no elements
// and records X's shape for the gradient.
inline void set_xshape(const execution_context& ctx, const Tensor& x) {
  if (!output_requested(ctx, "XShape")) return;
  require(x.dims().rank() < max_rank, ctx,
          "XShape [0, dims of X] needs rank " + std::to_string(x.dims().rank() + 1) + ", beyond fluidk's " +
              std::to_string(max_rank));
  std::vector<std::int64_t> shape{0};
  shape.insert(shape.end(), x.dims().begin(), x.dims().end());
  ctx.set_output("XShape", Tensor(dims(std::span<const std::int64_t>(shape)), x.dtype(), ctx.place()));
}

// --- matrix products -------------------------------------------------------------------------

// A batch of row-major products Out[b] = op(A[b]) x op(B[b]), Out [m, n] per batch, op a
// transpose or not. A is stored [m, k] ([k, m] when trans_a), B [k, n] ([n, k] when trans_b).
// The batch has dims `batch` (Out's); A's batch dims are a_batch (right-aligned to batch, 1
// where A is broadcast), B's b_batch, and a_strides / b_strides their element strides (0 where
// broadcast).
struct matrix_product {
  std::int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  std::vector<std::int64_t> batch, a_batch, b_batch, a_strides, b_strides;

  std::int64_t count() const {
    std::int64_t c = 1;
    for (const std::int64_t d : batch) c *= d;
    return c;
  }
  // The element offsets of A's and B's matrices of batch index `index`.
  std::pair<std::int64_t, std::int64_t> offsets(std::int64_t index) const {
    std::int64_t a = 0, b = 0;
    for (std::size_t d = batch.size(); d-- > 0;) {
      const std::int64_t i = index % batch[d];
      index /= batch[d];
      a += i * a_strides[d];
      b += i * b_strides[d];
    }
    return {a, b};
  }

  // Right-aligns the batch dims of A and B, broadcasting each pair (equal, or one of them 1);
  // false when a pair does not broadcast. Where B is the same matrix for the whole batch and
  // A's matrices follow one another untransposed, the batch is folded into A's rows: one
  // product of more rows.
  bool set_batches(std::span<const std::int64_t> a_dims, std::span<const std::int64_t> b_dims) {
    const std::size_t rank = std::max(a_dims.size(), b_dims.size());
    a_batch.assign(rank - a_dims.size(), 1);
    a_batch.insert(a_batch.end(), a_dims.begin(), a_dims.end());
    b_batch.assign(rank - b_dims.size(), 1);
    b_batch.insert(b_batch.end(), b_dims.begin(), b_dims.end());
    batch.assign(rank, 1);
    a_strides.assign(rank, 0);
    b_strides.assign(rank, 0);
    std::int64_t a_step = m * k, b_step = k * n;
    for (std::size_t d = rank; d-- > 0;) {
      if (a_batch[d] != b_batch[d] && a_batch[d] != 1 && b_batch[d] != 1) return false;
      batch[d] = a_batch[d] == 1 ? b_batch[d] : a_batch[d];
      a_strides[d] = a_batch[d] == 1 ? 0 : a_step;
      b_strides[d] = b_batch[d] == 1 ? 0 : b_step;
      a_step *= a_batch[d];
      b_step *= b_batch[d];
    }
    return true;
  }
  bool foldable() const {
    if (trans_a) return false;
    std::int64_t step = m * k;
    for (std::size_t d = batch.size(); d-- > 0;) {
      if (b_strides[d] != 0 || (batch[d] > 1 && a_strides[d] != step)) return false;
      step *= batch[d];
    }
    return true;
  }
  void fold() {
    m *= count();
    batch.clear();
    a_batch.clear();
    b_batch.clear();
    a_strides.clear();
    b_strides.clear();
  }
};

// Out = alpha x (the products) on the CPU, with detail::gemm on row-major copies of the
// transposed operands (each made once for the matrices that the batch repeats).
template <class T>
void cpu_matrix_products(const matrix_product& p, const T* a, const T* b, T* out, T alpha) {
  std::vector<T> a_rows, b_rows;  // A [m, k] and B [k, n] where they are stored transposed
  std::int64_t a_packed = -1, b_packed = -1;
  const std::int64_t count = p.count();
  for (std::int64_t index = 0; index < count; ++index) {
    const auto [a_offset, b_offset] = p.offsets(index);
    const T* a_matrix = a + a_offset;
    const T* b_matrix = b + b_offset;
    if (p.trans_a) {
      if (a_offset != a_packed) {
        a_rows.resize(std::size_t(p.m * p.k));
        for (std::int64_t i = 0; i < p.m; ++i)
          for (std::int64_t q = 0; q < p.k; ++q) a_rows[std::size_t(i * p.k + q)] = a_matrix[q * p.m + i];
        a_packed = a_offset;
      }
      a_matrix = a_rows.data();
    }
    if (p.trans_b) {
      if (b_offset != b_packed) {
        b_rows.resize(std::size_t(p.k * p.n));
        for (std::int64_t q = 0; q < p.k; ++q)
          for (std::int64_t j = 0; j < p.n; ++j) b_rows[std::size_t(q * p.n + j)] = b_matrix[j * p.k + q];
        b_packed = b_offset;
      }
      b_matrix = b_rows.data();
    }
    T* c = out + index * p.m * p.n;
    gemm<T>(p.m, p.n, p.k, a_matrix, p.k, b_matrix, p.n, c, p.n);
    if (alpha != T(1))
      for (std::int64_t i = 0; i < p.m * p.n; ++i) c[i] *= alpha;
  }
}

// A matrix [m, n] broadcast from a tensor of rank 0 to 2 (ONNX Gemm's C, unidirectionally):
// element (i, j) is at i * row_stride + j * col_stride.
struct broadcast_matrix {
  std::int64_t row_stride = 0, col_stride = 0;

  // False when `d` does not broadcast to [m, n].
  static bool of(const dims& d, std::int64_t m, std::int64_t n, broadcast_matrix& out) {
    if (d.rank() > 2) return false;
    const std::int64_t rows = d.rank() == 2 ? d[0] : 1;
    const std::int64_t cols = d.rank() >= 1 ? d[d.rank() - 1] : 1;
    if ((rows != 1 && rows != m) || (cols != 1 && cols != n)) return false;
    out.row_stride = rows == 1 ? 0 : cols;
    out.col_stride = cols == 1 ? 0 : 1;
    return true;
  }
};

#if FLUIDK_OPS_ONEDNN
// A row-major batch of float matrices [batch..., rows, cols] over a host tensor's storage,
// stored [batch..., cols, rows] when transposed: described by strides, which oneDNN's matmul
// reads as they are.
inline dnnl::memory onednn_matrix_memory(const Tensor& t, const std::vector<std::int64_t>& batch,
                                         std::int64_t rows, std::int64_t cols, bool transposed,
                                         onednn_context& dnn) {
  dnnl::memory::dims shape(batch.begin(), batch.end()), strides(batch.size() + 2);
  shape.push_back(rows);
  shape.push_back(cols);
  strides[batch.size()] = transposed ? 1 : cols;
  strides[batch.size() + 1] = transposed ? rows : 1;
  std::int64_t step = rows * cols;
  for (std::size_t d = batch.size(); d-- > 0;) {
    strides[d] = step;
    step *= batch[d];
  }
  return {dnnl::memory::desc(shape, dnnl::memory::data_type::f32, strides), dnn.engine(),
          static_cast<std::byte*>(t.handle()) + t.offset()};
}
#endif

#if FLUIDK_OPS_OPENCL
// The family's OpenCL C program (built once per context, beside the shared one).
inline constexpr const char* shape_opencl_source = R"CLC(
long fluidk_pick(long8 v, int d) {
  switch (d) {
    case 0: return v.s0;
    case 1: return v.s1;
    case 2: return v.s2;
    case 3: return v.s3;
    case 4: return v.s4;
    case 5: return v.s5;
    case 6: return v.s6;
    default: return v.s7;
  }
}

// out[b][i][j] = alpha * sum_p op(a[b])[i][p] * op(b[b])[p][j] (+ beta * c[i * c_row + j * c_col]
// when has_c), row-major, one work-item per element; work-item (j, b * m + i). The batch
// index b splits over batch_rank dims, each with A's and B's element strides (0: broadcast).
// The sum runs in p order, like the CPU kernels' reference loop.
__kernel void matrix_product_f32(__global const float* a, ulong a_off, __global const float* b, ulong b_off,
                                 __global const float* c, ulong c_off, long c_row, long c_col, int has_c,
                                 float beta, __global float* out, ulong m, ulong n, ulong k, ulong rows,
                                 int trans_a, int trans_b, float alpha, int batch_rank, long8 batch,
                                 long8 a_strides, long8 b_strides) {
  const size_t j = get_global_id(0);
  const size_t row = get_global_id(1);
  if (j >= n || row >= rows) return;
  const ulong i = row % m;
  long index = (long)(row / m);
  long a_base = (long)a_off, b_base = (long)b_off;
  for (int d = batch_rank - 1; d >= 0; --d) {
    const long extent = fluidk_pick(batch, d);
    const long at = index % extent;
    index /= extent;
    a_base += at * fluidk_pick(a_strides, d);
    b_base += at * fluidk_pick(b_strides, d);
  }
  float sum = 0.0f;
  for (ulong p = 0; p < k; ++p) {
    const float av = trans_a ? a[a_base + p * m + i] : a[a_base + i * k + p];
    const float bv = trans_b ? b[b_base + j * k + p] : b[b_base + p * n + j];
    sum += av * bv;
  }
  float r = alpha * sum;
  if (has_c) r += beta * c[c_off + i * c_row + j * c_col];
  out[row * n + j] = r;
}

// One input of a concatenation: x as [outer, inner] into out as [outer, out_inner] from column at.
__kernel void concat_part_f32(__global const float* x, ulong x_off, __global float* out, ulong outer,
                              ulong inner, ulong out_inner, ulong at) {
  const size_t e = get_global_id(0);
  if (e >= outer * inner) return;
  out[(e / inner) * out_inner + at + e % inner] = x[x_off + e];
}
)CLC";

// Out (just made on the device) = alpha x the products (+ beta x C broadcast when `c` is given).
inline void opencl_matrix_products(const execution_context& ctx, const matrix_product& p, const Tensor& a,
                                   const Tensor& b, float alpha, const Tensor* c, broadcast_matrix c_at,
                                   float beta, Tensor& out) {
  const std::int64_t rows = p.count() * p.m;
  if (rows == 0 || p.n == 0) return;
  require(p.batch.size() <= 8, ctx, "the OpenCL kernel takes at most 8 batch dimensions");
  cl_long8 batch{}, a_strides{}, b_strides{};
  for (std::size_t d = 0; d < p.batch.size(); ++d) {
    batch.s[d] = p.batch[d];
    a_strides.s[d] = p.a_strides[d];
    b_strides.s[d] = p.b_strides[d];
  }
  const cl_view<float> c_arg = c != nullptr ? cl_arg<float>(*c) : cl_arg<float>(a);  // a: unread
  opencl_launch_from(ctx, shape_opencl_source, "matrix_product_f32", std::size_t(p.n), std::size_t(rows),
                     cl_arg<float>(a), cl_arg<float>(b), c_arg, cl_long(c_at.row_stride),
                     cl_long(c_at.col_stride), cl_int(c != nullptr), beta, cl_buffer(out), cl_ulong(p.m),
                     cl_ulong(p.n), cl_ulong(p.k), cl_ulong(rows), cl_int(p.trans_a), cl_int(p.trans_b),
                     alpha, cl_int(p.batch.size()), batch, a_strides, b_strides);
}
#endif

#if FLUIDK_OPS_CUDA
// Out = alpha x the products + beta x Out with cuBLAS (column-major: it computes each
// Out^T = op(B)^T x op(A)^T, the same bytes). One strided-batched call where A's and B's
// matrices are evenly spaced over the batch (broadcast included: stride 0), else one call per
// matrix.
template <class T>
void cublas_matrix_products(const execution_context& ctx, cuda_call& call, const matrix_product& p,
                            const T* a, const T* b, T* out, T alpha, T beta) {
  const std::int64_t count = p.count();
  if (count == 0 || p.m == 0 || p.n == 0) return;
  if (p.k == 0) {  // an empty sum: beta x Out
    if (beta == T(0))
      cuda_require(cudaMemsetAsync(out, 0, std::size_t(count * p.m * p.n) * sizeof(T), call.stream()), ctx,
                   "cudaMemsetAsync");
    else if (beta != T(1))
      cuda_require(cuda_launch::matrix_scale<T>(call.stream(), out, count * p.m * p.n, beta), ctx,
                   "the scale kernel");
    return;
  }
  constexpr std::int64_t int_max = std::numeric_limits<int>::max();
  require(p.m <= int_max && p.n <= int_max && p.k <= int_max && count <= int_max, ctx,
          "a matrix side or the batch exceeds cuBLAS's int range");
  const int m = int(p.m), n = int(p.n), k = int(p.k);
  const cublasOperation_t op_a = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int lda = p.trans_a ? m : k, ldb = p.trans_b ? k : n;
  cublasHandle_t handle = call.cuda.cublas();
  const auto [a0, b0] = p.offsets(0);
  const auto [a1, b1] = count > 1 ? p.offsets(1) : std::pair<std::int64_t, std::int64_t>{a0, b0};
  bool even = true;
  for (std::int64_t index = 2; index < count && even; ++index) {
    const auto [ai, bi] = p.offsets(index);
    even = ai == a0 + index * (a1 - a0) && bi == b0 + index * (b1 - b0);
  }
  if (even) {
    const long long stride_a = a1 - a0, stride_b = b1 - b0, stride_c = p.m * p.n;
    if constexpr (std::is_same_v<T, float>)
      cublas_require(cublasSgemmStridedBatched(handle, op_b, op_a, n, m, k, &alpha, b + b0, ldb, stride_b,
                                               a + a0, lda, stride_a, &beta, out, n, stride_c, int(count)),
                     ctx, "cublasSgemmStridedBatched");
    else
      cublas_require(cublasDgemmStridedBatched(handle, op_b, op_a, n, m, k, &alpha, b + b0, ldb, stride_b,
                                               a + a0, lda, stride_a, &beta, out, n, stride_c, int(count)),
                     ctx, "cublasDgemmStridedBatched");
    return;
  }
  for (std::int64_t index = 0; index < count; ++index) {
    const auto [ai, bi] = p.offsets(index);
    T* c = out + index * p.m * p.n;
    if constexpr (std::is_same_v<T, float>)
      cublas_require(cublasSgemm(handle, op_b, op_a, n, m, k, &alpha, b + bi, ldb, a + ai, lda, &beta, c, n),
                     ctx, "cublasSgemm");
    else
      cublas_require(cublasDgemm(handle, op_b, op_a, n, m, k, &alpha, b + bi, ldb, a + ai, lda, &beta, c, n),
                     ctx, "cublasDgemm");
  }
}
#endif

}  // namespace fluidk::ops::detail
