// kernels/k_attn.cu: CUDA twin of k_attn_ref (k_ref.h), flash-style, one
// kernel written over the storage type (float or half; FP32 math).
//
// A block runs 8 warps, one query row each, of one (b, h). The block walks
// the keys in tiles of 32: Kt's [d, 32] slab and V's [32, dv] slab are
// staged in shared memory (read once per 8 rows), lane j scores key j of
// the tile against the warp's row (held, pre-scaled, in shared memory), and
// the warp keeps an online softmax: running max m, running sum l, and the
// output accumulator (dv / 32 columns per lane) rescaled by exp(m_old -
// m_new) when the max grows. Nothing of size Sk is ever stored, so memory
// traffic is Q, K, V and O once per 8 query rows.
//
// Undefined rows follow the unfused graph: a NaN or +inf score, or every
// score -inf (l stays 0), gives NaN, or 0 with nan_zero; no keys at all
// gives 0 (an empty product).
//
// FP16 with d == dv == 64 or 128 (BERT, ViT, GPT-2 heads) takes a second
// kernel on tensor cores (tc_kernel below, nvcuda::wmma 16x16x16 half
// fragments with float accumulators): 4 warps of 16 query rows each, tiles
// of 32 keys; S = Q Kt and O += P V on tensor cores, the same online
// softmax and undefined-row rules in FP32 between them.
//
// Rows at any stride (k_attn_args' q_ss, k_sd/k_sk, v_ss, o_ss; the
// launcher fills the packed defaults, so the kernels see them all set):
// the [B, S, H, D] layout the projections write is read and written in
// place. Kt stored key-major (K's [Sk, D] rows: k_sk != 1) is staged by
// rows of K, consecutive threads along a key's head dims, and the
// tensor-core kernel keeps it as [keys][HD] in shared memory, read as a
// col_major matrix_b (the same bytes are Kt column by column).
#include <math.h>
#include <mma.h>

#include <type_traits>

#include "kernels/k_cuda_common.cuh"

