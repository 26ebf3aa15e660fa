"""C source of the fused CPU rotation, compiled on first use by :mod:`posenc.rope.kernels.cpu`.

Kept as a Python string so it ships inside the package with no build step at install time.

One call rotates q and k in a single pass each. Work is split into units of ``(batch, block of
BLOCK_S positions)``; a unit visits every head of q and then of k for its positions, so the unit's
slice of the cos/sin tables (BLOCK_S x rotary_dim/2 floats each) stays in L1 while the heads stream
through. Threads (POSIX) take contiguous ranges of units.

float16 uses the compiler's ``_Float16`` (hardware conversions where the CPU has them) and falls back
to exact bit-level conversions where the compiler lacks it (forced with ``-DPOSENC_NO_FLOAT16``, which
the tests do to check that fallback too).

Numerics match :func:`posenc.rope.apply.rotate_reference` bit for bit: bf16/fp16 are widened to
float32, every product and difference is rounded separately (the file is compiled with
``-ffp-contract=off -fno-tree-slp-vectorize``, so no fused multiply-adds), and the result is rounded to the storage type once
with round-to-nearest-even, as ``Tensor.to`` does.
"""

SOURCE = r"""
#include <stdint.h>
#include <string.h>
#include <pthread.h>

#define BLOCK_S 16
#define MAX_THREADS 64

enum { DT_F32 = 0, DT_BF16 = 1, DT_F16 = 2, DT_F64 = 3 };

static inline float bf16_load(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t bf16_store(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t quiet_nan = (u >> 16) | 0x40u;
    return (uint16_t)(((u & 0x7fffffffu) > 0x7f800000u) ? quiet_nan : rounded);
}

#if defined(__FLT16_MAX__) && !defined(POSENC_NO_FLOAT16)
typedef _Float16 half_t;
static inline float f16_load(half_t h) { return (float)h; }
static inline half_t f16_store(float f) { return (half_t)f; }
#else
typedef uint16_t half_t;
static inline float f16_load(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, u;
    if (exp == 0x1fu) {
        u = sign | 0x7f800000u | (man << 13);
    } else if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else {
            int e = -1;
            do { e++; man <<= 1; } while (!(man & 0x400u));
            u = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ffu) << 13);
        }
    } else {
        u = sign | ((exp + 112u) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline uint16_t f16_store(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) {
        float magnitude;
        memcpy(&magnitude, &a, 4);
        magnitude += 0.5f;
        uint32_t m;
        memcpy(&m, &magnitude, 4);
        return (uint16_t)(sign | (m - 0x3f000000u));
    }
    uint32_t rounded = a + 0xc8000fffu + ((a >> 13) & 1u);
    return (uint16_t)(sign | (rounded >> 13));
}
#endif

#define ID_LOAD(v) (v)
#define ID_STORE(v) (v)

/* One head vector: rotate its first r features, copy the rest when writing elsewhere. */
#define DEFINE_ROWS(SUFFIX, T, ACC, LOAD, STORE)                                                     \
static void row_inplace_##SUFFIX(T *restrict x, const ACC *restrict c, const ACC *restrict s,       \
                                 int64_t r, int interleaved, ACC sign) {                            \
    int64_t h = r / 2, i;                                                                            \
    if (!interleaved) {                                                                              \
        for (i = 0; i < h; i++) {                                                                    \
            ACC a = LOAD(x[i]), b = LOAD(x[i + h]), cc = c[i], ss = sign * s[i];                     \
            x[i] = STORE(a * cc - b * ss);                                                           \
            x[i + h] = STORE(a * ss + b * cc);                                                       \
        }                                                                                            \
    } else {                                                                                         \
        for (i = 0; i < h; i++) {                                                                    \
            ACC a = LOAD(x[2 * i]), b = LOAD(x[2 * i + 1]), cc = c[i], ss = sign * s[i];             \
            x[2 * i] = STORE(a * cc - b * ss);                                                       \
            x[2 * i + 1] = STORE(a * ss + b * cc);                                                   \
        }                                                                                            \
    }                                                                                                \
}                                                                                                    \
static void row_copy_##SUFFIX(const T *restrict x, T *restrict y, const ACC *restrict c,            \
                              const ACC *restrict s, int64_t r, int64_t d, int interleaved,          \
                              ACC sign) {                                                            \
    int64_t h = r / 2, i;                                                                            \
    if (!interleaved) {                                                                              \
        for (i = 0; i < h; i++) {                                                                    \
            ACC a = LOAD(x[i]), b = LOAD(x[i + h]), cc = c[i], ss = sign * s[i];                     \
            y[i] = STORE(a * cc - b * ss);                                                           \
            y[i + h] = STORE(a * ss + b * cc);                                                       \
        }                                                                                            \
    } else {                                                                                         \
        for (i = 0; i < h; i++) {                                                                    \
            ACC a = LOAD(x[2 * i]), b = LOAD(x[2 * i + 1]), cc = c[i], ss = sign * s[i];             \
            y[2 * i] = STORE(a * cc - b * ss);                                                       \
            y[2 * i + 1] = STORE(a * ss + b * cc);                                                   \
        }                                                                                            \
    }                                                                                                \
    if (d > r) memcpy(y + r, x + r, (size_t)(d - r) * sizeof(T));                                    \
}

DEFINE_ROWS(f32, float, float, ID_LOAD, ID_STORE)
DEFINE_ROWS(f64, double, double, ID_LOAD, ID_STORE)
DEFINE_ROWS(bf16, uint16_t, float, bf16_load, bf16_store)
DEFINE_ROWS(f16, half_t, float, f16_load, f16_store)

typedef struct {
    char *x;            /* input, bytes */
    char *y;            /* output, bytes; equal to x for in-place */
    int64_t heads;
    int64_t xs[3];      /* element strides of dims batch, heads, seq */
    int64_t ys[3];
} operand;

typedef struct {
    operand op[2];
    const char *cos, *sin;  /* tables of ACC elements */
    int64_t cs_b, cs_s;     /* element strides of the tables (cs_b may be 0) */
    const int64_t *pos;     /* optional row indices into the tables, or NULL */
    int64_t ps_b, ps_s;
    int64_t seq, d, r;
    int interleaved, dtype;
    double sign;
    int64_t unit_begin, unit_end;
} job;

static void run_units(const job *j) {
    size_t es = j->dtype == DT_F64 ? 8 : (j->dtype == DT_F32 ? 4 : 2);
    size_t cs = j->dtype == DT_F64 ? 8 : 4;
    int64_t blocks = (j->seq + BLOCK_S - 1) / BLOCK_S;
    for (int64_t u = j->unit_begin; u < j->unit_end; u++) {
        int64_t b = u / blocks, s0 = (u % blocks) * BLOCK_S;
        int64_t s1 = s0 + BLOCK_S < j->seq ? s0 + BLOCK_S : j->seq;
        for (int t = 0; t < 2; t++) {
            const operand *o = &j->op[t];
            for (int64_t hd = 0; hd < o->heads; hd++) {
                for (int64_t s = s0; s < s1; s++) {
                    int64_t row = j->pos ? j->pos[b * j->ps_b + s * j->ps_s] : s;
                    const char *c = j->cos + (size_t)(b * j->cs_b + row * j->cs_s) * cs;
                    const char *sn = j->sin + (size_t)(b * j->cs_b + row * j->cs_s) * cs;
                    char *x = o->x + (size_t)(b * o->xs[0] + hd * o->xs[1] + s * o->xs[2]) * es;
                    char *y = o->y + (size_t)(b * o->ys[0] + hd * o->ys[1] + s * o->ys[2]) * es;
                    int inplace = x == y;
                    switch (j->dtype) {
                    case DT_F32:
                        if (inplace) row_inplace_f32((float *)x, (const float *)c, (const float *)sn, j->r, j->interleaved, (float)j->sign);
                        else row_copy_f32((const float *)x, (float *)y, (const float *)c, (const float *)sn, j->r, j->d, j->interleaved, (float)j->sign);
                        break;
                    case DT_F64:
                        if (inplace) row_inplace_f64((double *)x, (const double *)c, (const double *)sn, j->r, j->interleaved, j->sign);
                        else row_copy_f64((const double *)x, (double *)y, (const double *)c, (const double *)sn, j->r, j->d, j->interleaved, j->sign);
                        break;
                    case DT_BF16:
                        if (inplace) row_inplace_bf16((uint16_t *)x, (const float *)c, (const float *)sn, j->r, j->interleaved, (float)j->sign);
                        else row_copy_bf16((const uint16_t *)x, (uint16_t *)y, (const float *)c, (const float *)sn, j->r, j->d, j->interleaved, (float)j->sign);
                        break;
                    default:
                        if (inplace) row_inplace_f16((half_t *)x, (const float *)c, (const float *)sn, j->r, j->interleaved, (float)j->sign);
                        else row_copy_f16((const half_t *)x, (half_t *)y, (const float *)c, (const float *)sn, j->r, j->d, j->interleaved, (float)j->sign);
                    }
                }
            }
        }
    }
}

static void *thread_main(void *arg) {
    run_units((const job *)arg);
    return NULL;
}

/* All arguments travel in one int64 array (pointers included), so that a call from Python through
   ctypes converts one argument instead of twenty-five: at decode sizes that conversion is most of
   the cost. Layout (element strides, tables' batch stride 0 when shared, pos 0 when absent):
     0 q_in  1 q_out  2 q_heads  3-5 q_in strides (batch, heads, seq)  6-8 q_out strides
     9 k_in 10 k_out 11 k_heads 12-14 k_in strides                    15-17 k_out strides
    18 cos  19 sin   20 cos/sin batch stride  21 cos/sin row stride
    22 positions     23 positions batch stride  24 positions seq stride
    25 batch 26 seq  27 head_dim  28 rotary_dim  29 interleaved  30 dtype code  31 inverse
    32 threads
   Returns the number of threads that could not be started (their share ran on the calling thread,
   so the result is complete either way). */
int posenc_rope(const int64_t *a) {
    void *qx = (void *)(intptr_t)a[0], *qy = (void *)(intptr_t)a[1];
    void *kx = (void *)(intptr_t)a[9], *ky = (void *)(intptr_t)a[10];
    int64_t q_heads = a[2], k_heads = a[11];
    const int64_t *q_xs = a + 3, *q_ys = a + 6, *k_xs = a + 12, *k_ys = a + 15;
    const void *cos = (const void *)(intptr_t)a[18], *sin = (const void *)(intptr_t)a[19];
    int64_t cs_b = a[20], cs_s = a[21];
    const int64_t *pos = (const int64_t *)(intptr_t)a[22];
    int64_t ps_b = a[23], ps_s = a[24], batch = a[25], seq = a[26], d = a[27], r = a[28];
    int interleaved = (int)a[29], dtype = (int)a[30];
    double sign = a[31] ? -1.0 : 1.0;
    int threads = (int)a[32];
    job base;
    memset(&base, 0, sizeof base);
    base.op[0].x = (char *)qx; base.op[0].y = (char *)qy; base.op[0].heads = q_heads;
    base.op[1].x = (char *)kx; base.op[1].y = (char *)ky; base.op[1].heads = k_heads;
    for (int i = 0; i < 3; i++) {
        base.op[0].xs[i] = q_xs[i]; base.op[0].ys[i] = q_ys[i];
        base.op[1].xs[i] = k_xs[i]; base.op[1].ys[i] = k_ys[i];
    }
    base.cos = (const char *)cos; base.sin = (const char *)sin;
    base.cs_b = cs_b; base.cs_s = cs_s; base.pos = pos; base.ps_b = ps_b; base.ps_s = ps_s;
    base.seq = seq; base.d = d; base.r = r; base.interleaved = interleaved; base.dtype = dtype;
    base.sign = sign;
    int64_t units = batch * ((seq + BLOCK_S - 1) / BLOCK_S);
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    if (threads > units) threads = (int)units;
    if (threads < 1) threads = 1;
    job jobs[MAX_THREADS];
    pthread_t ids[MAX_THREADS];
    int started[MAX_THREADS];
    int failed = 0;
    for (int t = 0; t < threads; t++) {
        jobs[t] = base;
        jobs[t].unit_begin = units * t / threads;
        jobs[t].unit_end = units * (t + 1) / threads;
    }
    for (int t = 1; t < threads; t++) {
        started[t] = pthread_create(&ids[t], NULL, thread_main, &jobs[t]) == 0;
    }
    run_units(&jobs[0]);
    for (int t = 1; t < threads; t++) {
        if (started[t]) pthread_join(ids[t], NULL);
        else { run_units(&jobs[t]); failed++; }
    }
    return failed;
}
"""
