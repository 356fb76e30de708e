// kernels/attn/k_attn.cu: CUDA twin of k_attn_ref (k_ref.h), flash-style, one
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
// softmax and undefined-row rules in FP32 between them. A third kernel,
// tc2_kernel (raw mma.sync, 128 query rows per block, keys staged 128 at a
// time, S and the softmax kept in registers), is k_attn_cuda's default for
// those shapes; tc_kernel stays as k_attn__tc1_cuda, and TC_DEFAULT (by
// tc_launch) switches k_attn_cuda back to it in one line.
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

// --- FP16 on mma.sync with the softmax in registers (tc2_kernel; d == dv
// == HD, HD 64 or 128). k_attn_cuda's default for these shapes; tc_kernel
// above stays reachable as k_attn__tc1_cuda (see dispatch's TC_DEFAULT).
//
// What changes against tc_kernel, for short sequences (BERT at 128 tokens
// spent most of its time in tc_kernel's shared-memory round trips and
// barriers, not in its products):
//   - 8 warps x 16 query rows = 128 rows per block, so at Sq <= 128 K and V
//     are staged once per (b, h) instead of once per 64 rows;
//   - keys staged in chunks of T2_KC = 128 (the whole key set at Sk <=
//     128: two barriers in all), then walked in steps of T2_BK = 64 whose
//     scores S never leave registers: raw mma.sync.m16n8k16, whose
//     fragment layout PTX specifies (unlike wmma's), so each lane knows the
//     (row, key) of every value it holds. Lane l holds rows g = l / 4 and g
//     + 8 of its warp, keys 2 (l % 4) + {0, 1} of every 8: four lanes per
//     row, combined by two xor-shuffles for the row max (the sums stay per
//     lane until the end: every lane of a row rescales by the same alpha);
//   - P goes from the S accumulators straight into the A operand of P V:
//     an m16n8 accumulator pair (keys 16kk .. 16kk + 15) has exactly the
//     layout of an m16k16 A fragment (FlashAttention-2's trick);
//   - operands come from shared memory through ldmatrix (.trans for Kt
//     stored packed [HD][keys] and for V, plain for K stored key-major);
//   - shared memory is dynamic (55.5 KiB at HD 64, 104.5 KiB at 128: past
//     the static 48 KiB, so the launcher raises the function's limit);
//   - a mask shared by every query row (m_sq 0) is staged with each key
//     chunk, as floats, so a score reads it from shared memory.
// Numerics and rules are tc_kernel's: the score is (Q Kt in float) * scale
// + mask, the online softmax in float (running max m, sums of the float p),
// P rounded to half for P V, undefined rows (a NaN or +inf score, or no
// weight at all) NaN or 0 with nan_zero, Sk == 0 gives 0; rows past Sq
// compute on zeros and are never written; keys past Sk score -inf and
// their K and V rows are zeros.
constexpr int T2_WARPS = 8;
constexpr int T2_BQ = 16 * T2_WARPS;  // query rows per block
constexpr int T2_KC = 128;            // keys staged per chunk
constexpr int T2_BK = 64;             // keys per softmax step, S in registers
constexpr int T2_PAD = 8;             // halves of padding per shared row: rows stay on 16 bytes
                                      // and ldmatrix's 8 row reads hit distinct banks

template <int HD, bool KM>
struct t2_smem {
  static constexpr int LDQ = HD + T2_PAD;     // Q [T2_BQ][LDQ]
  static constexpr int LDKM = HD + T2_PAD;    // key-major: K [T2_KC][LDKM]
  static constexpr int LDK = T2_KC + T2_PAD;  // packed: Kt [HD][LDK]
  static constexpr int LDV = HD + T2_PAD;     // V [T2_KC][LDV]
  static constexpr int K_OFF = T2_BQ * LDQ * 2;
  static constexpr int V_OFF = K_OFF + (KM ? T2_KC * LDKM * 2 : HD * LDK * 2);
  static constexpr int M_OFF = V_OFF + T2_KC * LDV * 2;  // a row-shared mask's chunk, as float
  static constexpr int BYTES = M_OFF + T2_KC * 4;
  static_assert(K_OFF % 16 == 0 && V_OFF % 16 == 0, "ldmatrix rows on 16 bytes");
};

__device__ __forceinline__ uint32_t t2_smem_addr(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}