namespace {

constexpr int WARPS = 8;  // query rows per block
constexpr int TILE = 32;  // keys per tile: one per lane

// Both kernels: the (b, h) slab of every operand, and the score scale (the
// divisor, when the graph computes one, read on the device: it may be a
// value folded per signature).
template <class T>
__device__ __forceinline__ float slab_of(int64_t b, int64_t h, const k_attn_args &a, const T *&q, const T *&kt,
                                         const T *&v, T *&o, const T *&mask, const void *divisor, bool div_half) {
  q += b * a.q_sb + h * a.q_sh;
  kt += b * a.k_sb + h * a.k_sh;
  v += b * a.v_sb + h * a.v_sh;
  o += b * a.o_sb + h * a.o_sh;
  if (mask) mask += b * a.m_sb + h * a.m_sh;
  float scale = a.scale;
  if (divisor) scale /= div_half ? __half2float(*(const __half *)divisor) : *(const float *)divisor;
  return scale;
}

template <class T, int DPL>  // DPL: head columns per lane (head sizes up to 32 * DPL)
__global__ void __launch_bounds__(WARPS * 32)
    attn_kernel(T *o, const T *q, const T *kt, const T *v, const T *mask, const void *divisor,
                bool div_half, k_attn_args a) {
  constexpr int HD = 32 * DPL;
  __shared__ float qs[WARPS][HD];
  __shared__ float ks[HD][TILE + 1];  // +1: the staging writes go down columns
  __shared__ float vs[TILE][HD];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t bh = blockIdx.x, b = bh / a.h, h = bh - b * a.h;
  const int64_t i = (int64_t)blockIdx.y * WARPS + warp;
  const bool row_ok = i < a.sq;
  const float scale = slab_of(b, h, a, q, kt, v, o, mask, divisor, div_half);
  for (int d = lane; d < HD; d += 32)
    qs[warp][d] = row_ok && d < a.d ? k_ld(q[i * a.q_ss + d]) * scale : 0.0f;
  float m = -INFINITY, l = 0.0f, acc[DPL];
  for (int c = 0; c < DPL; c++) acc[c] = 0.0f;
  bool bad = false;
  for (int64_t k0 = 0; k0 < a.sk; k0 += TILE) {
    __syncthreads();  // the previous tile is consumed (and qs written, the first time)
    if (a.k_sk == 1) {
      for (int t = threadIdx.x; t < HD * TILE; t += WARPS * 32) {
        int d = t / TILE, j = t - d * TILE;  // consecutive threads: consecutive keys
        ks[d][j] = d < a.d && k0 + j < a.sk ? k_ld(kt[d * a.k_sd + k0 + j]) : 0.0f;
      }
    } else {  // key-major: consecutive threads along one key's head dims
      for (int t = threadIdx.x; t < HD * TILE; t += WARPS * 32) {
        int j = t / HD, d = t - j * HD;
        ks[d][j] = d < a.d && k0 + j < a.sk ? k_ld(kt[d * a.k_sd + (k0 + j) * a.k_sk]) : 0.0f;
      }
    }
    for (int t = threadIdx.x; t < HD * TILE; t += WARPS * 32) {
      int j = t / HD, c = t - j * HD;
      vs[j][c] = c < a.dv && k0 + j < a.sk ? k_ld(v[(k0 + j) * a.v_ss + c]) : 0.0f;
    }
    __syncthreads();
    if (!row_ok) continue;  // the whole warp: no shuffles skipped by half of it
    const int64_t key = k0 + lane;
    float s = -INFINITY;
    if (key < a.sk) {
      float dot = 0.0f;
#pragma unroll 8
      for (int d = 0; d < HD; d++) dot = fmaf(qs[warp][d], ks[d][lane], dot);
      s = dot;
      if (mask) s += k_ld(mask[i * a.m_sq + key * a.m_sk]);
      if (isnan(s) || s == INFINITY) bad = true;
    }
    float m_new = fmaxf(m, k_warp_max(s));
    float p = s == -INFINITY || isnan(s) ? 0.0f : expf(s - m_new);
    float alpha = m == -INFINITY ? 0.0f : expf(m - m_new);
    l = l * alpha + k_warp_sum(p);
    for (int c = 0; c < DPL; c++) acc[c] *= alpha;
    for (int j = 0; j < TILE; j++) {
      float pj = __shfl_sync(0xffffffffu, p, j);
      for (int c = 0; c < DPL; c++) acc[c] = fmaf(pj, vs[j][lane + 32 * c], acc[c]);
    }
    m = m_new;
  }
  if (!row_ok) return;
  // no keys at all: an empty product, zeros as the unfused MatMul gives
  bad = a.sk > 0 && (__any_sync(0xffffffffu, bad) || !(l > 0.0f));
  const float fill = a.nan_zero ? 0.0f : NAN, inv = bad || a.sk == 0 ? 0.0f : 1.0f / l;
  for (int c = 0; c < DPL; c++) {
    int col = lane + 32 * c;
    if (col < a.dv) o[i * a.o_ss + col] = k_st<T>(bad ? fill : acc[c] * inv);
  }
}

// --- FP16 on tensor cores (d == dv == HD, HD 64 or 128).
//
// A block: TC_WARPS warps, warp w owning query rows q0 + 16w .. q0 + 16w +
// 15 of one (b, h). Q's 16 x HD slab of each warp lives in matrix_a
// fragments for the whole kernel, O in HD/16 accumulator fragments. Per
// tile of TC_BK keys the block stages Kt's [HD, TC_BK] slab and V's [TC_BK,
// HD] slab in shared memory (zeros past Sk); each warp then
//   1. S = Q Kt on tensor cores (float), stored to its own 16 x TC_BK
//      shared scratch;
//   2. scales, adds the mask and runs the online softmax there, two lanes
//      per row (16 columns each, combined by one shuffle): running max m,
//      running sum l (of the float p), alpha = exp(m_old - m_new);
//   3. writes P as half to its shared P tile and alpha per row;
//   4. rescales O by alpha and adds P V on tensor cores.
// The accumulator's element -> (row, column) mapping is unspecified by
// wmma, so step 4 finds each element's row by loading a 16 x 16 table of
// row numbers into a fragment of the same type once (rowof below): the
// mapping is fixed for a fragment type, so element i of every O fragment
// sits on row rowof.x[i].
//
// The score is (Q Kt in float) * scale + mask, which is the reference's
// rounding order (the CUDA-core kernel pre-scales Q instead). P rounded to
// half for the second product is the only error beyond the output's own
// rounding: at most 2^-11 relative per weight, so 2^-11 * max|v| on O.
// Rows past Sq compute on zeros and are never written; padding keys past Sk
// score -inf and their V rows are zeros (0 * garbage could be NaN).
constexpr int TC_WARPS = 4;
constexpr int TC_BQ = 16 * TC_WARPS;  // query rows per block
constexpr int TC_BK = 32;             // keys per tile
constexpr int TC_PADH = 8;            // half padding per shared row: wmma ldm stays a multiple of 8
constexpr int TC_PADF = 4;            // float padding per row: ldm a multiple of 4

// Shared memory of one block, carved from one array; every piece starts on
// 128 bytes (wmma wants 256-bit aligned fragment pointers).
template <int HD>
struct tc_smem {
  static constexpr int LDK = TC_BK + TC_PADH;   // Kt slab [HD][LDK] half
  static constexpr int LDKM = HD + TC_PADH;     // or, key-major, K slab [TC_BK][LDKM] half
  static constexpr int LDV = HD + TC_PADH;      // V slab [TC_BK][LDV] half
  static constexpr int LDQ = HD + TC_PADH;      // Q staging [TC_BQ][LDQ] half, over Kt and V
  static constexpr int LDS = TC_BK + TC_PADF;   // per warp S scratch [16][LDS] float
  static constexpr int LDP = TC_BK + TC_PADH;   // per warp P tile [16][LDP] half
  static constexpr int up(int n) { return (n + 127) / 128 * 128; }
  static constexpr int K_OFF = 0;
  static constexpr int K_BYTES = up(HD * LDK * 2) > up(TC_BK * LDKM * 2) ? up(HD * LDK * 2)
                                                                          : up(TC_BK * LDKM * 2);
  static constexpr int V_OFF = K_OFF + K_BYTES;
  static constexpr int KV_END = V_OFF + up(TC_BK * LDV * 2);
  static constexpr int S_OFF = KV_END > up(TC_BQ * LDQ * 2) ? KV_END : up(TC_BQ * LDQ * 2);
  static constexpr int S_WARP = up(16 * LDS * 4);
  static constexpr int P_OFF = S_OFF + TC_WARPS * S_WARP;
  static constexpr int P_WARP = up(16 * LDP * 2);
  static constexpr int A_OFF = P_OFF + TC_WARPS * P_WARP;  // alpha [TC_WARPS][16] float
  static constexpr int BYTES = A_OFF + up(TC_WARPS * 16 * 4);
};
static_assert(tc_smem<128>::BYTES <= 48 * 1024, "static shared memory past 48 KiB");
static_assert(tc_smem<64>::BYTES <= 48 * 1024, "static shared memory past 48 KiB");

// VEC: the launcher found Q, Kt and V's pointers on 16 bytes, their strides
// multiples of 8 elements and, Kt packed, Sk too, so every run of 8 halves
// along a Q or V row, along Kt's keys or (KM) along a K row starts on 16
// bytes and lies wholly inside or past Sk: staged with one 16-byte access
// each. Else one 2-byte access per element.
// KM: K key-major (k_sk != 1; with VEC, k_sd == 1): the slab is [TC_BK][LDKM]
// and S = Q Kt reads it as a col_major matrix_b.
template <int HD, bool VEC, bool KM>
__global__ void __launch_bounds__(TC_WARPS * 32)
    tc_kernel(__half *o, const __half *q, const __half *kt, const __half *v, const __half *mask,
              const void *divisor, bool div_half, k_attn_args a) {
  using namespace nvcuda;
  typedef tc_smem<HD> L;
  typedef typename std::conditional<KM, wmma::col_major, wmma::row_major>::type k_layout;
  constexpr int NF = HD / 16;  // fragments along the head
  __shared__ __align__(128) unsigned char smem[L::BYTES];
  __half *ks = reinterpret_cast<__half *>(smem + L::K_OFF);
  __half *vs = reinterpret_cast<__half *>(smem + L::V_OFF);
  __half *qs = reinterpret_cast<__half *>(smem);  // staging only, before the first tile
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float *sw = reinterpret_cast<float *>(smem + L::S_OFF + warp * L::S_WARP);
  __half *pw = reinterpret_cast<__half *>(smem + L::P_OFF + warp * L::P_WARP);
  float *alpha_w = reinterpret_cast<float *>(smem + L::A_OFF) + warp * 16;

  const int64_t bh = blockIdx.x, b = bh / a.h, h = bh - b * a.h;
  const int64_t q0 = (int64_t)blockIdx.y * TC_BQ;
  const float scale = slab_of(b, h, a, q, kt, v, o, mask, divisor, div_half);

  // Q's tile, zeros past Sq, into fragments kept for the whole kernel.
  const __half zero = __float2half(0.0f);
  const uint4 zero8 = make_uint4(0, 0, 0, 0);  // 8 halves of +0
  constexpr int NT = TC_WARPS * 32, R8 = HD / 8, K8 = TC_BK / 8;  // runs of 8 per row
  if (VEC) {
    for (int t = threadIdx.x; t < TC_BQ * R8; t += NT) {
      int r = t / R8, c = (t - r * R8) * 8;
      *reinterpret_cast<uint4 *>(qs + r * L::LDQ + c) =
          q0 + r < a.sq ? *reinterpret_cast<const uint4 *>(q + (q0 + r) * a.q_ss + c) : zero8;
    }
  } else {
    for (int t = threadIdx.x; t < TC_BQ * HD; t += NT) {
      int r = t / HD, c = t - r * HD;
      qs[r * L::LDQ + c] = q0 + r < a.sq ? q[(q0 + r) * a.q_ss + c] : zero;
    }
  }
  // the row-number table in this warp's S scratch: element i of an
  // accumulator fragment loaded from it is the row that element sits on
  for (int t = lane; t < 16 * 16; t += 32) sw[(t / 16) * L::LDS + t % 16] = (float)(t / 16);
  __syncthreads();
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> qf[NF];
  for (int f = 0; f < NF; f++) wmma::load_matrix_sync(qf[f], qs + warp * 16 * L::LDQ + f * 16, L::LDQ);
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> rowof, of[NF];
  wmma::load_matrix_sync(rowof, sw, L::LDS, wmma::mem_row_major);
  for (int f = 0; f < NF; f++) wmma::fill_fragment(of[f], 0.0f);

  // Softmax state of row r = lane / 2 of the warp, held alike by its two
  // lanes (columns c0 .. c0 + 15 of each tile are this lane's).
  const int r = lane >> 1, c0 = (lane & 1) * 16;
  const int64_t i = q0 + warp * 16 + r;
  const bool row_ok = i < a.sq;
  float m = -INFINITY, l = 0.0f;
  bool bad = false;
  for (int64_t k0 = 0; k0 < a.sk; k0 += TC_BK) {
    __syncthreads();  // the previous tile (or Q's staging, over the same bytes) is consumed
    if (VEC) {
      if (KM) {
        for (int t = threadIdx.x; t < TC_BK * R8; t += NT) {
          int j = t / R8, c = (t - j * R8) * 8;  // key k0 + j, head dims c .. c + 7
          *reinterpret_cast<uint4 *>(ks + j * L::LDKM + c) =
              k0 + j < a.sk ? *reinterpret_cast<const uint4 *>(kt + (k0 + j) * a.k_sk + c) : zero8;
        }
      } else {
        for (int t = threadIdx.x; t < HD * K8; t += NT) {
          int d = t / K8, j = (t - d * K8) * 8;  // keys k0 + j .. k0 + j + 7: all below Sk or none
          *reinterpret_cast<uint4 *>(ks + d * L::LDK + j) =
              k0 + j < a.sk ? *reinterpret_cast<const uint4 *>(kt + d * a.k_sd + k0 + j) : zero8;
        }
      }
      for (int t = threadIdx.x; t < TC_BK * R8; t += NT) {
        int j = t / R8, c = (t - j * R8) * 8;
        *reinterpret_cast<uint4 *>(vs + j * L::LDV + c) =
            k0 + j < a.sk ? *reinterpret_cast<const uint4 *>(v + (k0 + j) * a.v_ss + c) : zero8;
      }
    } else {
      if (KM) {
        for (int t = threadIdx.x; t < TC_BK * HD; t += NT) {
          int j = t / HD, d = t - j * HD;  // consecutive threads: one key's head dims
          ks[j * L::LDKM + d] = k0 + j < a.sk ? kt[d * a.k_sd + (k0 + j) * a.k_sk] : zero;
        }
      } else {
        for (int t = threadIdx.x; t < HD * TC_BK; t += NT) {
          int d = t / TC_BK, j = t - d * TC_BK;  // consecutive threads: consecutive keys
          ks[d * L::LDK + j] = k0 + j < a.sk ? kt[d * a.k_sd + k0 + j] : zero;
        }
      }
      for (int t = threadIdx.x; t < TC_BK * HD; t += NT) {
        int j = t / HD, c = t - j * HD;
        vs[j * L::LDV + c] = k0 + j < a.sk ? v[(k0 + j) * a.v_ss + c] : zero;
      }
    }
    __syncthreads();
    // 1. S = Q Kt for this warp's 16 rows
    for (int n = 0; n < TC_BK / 16; n++) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> sf;
      wmma::fill_fragment(sf, 0.0f);
      for (int f = 0; f < NF; f++) {
        // Kt's 16 x 16 block (head dims f*16.., keys n*16..): row-major in
        // the packed slab; key-major, column (key) nn at row nn of K's slab
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, k_layout> kf;
        if (KM)
          wmma::load_matrix_sync(kf, ks + n * 16 * L::LDKM + f * 16, L::LDKM);
        else
          wmma::load_matrix_sync(kf, ks + f * 16 * L::LDK + n * 16, L::LDK);
        wmma::mma_sync(sf, qf[f], kf, sf);
      }
      wmma::store_matrix_sync(sw + n * 16, sf, L::LDS, wmma::mem_row_major);
    }
    __syncwarp();
    // 2. scores and the online softmax, row r, columns c0 .. c0 + 15
    float s[16], tmax = -INFINITY;
    for (int c = 0; c < 16; c++) {
      const int64_t key = k0 + c0 + c;
      float x = -INFINITY;
      if (row_ok && key < a.sk) {
        x = sw[r * L::LDS + c0 + c] * scale;
        if (mask) x += k_ld(mask[i * a.m_sq + key * a.m_sk]);
        if (isnan(x) || x == INFINITY) bad = true;
      }
      s[c] = x;
      tmax = fmaxf(tmax, x);  // fmaxf drops NaN, as k_warp_max does
    }
    const float m_new = fmaxf(m, fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1)));
    const float alpha = m == -INFINITY ? 0.0f : expf(m - m_new);
    float psum = 0.0f;
    for (int c = 0; c < 16; c++) {
      float p = s[c] == -INFINITY || isnan(s[c]) ? 0.0f : expf(s[c] - m_new);
      psum += p;
      pw[r * L::LDP + c0 + c] = __float2half_rn(p);
    }
    l = l * alpha + psum + __shfl_xor_sync(0xffffffffu, psum, 1);
    m = m_new;
    if ((lane & 1) == 0) alpha_w[r] = alpha;
    __syncwarp();
    // 3. O = alpha O + P V
    for (int f = 0; f < NF; f++)
      for (int t = 0; t < of[f].num_elements; t++) of[f].x[t] *= alpha_w[(int)rowof.x[t]];
    for (int kk = 0; kk < TC_BK / 16; kk++) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> pf;
      wmma::load_matrix_sync(pf, pw + kk * 16, L::LDP);
      for (int f = 0; f < NF; f++) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> vf;
        wmma::load_matrix_sync(vf, vs + kk * 16 * L::LDV + f * 16, L::LDV);
        wmma::mma_sync(of[f], pf, vf, of[f]);
      }
    }
    // the next tile's first write to sw or pw comes after its __syncthreads
  }
  // O / l, through the S scratch one 16 x 16 fragment at a time; row r's
  // two lanes write 8 columns each
  // Every lane runs the shuffle: `bad || __shfl_xor_sync(...)` skipped it
  // on lanes whose row saw a NaN or +inf score, and a full-mask shuffle
  // that some lanes never reach waits for them forever (the H100 hang at
  // the first NaN/+inf case of test_tc_cases).
  const bool partner_bad = __shfl_xor_sync(0xffffffffu, (int)bad, 1) != 0;
  bad = a.sk > 0 && (bad || partner_bad || !(l > 0.0f));
  const float fill = a.nan_zero ? 0.0f : NAN, inv = bad || a.sk == 0 ? 0.0f : 1.0f / l;
  const int w0 = (lane & 1) * 8;
  for (int f = 0; f < NF; f++) {
    __syncwarp();  // the previous fragment's reads are done
    wmma::store_matrix_sync(sw, of[f], L::LDS, wmma::mem_row_major);
    __syncwarp();
    if (row_ok)
      for (int c = 0; c < 8; c++)
        o[i * a.o_ss + f * 16 + w0 + c] = __float2half_rn(bad ? fill : sw[r * L::LDS + w0 + c] * inv);
  }
}

// One of the four staging variants of tc_kernel<HD>.
template <int HD>
void tc_go(bool vec, bool km, dim3 grid, cudaStream_t stream, __half *o, const __half *q,
           const __half *kt, const __half *v, const __half *mask, const void *divisor, bool dh,
           const k_attn_args &a) {
  dim3 block(TC_WARPS * 32);
  if (vec && km)
    tc_kernel<HD, true, true><<<grid, block, 0, stream>>>(o, q, kt, v, mask, divisor, dh, a);
  else if (vec)
    tc_kernel<HD, true, false><<<grid, block, 0, stream>>>(o, q, kt, v, mask, divisor, dh, a);
  else if (km)
    tc_kernel<HD, false, true><<<grid, block, 0, stream>>>(o, q, kt, v, mask, divisor, dh, a);
  else
    tc_kernel<HD, false, false><<<grid, block, 0, stream>>>(o, q, kt, v, mask, divisor, dh, a);
}

int tc_launch(const char *kname, __half *o, const __half *q, const __half *kt, const __half *v,
              const __half *mask, const void *divisor, k_elem div_et, const k_attn_args *a,
              cudaStream_t stream, err *e) {
  int64_t rows = (a->sq + TC_BQ - 1) / TC_BQ;
  if (a->b > INT32_MAX / a->h || rows > 65535)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: %lld heads x %lld query rows exceed the grid", kname,
                   (long long)(a->b * a->h), (long long)a->sq);
  dim3 grid((unsigned)(a->b * a->h), (unsigned)rows);
  bool dh = div_et == K_F16;
  // 16-byte staging (tc_kernel's VEC) where every run of 8 halves it reads
  // is aligned: along Q and V rows, and along Kt's keys (packed: k_sk 1) or
  // K's head dims (key-major: k_sd 1)
  bool km = a->k_sk != 1;
  bool vec = k_aligned(q, 16) && k_aligned(kt, 16) && k_aligned(v, 16) &&
             (km ? a->k_sd == 1 && a->k_sk % 8 == 0 : a->sk % 8 == 0 && a->k_sd % 8 == 0);
  const int64_t strides[] = {a->q_sb, a->q_sh, a->k_sb, a->k_sh, a->v_sb, a->v_sh, a->q_ss, a->v_ss};
  for (int k = 0; k < 8; k++) vec = vec && strides[k] % 8 == 0;
  if (a->d == 64)
    tc_go<64>(vec, km, grid, stream, o, q, kt, v, mask, divisor, dh, *a);
  else
    tc_go<128>(vec, km, grid, stream, o, q, kt, v, mask, divisor, dh, *a);
  K_LAUNCH_CHECK(e, kname);
  return 0;
}