// Four 8x8 half matrices; lane l names row l % 8 of matrix l / 8. Plain:
// lane t receives row t / 4, columns 2 (t % 4) + {0, 1} of each; .trans:
// rows 2 (t % 4) + {0, 1}, column t / 4.
__device__ __forceinline__ void t2_ldsm(uint32_t r[4], const __half *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(t2_smem_addr(p)));
}
__device__ __forceinline__ void t2_ldsm_t(uint32_t r[4], const __half *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(t2_smem_addr(p)));
}

// c[16x8 float] += a[16x16 half, row] b[16x8 half, col]
__device__ __forceinline__ void t2_mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t t2_pack(float lo, float hi) {
  __half2 h = __floats2half2_rn(lo, hi);  // lo in the low 16 bits: the lower column
  return *reinterpret_cast<uint32_t *>(&h);
}

// VEC and KM as tc_kernel's. O2: o on 4 bytes and its strides even, so a
// lane's two adjacent output columns go out as one __half2.
template <int HD, bool VEC, bool KM>
__global__ void __launch_bounds__(T2_WARPS * 32, HD == 64 ? 2 : 1)
    tc2_kernel(__half *o, const __half *q, const __half *kt, const __half *v, const __half *mask,
               const void *divisor, bool div_half, bool o2, k_attn_args a) {
  typedef t2_smem<HD, KM> L;
  constexpr int NF = HD / 16;       // k16 blocks along the head (S = Q Kt)
  constexpr int NO = HD / 8;        // n8 tiles along the head (O)
  constexpr int NS = T2_BK / 8;     // n8 tiles of S per step
  constexpr int NT = T2_WARPS * 32;
  constexpr int R8 = HD / 8, K8 = T2_KC / 8;  // runs of 8 halves per row
  extern __shared__ __align__(128) unsigned char t2_mem[];
  __half *qs = reinterpret_cast<__half *>(t2_mem);
  __half *ks = reinterpret_cast<__half *>(t2_mem + L::K_OFF);
  __half *vs = reinterpret_cast<__half *>(t2_mem + L::V_OFF);
  float *mrow = reinterpret_cast<float *>(t2_mem + L::M_OFF);
  // a mask whose query rows are one row (m_sq 0: the padding mask the planner proved shared, or a
  // [.., 1, Sk] one) is staged once per key chunk: the scores then read shared memory, not a global
  // load each
  const bool shared_row = mask && a.m_sq == 0;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, tig = lane & 3;

  const int64_t bh = blockIdx.x, b = bh / a.h, h = bh - b * a.h;
  const int64_t q0 = (int64_t)blockIdx.y * T2_BQ;
  const float scale = slab_of(b, h, a, q, kt, v, o, mask, divisor, div_half);
  const __half zero = __float2half(0.0f);
  const uint4 zero8 = make_uint4(0, 0, 0, 0);

  // Q's 128 rows, zeros past Sq
  if (VEC) {
    for (int t = threadIdx.x; t < T2_BQ * R8; t += NT) {
      int r = t / R8, c = (t - r * R8) * 8;
      *reinterpret_cast<uint4 *>(qs + r * L::LDQ + c) =
          q0 + r < a.sq ? *reinterpret_cast<const uint4 *>(q + (q0 + r) * a.q_ss + c) : zero8;
    }
  } else {
    for (int t = threadIdx.x; t < T2_BQ * HD; t += NT) {
      int r = t / HD, c = t - r * HD;
      qs[r * L::LDQ + c] = q0 + r < a.sq ? q[(q0 + r) * a.q_ss + c] : zero;
    }
  }
  __syncthreads();
  // A fragments of the warp's 16 rows: matrices (rows 0-7 | 8-15) x
  // (columns 0-7 | 8-15) of each k16 block, lane l naming row l % 16,
  // column 8 (l / 16)
  uint32_t qa[NF][4];
  for (int f = 0; f < NF; f++)
    t2_ldsm(qa[f], qs + (warp * 16 + (lane & 15)) * L::LDQ + f * 16 + (lane >> 4) * 8);

  const int64_t i0 = q0 + warp * 16 + g, i1 = i0 + 8;  // this lane's two rows
  const bool ok0 = i0 < a.sq, ok1 = i1 < a.sq;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;  // l: this lane's part of the sum
  bool bad0 = false, bad1 = false;
  float oacc[NO][4];
  for (int n = 0; n < NO; n++) oacc[n][0] = oacc[n][1] = oacc[n][2] = oacc[n][3] = 0.0f;

  for (int64_t k0 = 0; k0 < a.sk; k0 += T2_KC) {
    __syncthreads();  // the previous chunk is consumed
    if (VEC) {
      if (KM) {
        for (int t = threadIdx.x; t < T2_KC * R8; t += NT) {
          int j = t / R8, c = (t - j * R8) * 8;
          *reinterpret_cast<uint4 *>(ks + j * L::LDKM + c) =
              k0 + j < a.sk ? *reinterpret_cast<const uint4 *>(kt + (k0 + j) * a.k_sk + c) : zero8;
        }
      } else {
        for (int t = threadIdx.x; t < HD * K8; t += NT) {
          int d = t / K8, j = (t - d * K8) * 8;  // keys k0 + j .. + 7: all below Sk or none
          *reinterpret_cast<uint4 *>(ks + d * L::LDK + j) =
              k0 + j < a.sk ? *reinterpret_cast<const uint4 *>(kt + d * a.k_sd + k0 + j) : zero8;
        }
      }
      for (int t = threadIdx.x; t < T2_KC * R8; t += NT) {
        int j = t / R8, c = (t - j * R8) * 8;
        *reinterpret_cast<uint4 *>(vs + j * L::LDV + c) =
            k0 + j < a.sk ? *reinterpret_cast<const uint4 *>(v + (k0 + j) * a.v_ss + c) : zero8;
      }
    } else {
      if (KM) {
        for (int t = threadIdx.x; t < T2_KC * HD; t += NT) {
          int j = t / HD, d = t - j * HD;
          ks[j * L::LDKM + d] = k0 + j < a.sk ? kt[d * a.k_sd + (k0 + j) * a.k_sk] : zero;
        }
      } else {
        for (int t = threadIdx.x; t < HD * T2_KC; t += NT) {
          int d = t / T2_KC, j = t - d * T2_KC;
          ks[d * L::LDK + j] = k0 + j < a.sk ? kt[d * a.k_sd + k0 + j] : zero;
        }
      }
      for (int t = threadIdx.x; t < T2_KC * HD; t += NT) {
        int j = t / HD, c = t - j * HD;
        vs[j * L::LDV + c] = k0 + j < a.sk ? v[(k0 + j) * a.v_ss + c] : zero;
      }
    }
    if (shared_row)
      for (int t = threadIdx.x; t < T2_KC; t += NT) mrow[t] = k0 + t < a.sk ? k_ld(mask[(k0 + t) * a.m_sk]) : 0.0f;
    __syncthreads();
    for (int kb = 0; kb < T2_KC && k0 + kb < a.sk; kb += T2_BK) {  // uniform over the block
      // 1. S = Q Kt, 16 rows x 64 keys: n8 tiles j and j + 1 per ldmatrix
      float sacc[NS][4];
      for (int j = 0; j < NS; j++) sacc[j][0] = sacc[j][1] = sacc[j][2] = sacc[j][3] = 0.0f;
#pragma unroll
      for (int j = 0; j < NS; j += 2) {
#pragma unroll
        for (int f = 0; f < NF; f++) {
          uint32_t kb4[4];
          if (KM)  // K [key][d]: matrices (keys 8j | 8j+8) x (dims 16f | 16f+8), plain
            t2_ldsm(kb4, ks + (kb + 8 * j + (lane & 7) + (lane >> 4) * 8) * L::LDKM + f * 16 +
                             ((lane >> 3) & 1) * 8);
          else  // Kt [d][key]: the same matrices stored transposed
            t2_ldsm_t(kb4, ks + (f * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * L::LDK + kb +
                               8 * j + (lane >> 4) * 8);
          t2_mma(sacc[j], qa[f], kb4[0], kb4[1]);
          t2_mma(sacc[j + 1], qa[f], kb4[2], kb4[3]);
        }
      }
      // 2. scores: sacc[j][0, 1] are row i0, keys kb + 8j + 2 tig + {0, 1};
      // [2, 3] the same keys of row i1
      float tmax0 = -INFINITY, tmax1 = -INFINITY;
#pragma unroll
      for (int j = 0; j < NS; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const int64_t key = k0 + kb + 8 * j + 2 * tig + (e & 1), i = e < 2 ? i0 : i1;
          float x = -INFINITY;
          if ((e < 2 ? ok0 : ok1) && key < a.sk) {
            x = sacc[j][e] * scale;
            if (shared_row) x += mrow[kb + 8 * j + 2 * tig + (e & 1)];
            else if (mask) x += k_ld(mask[i * a.m_sq + key * a.m_sk]);
            if (isnan(x) || x == INFINITY) (e < 2 ? bad0 : bad1) = true;
          }
          sacc[j][e] = x;
          if (e < 2)
            tmax0 = fmaxf(tmax0, x);  // fmaxf drops NaN, as k_warp_max does
          else
            tmax1 = fmaxf(tmax1, x);
        }
      // the row's four lanes (xor 1, 2), every lane shuffling
      tmax0 = fmaxf(tmax0, __shfl_xor_sync(0xffffffffu, tmax0, 1));
      tmax1 = fmaxf(tmax1, __shfl_xor_sync(0xffffffffu, tmax1, 1));
      tmax0 = fmaxf(tmax0, __shfl_xor_sync(0xffffffffu, tmax0, 2));
      tmax1 = fmaxf(tmax1, __shfl_xor_sync(0xffffffffu, tmax1, 2));
      const float mn0 = fmaxf(m0, tmax0), mn1 = fmaxf(m1, tmax1);
      // __expf (ex2.approx, ~2 ulp) where expf's exact range handling costs a dozen instructions per
      // score: the arguments are <= 0 here, the weights are rounded to half for P V anyway
      const float al0 = m0 == -INFINITY ? 0.0f : __expf(m0 - mn0);
      const float al1 = m1 == -INFINITY ? 0.0f : __expf(m1 - mn1);
      m0 = mn0, m1 = mn1;
      float ps0 = 0.0f, ps1 = 0.0f;
#pragma unroll
      for (int j = 0; j < NS; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const float x = sacc[j][e];
          const float p = x == -INFINITY || isnan(x) ? 0.0f : __expf(x - (e < 2 ? mn0 : mn1));
          sacc[j][e] = p;
          if (e < 2)
            ps0 += p;
          else
            ps1 += p;
        }
      l0 = l0 * al0 + ps0;
      l1 = l1 * al1 + ps1;
#pragma unroll
      for (int n = 0; n < NO; n++) {
        oacc[n][0] *= al0, oacc[n][1] *= al0;
        oacc[n][2] *= al1, oacc[n][3] *= al1;
      }
      // 3. O += P V: P's k16 block kk is the accumulator pair (2kk, 2kk + 1)
#pragma unroll
      for (int kk = 0; kk < T2_BK / 16; kk++) {
        uint32_t pa[4] = {t2_pack(sacc[2 * kk][0], sacc[2 * kk][1]),
                          t2_pack(sacc[2 * kk][2], sacc[2 * kk][3]),
                          t2_pack(sacc[2 * kk + 1][0], sacc[2 * kk + 1][1]),
                          t2_pack(sacc[2 * kk + 1][2], sacc[2 * kk + 1][3])};
#pragma unroll
        for (int n = 0; n < NO; n += 2) {
          // V [key][c]: matrices (keys 16kk | 16kk+8) x (columns 8n | 8n+8), .trans
          uint32_t vb[4];
          t2_ldsm_t(vb, vs + (kb + 16 * kk + (lane & 7) + ((lane >> 3) & 1) * 8) * L::LDV + 8 * n +
                            (lane >> 4) * 8);
          t2_mma(oacc[n], pa, vb[0], vb[1]);
          t2_mma(oacc[n + 1], pa, vb[2], vb[3]);
        }
      }
    }
  }
  // the row's sum and flags over its four lanes, every lane shuffling
  l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
  l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
  int fl = (bad0 ? 1 : 0) | (bad1 ? 2 : 0);
  fl |= __shfl_xor_sync(0xffffffffu, fl, 1);
  fl |= __shfl_xor_sync(0xffffffffu, fl, 2);
  const bool nb0 = a.sk > 0 && ((fl & 1) || !(l0 > 0.0f));
  const bool nb1 = a.sk > 0 && ((fl & 2) || !(l1 > 0.0f));
  const float fill = a.nan_zero ? 0.0f : NAN;
  const float inv0 = nb0 || a.sk == 0 ? 0.0f : 1.0f / l0, inv1 = nb1 || a.sk == 0 ? 0.0f : 1.0f / l1;
#pragma unroll
  for (int n = 0; n < NO; n++) {
    const int col = 8 * n + 2 * tig;
    const float x0 = nb0 ? fill : oacc[n][0] * inv0, y0 = nb0 ? fill : oacc[n][1] * inv0;
    const float x1 = nb1 ? fill : oacc[n][2] * inv1, y1 = nb1 ? fill : oacc[n][3] * inv1;
    if (o2) {
      if (ok0) *reinterpret_cast<__half2 *>(o + i0 * a.o_ss + col) = __floats2half2_rn(x0, y0);
      if (ok1) *reinterpret_cast<__half2 *>(o + i1 * a.o_ss + col) = __floats2half2_rn(x1, y1);
    } else {
      if (ok0) o[i0 * a.o_ss + col] = __float2half_rn(x0), o[i0 * a.o_ss + col + 1] = __float2half_rn(y0);
      if (ok1) o[i1 * a.o_ss + col] = __float2half_rn(x1), o[i1 * a.o_ss + col + 1] = __float2half_rn(y1);
    }
  }
}

template <int HD, bool VEC, bool KM>
cudaError_t tc2_go1(dim3 grid, cudaStream_t stream, __half *o, const __half *q, const __half *kt,
                    const __half *v, const __half *mask, const void *divisor, bool dh, bool o2,
                    const k_attn_args &a) {
  constexpr int bytes = t2_smem<HD, KM>::BYTES;
  // past the static 48 KiB a kernel must opt in; a host-side attribute, so
  // allowed while a stream is being captured
  cudaError_t rc = cudaFuncSetAttribute(tc2_kernel<HD, VEC, KM>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (rc != cudaSuccess) return rc;
  tc2_kernel<HD, VEC, KM><<<grid, T2_WARPS * 32, bytes, stream>>>(o, q, kt, v, mask, divisor, dh, o2, a);
  return cudaSuccess;
}

template <int HD>
cudaError_t tc2_go(bool vec, bool km, dim3 grid, cudaStream_t stream, __half *o, const __half *q,
                   const __half *kt, const __half *v, const __half *mask, const void *divisor,
                   bool dh, bool o2, const k_attn_args &a) {
  if (vec && km) return tc2_go1<HD, true, true>(grid, stream, o, q, kt, v, mask, divisor, dh, o2, a);
  if (vec) return tc2_go1<HD, true, false>(grid, stream, o, q, kt, v, mask, divisor, dh, o2, a);
  if (km) return tc2_go1<HD, false, true>(grid, stream, o, q, kt, v, mask, divisor, dh, o2, a);
  return tc2_go1<HD, false, false>(grid, stream, o, q, kt, v, mask, divisor, dh, o2, a);
}

// Which kernel runs an attention: the CUDA-core one, or for the shapes
// tc_covers takes, tc_kernel (TC1) or tc2_kernel (TC2).
enum path { SIMT, TC1, TC2 };

// k_attn_cuda's tensor-core kernel. The one line to switch back to
// tc_kernel (TC1) should tc2_kernel lose or fail on a device.
constexpr path TC_DEFAULT = TC2;

int tc_launch(const char *kname, path which, __half *o, const __half *q, const __half *kt,
              const __half *v, const __half *mask, const void *divisor, k_elem div_et,
              const k_attn_args *a, cudaStream_t stream, err *e) {
  const int bq = which == TC2 ? T2_BQ : TC_BQ;
  int64_t rows = (a->sq + bq - 1) / bq;
  if (a->b > INT32_MAX / a->h || rows > 65535)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: %lld heads x %lld query rows exceed the grid", kname,
                   (long long)(a->b * a->h), (long long)a->sq);
  dim3 grid((unsigned)(a->b * a->h), (unsigned)rows);
  bool dh = div_et == K_F16;
  // 16-byte staging (the kernels' VEC) where every run of 8 halves they
  // read is aligned: along Q and V rows, and along Kt's keys (packed: k_sk
  // 1) or K's head dims (key-major: k_sd 1)
  bool km = a->k_sk != 1;
  bool vec = k_aligned(q, 16) && k_aligned(kt, 16) && k_aligned(v, 16) &&
             (km ? a->k_sd == 1 && a->k_sk % 8 == 0 : a->sk % 8 == 0 && a->k_sd % 8 == 0);
  const int64_t strides[] = {a->q_sb, a->q_sh, a->k_sb, a->k_sh, a->v_sb, a->v_sh, a->q_ss, a->v_ss};
  for (int k = 0; k < 8; k++) vec = vec && strides[k] % 8 == 0;
  if (which == TC2) {
    // a lane's two adjacent output columns as one __half2
    bool o2 = k_aligned(o, 4) && a->o_sb % 2 == 0 && a->o_sh % 2 == 0 && a->o_ss % 2 == 0;
    if (a->d == 64)
      K_CUDA_TRY(e, kname, (tc2_go<64>(vec, km, grid, stream, o, q, kt, v, mask, divisor, dh, o2, *a)));
    else
      K_CUDA_TRY(e, kname, (tc2_go<128>(vec, km, grid, stream, o, q, kt, v, mask, divisor, dh, o2, *a)));
  } else if (a->d == 64) {
    tc_go<64>(vec, km, grid, stream, o, q, kt, v, mask, divisor, dh, *a);
  } else {
    tc_go<128>(vec, km, grid, stream, o, q, kt, v, mask, divisor, dh, *a);
  }
  K_LAUNCH_CHECK(e, kname);
  return 0;
}

// Which FP16 attentions the tensor-core kernel takes: equal head sizes of
// 64 or 128 (its fragments tile the head exactly). The rest, and FP32, run
// on attn_kernel.
bool tc_covers(const k_attn_args *a) { return a->d == a->dv && (a->d == 64 || a->d == 128); }

template <class T>
int launch(const char *kname, T *o, const T *q, const T *kt, const T *v, const T *mask,
           const void *divisor, k_elem div_et, const k_attn_args *args, path which,
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
  if (which != SIMT && sizeof(T) == 2 && tc_covers(a))
    return tc_launch(kname, which, (__half *)o, (const __half *)q, (const __half *)kt, (const __half *)v,
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
             path which, cudaStream_t stream, err *e) {
  if (!a) return err_set(e, ERR_INVALID_ARGUMENT, "%s: no arguments", kname);
  if (et == K_F32)
    return launch(kname, (float *)o, (const float *)q, (const float *)kt, (const float *)v,
                  (const float *)mask, divisor, div_et, a, which, stream, e);
  if (et == K_F16)
    return launch(kname, (__half *)o, (const __half *)q, (const __half *)kt, (const __half *)v,
                  (const __half *)mask, divisor, div_et, a, which, stream, e);
  return err_set(e, ERR_INVALID_ARGUMENT, "%s: element type %d is not float or half", kname,
                 (int)et);
}

}  // namespace

extern "C" int k_attn_cuda(void *o, const void *q, const void *kt, const void *v, const void *mask,
                           const void *divisor, k_elem div_et, k_elem et, const k_attn_args *a,
                           cudaStream_t stream, err *e) {
  return dispatch("k_attn_cuda", o, q, kt, v, mask, divisor, div_et, et, a, TC_DEFAULT, stream, e);
}

extern "C" int k_attn__simt_cuda(void *o, const void *q, const void *kt, const void *v,
                                 const void *mask, const void *divisor, k_elem div_et, k_elem et,
                                 const k_attn_args *a, cudaStream_t stream, err *e) {
  return dispatch("k_attn__simt_cuda", o, q, kt, v, mask, divisor, div_et, et, a, SIMT, stream,
                  e);
}

extern "C" int k_attn__tc1_cuda(void *o, const void *q, const void *kt, const void *v,
                                const void *mask, const void *divisor, k_elem div_et, k_elem et,
                                const k_attn_args *a, cudaStream_t stream, err *e) {
  return dispatch("k_attn__tc1_cuda", o, q, kt, v, mask, divisor, div_et, et, a, TC1, stream, e);
}

extern "C" int k_attn__tc2_cuda(void *o, const void *q, const void *kt, const void *v,
                                const void *mask, const void *divisor, k_elem div_et, k_elem et,
                                const k_attn_args *a, cudaStream_t stream, err *e) {
  return dispatch("k_attn__tc2_cuda", o, q, kt, v, mask, divisor, div_et, et, a, TC2, stream, e);
}