// Which FP16 attentions the tensor-core kernel takes: equal head sizes of
// 64 or 128 (its fragments tile the head exactly). The rest, and FP32, run
// on attn_kernel.
bool tc_covers(const k_attn_args *a) { return a->d == a->dv && (a->d == 64 || a->d == 128); }

template <class T>
int launch(const char *kname, T *o, const T *q, const T *kt, const T *v, const T *mask,
           const void *divisor, k_elem div_et, const k_attn_args *args, bool tensor_cores,
           cudaStream_t stream, err *e) {
  const k_attn_args packed = k_attn_packed(*args), *a = &packed;  // row strides all set
  if (a->b < 0 || a->h < 0 || a->sq < 0 || a->sk < 0 || a->d < 0 || a->dv < 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: negative size", kname);
  if (a->b == 0 || a->h == 0 || a->sq == 0 || a->dv == 0) return 0;
  if (a->d > K_ATTN_MAX_HEAD || a->dv > K_ATTN_MAX_HEAD)
    return err_set(e, ERR_UNIMPLEMENTED, "%s: head sizes %lld, %lld: at most %d supported", kname,
                   (long long)a->d, (long long)a->dv, K_ATTN_MAX_HEAD);
  if (!o || !q || !v || (!kt && a->sk && a->d))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer", kname);
  if (divisor && div_et != K_F32 && div_et != K_F16)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: the divisor must be float or half", kname);
  // FP16 with head sizes 64/64 or 128/128: tensor cores; the rest here
  if (tensor_cores && sizeof(T) == 2 && tc_covers(a))
    return tc_launch(kname, (__half *)o, (const __half *)q, (const __half *)kt, (const __half *)v,
                     (const __half *)mask, divisor, div_et, a, stream, e);
  int64_t rows = (a->sq + WARPS - 1) / WARPS;
  if (a->b > INT32_MAX / a->h || rows > 65535)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: %lld heads x %lld query rows exceed the grid", kname,
                   (long long)(a->b * a->h), (long long)a->sq);
  dim3 grid((unsigned)(a->b * a->h), (unsigned)rows);
  int hd = (int)(a->d > a->dv ? a->d : a->dv);
  bool dh = div_et == K_F16;
  if (hd <= 32)
    attn_kernel<T, 1><<<grid, WARPS * 32, 0, stream>>>(o, q, kt, v, mask, divisor, dh, *a);
  else if (hd <= 64)
    attn_kernel<T, 2><<<grid, WARPS * 32, 0, stream>>>(o, q, kt, v, mask, divisor, dh, *a);
  else
    attn_kernel<T, 4><<<grid, WARPS * 32, 0, stream>>>(o, q, kt, v, mask, divisor, dh, *a);
  K_LAUNCH_CHECK(e, kname);
  return 0;
}

int dispatch(const char *kname, void *o, const void *q, const void *kt, const void *v,
             const void *mask, const void *divisor, k_elem div_et, k_elem et, const k_attn_args *a,
             bool tensor_cores, cudaStream_t stream, err *e) {
  if (!a) return err_set(e, ERR_INVALID_ARGUMENT, "%s: no arguments", kname);
  if (et == K_F32)
    return launch(kname, (float *)o, (const float *)q, (const float *)kt, (const float *)v,
                  (const float *)mask, divisor, div_et, a, tensor_cores, stream, e);
  if (et == K_F16)
    return launch(kname, (__half *)o, (const __half *)q, (const __half *)kt, (const __half *)v,
                  (const __half *)mask, divisor, div_et, a, tensor_cores, stream, e);
  return err_set(e, ERR_INVALID_ARGUMENT, "%s: element type %d is not float or half", kname,
                 (int)et);
}

}  // namespace

extern "C" int k_attn_cuda(void *o, const void *q, const void *kt, const void *v, const void *mask,
                           const void *divisor, k_elem div_et, k_elem et, const k_attn_args *a,
                           cudaStream_t stream, err *e) {
  return dispatch("k_attn_cuda", o, q, kt, v, mask, divisor, div_et, et, a, true, stream, e);
}

extern "C" int k_attn__simt_cuda(void *o, const void *q, const void *kt, const void *v,
                                 const void *mask, const void *divisor, k_elem div_et, k_elem et,
                                 const k_attn_args *a, cudaStream_t stream, err *e) {
  return dispatch("k_attn__simt_cuda", o, q, kt, v, mask, divisor, div_et, et, a, false, stream,
                  e);
}
