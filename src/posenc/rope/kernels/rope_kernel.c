/*
 * The fused CPU rotation behind posenc.apply_rotary, compiled on first use by
 * posenc/rope/kernels/cpu.py (which holds the one build command and its flags) and called through
 * ctypes with one posenc_rope_args struct, mirrored field for field by cpu.RopeArgs.
 *
 * Memory safety: the kernel trusts nothing it is given beyond "each pointer, shape and stride
 * describes a valid strided tensor" (which torch guarantees). Before touching any element it checks
 * that the shapes agree, that every dtype is one it reads, that every position names an existing
 * table row, and that no output shares memory with another operand unless it is exactly its own
 * input (in place). Every element is then addressed through its own tensor's strides, so expanded,
 * transposed and sliced views of any of the seven operands are read and written within bounds.
 *
 * Work is split into units of (batch, block of BLOCK_S positions); a unit visits every head of q and
 * then of k for its positions, so the unit's rows of the cos/sin tables stay in L1 while the heads
 * stream through. POSIX threads take contiguous ranges of units.
 *
 * Numerics match posenc.rope.apply.rotate_reference bit for bit: bf16/fp16 are widened to float32,
 * every product and difference is rounded separately (built with -ffp-contract=off and
 * -fno-tree-slp-vectorize, so no fused multiply-adds), and the result is rounded to the storage type
 * once with round-to-nearest-even, as Tensor.to does. float16 uses the compiler's _Float16 where it
 * exists and exact bit-level conversions otherwise (forced with -DPOSENC_NO_FLOAT16).
 */
#include <stdint.h>
#include <string.h>
#include <pthread.h>

/* Bumped whenever posenc_rope_args changes; cpu.py refuses a library with another value. */
#define POSENC_ABI 3
#define BLOCK_S 16
#define MAX_THREADS 64
/* Nodes the exact overlap search may visit before it gives up and reports a possible overlap. */
#define OVERLAP_BUDGET 100000

enum { DT_F32 = 0, DT_BF16 = 1, DT_F16 = 2, DT_F64 = 3, DT_I64 = 4, DT_I32 = 5 };

/* Operand indices used in error reports (cpu.py names them). */
enum { OP_Q = 0, OP_K = 1, OP_Q_OUT = 2, OP_K_OUT = 3, OP_COS = 4, OP_SIN = 5, OP_POS = 6 };

enum {
    OK = 0,
    ERR_DTYPE = 1,          /* error_a: operand */
    ERR_SHAPE = 2,          /* error_a: operand, error_b: dim, error_value: its size */
    ERR_ROTARY_DIM = 3,     /* error_value: rotary_dim */
    ERR_STRIDE = 4,         /* error_a: operand, error_b: dim, error_value: the negative stride */
    ERR_POS_NEGATIVE = 5,   /* error_value: the smallest position (or row_offset) */
    ERR_POS_RANGE = 6,      /* error_value: the largest position, error_b: table rows */
    ERR_OVERLAP = 7,        /* error_a, error_b: operands; error_value 1 if only "not ruled out" */
    ERR_SELF_OVERLAP = 8    /* error_a: an output whose elements share memory */
};

/* All fields are 64 bits wide, so the struct has no padding and Python can fill it with one
   struct.pack_into call. Shapes and strides are in elements, as torch reports them. */
typedef struct { void *data; int64_t dtype; int64_t shape[4]; int64_t stride[4]; } posenc_operand;
typedef struct { const void *data; int64_t dtype; int64_t shape[3]; int64_t stride[3]; } posenc_table;
typedef struct { const void *data; int64_t dtype; int64_t shape[2]; int64_t stride[2]; } posenc_index;

typedef struct {
    posenc_operand q, k, q_out, k_out;   /* (B, Hq, S, D), (B, Hk, S, D), same shapes as q, k */
    posenc_table cos, sin;               /* (B or 1, rows, rotary_dim / 2) */
    posenc_index positions;              /* (B or 1, S) rows into the tables; data NULL: see next */
    int64_t row_offset;                  /* without positions, position s reads row row_offset + s */
    int64_t rotary_dim, interleaved, inverse, threads;
    /* written by the kernel */
    int64_t error_a, error_b, error_value, threads_failed;
} posenc_rope_args;

int64_t posenc_rope_abi(void) { return (int64_t)POSENC_ABI * 1000000 + (int64_t)sizeof(posenc_rope_args); }

/* ---- conversions ------------------------------------------------------------------------------ */
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

/* ---- one head vector ---------------------------------------------------------------------------
   Rotate its first r features and copy the rest when writing elsewhere. The unit-stride versions
   (every last-dimension stride is 1, the usual case) vectorise; the strided versions take each
   operand's own last-dimension stride. Both do the same operations in the same order.
   ROTATE_PAIRS is the unit-stride loop over one head's r/2 pairs, read from X and written to Y
   (one pointer when in place), shared by the in-place and the copying version. */
#define ROTATE_PAIRS(ACC, LOAD, STORE, X, Y)                                                        \
    if (!interleaved) {                                                                             \
        for (i = 0; i < h; i++) {                                                                   \
            ACC a = LOAD(X[i]), b = LOAD(X[i + h]), cc = c[i], ss = sign * s[i];                    \
            Y[i] = STORE(a * cc - b * ss);                                                          \
            Y[i + h] = STORE(a * ss + b * cc);                                                      \
        }                                                                                           \
    } else {                                                                                        \
        for (i = 0; i < h; i++) {                                                                   \
            ACC a = LOAD(X[2 * i]), b = LOAD(X[2 * i + 1]), cc = c[i], ss = sign * s[i];            \
            Y[2 * i] = STORE(a * cc - b * ss);                                                      \
            Y[2 * i + 1] = STORE(a * ss + b * cc);                                                  \
        }                                                                                           \
    }

#define DEFINE_ROWS(SUFFIX, T, ACC, LOAD, STORE)                                                    \
static void row_inplace_##SUFFIX(T *restrict x, const ACC *restrict c, const ACC *restrict s,       \
                                 int64_t r, int interleaved, ACC sign) {                            \
    int64_t h = r / 2, i;                                                                           \
    ROTATE_PAIRS(ACC, LOAD, STORE, x, x)                                                            \
}                                                                                                   \
static void row_copy_##SUFFIX(const T *restrict x, T *restrict y, const ACC *restrict c,            \
                              const ACC *restrict s, int64_t r, int64_t d, int interleaved,         \
                              ACC sign) {                                                           \
    int64_t h = r / 2, i;                                                                           \
    ROTATE_PAIRS(ACC, LOAD, STORE, x, y)                                                            \
    if (d > r) memcpy(y + r, x + r, (size_t)(d - r) * sizeof(T));                                   \
}                                                                                                   \
static void row_strided_##SUFFIX(const T *x, T *y, const ACC *c, const ACC *s, int64_t xs,          \
                                 int64_t ys, int64_t cs, int64_t ss_, int64_t r, int64_t d,          \
                                 int interleaved, int copy_rest, ACC sign) {                         \
    int64_t h = r / 2, i, ia, ib;                                                                    \
    for (i = 0; i < h; i++) {                                                                        \
        ia = interleaved ? 2 * i : i;                                                                \
        ib = interleaved ? 2 * i + 1 : i + h;                                                        \
        ACC a = LOAD(x[ia * xs]), b = LOAD(x[ib * xs]), cc = c[i * cs], ss = sign * s[i * ss_];      \
        y[ia * ys] = STORE(a * cc - b * ss);                                                         \
        y[ib * ys] = STORE(a * ss + b * cc);                                                         \
    }                                                                                                \
    if (copy_rest)                                                                                   \
        for (i = r; i < d; i++) y[i * ys] = x[i * xs];                                               \
}

DEFINE_ROWS(f32, float, float, ID_LOAD, ID_STORE)
DEFINE_ROWS(f64, double, double, ID_LOAD, ID_STORE)
DEFINE_ROWS(bf16, uint16_t, float, bf16_load, bf16_store)
DEFINE_ROWS(f16, half_t, float, f16_load, f16_store)

/* ---- the work --------------------------------------------------------------------------------- */
typedef struct {
    const posenc_rope_args *a;
    int64_t cs_b, ss_b, ps_b;       /* batch strides of the tables and positions (0 when shared) */
    int64_t unit_begin, unit_end;
} job;

static int64_t position_at(const posenc_index *p, int64_t b_stride, int64_t b, int64_t s) {
    int64_t offset = b * b_stride + s * p->stride[1];
    if (p->dtype == DT_I32) return ((const int32_t *)p->data)[offset];
    return ((const int64_t *)p->data)[offset];
}

static void run_units(const job *j) {
    const posenc_rope_args *a = j->a;
    int dtype = (int)a->q.dtype;
    size_t es = dtype == DT_F64 ? 8 : (dtype == DT_F32 ? 4 : 2);
    size_t ts = dtype == DT_F64 ? 8 : 4;
    int64_t seq = a->q.shape[2], d = a->q.shape[3], r = a->rotary_dim;
    int64_t blocks = (seq + BLOCK_S - 1) / BLOCK_S;
    int interleaved = a->interleaved != 0;
    double sign = a->inverse ? -1.0 : 1.0;
    const posenc_operand *ins[2] = {&a->q, &a->k}, *outs[2] = {&a->q_out, &a->k_out};
    for (int64_t u = j->unit_begin; u < j->unit_end; u++) {
        int64_t b = u / blocks, s0 = (u % blocks) * BLOCK_S;
        int64_t s1 = s0 + BLOCK_S < seq ? s0 + BLOCK_S : seq;
        for (int t = 0; t < 2; t++) {
            const posenc_operand *in = ins[t], *out = outs[t];
            int64_t xs = in->stride[3], ys = out->stride[3];
            int inplace = in->data == out->data;         /* the checks allow only an identical view */
            int unit = xs == 1 && ys == 1 && a->cos.stride[2] == 1 && a->sin.stride[2] == 1;
            /* per-unit constants in locals: the row functions write through char-typed pointers,
               which the compiler must assume may alias *a, so reading a-> fields per row would
               reload them after every row */
            const void *pos = a->positions.data;
            const int64_t rows = a->cos.shape[1], row_offset = a->row_offset;
            const int64_t cos_s = a->cos.stride[1], sin_s = a->sin.stride[1];
            const int64_t cs = a->cos.stride[2], ss = a->sin.stride[2];
            const char *cos_b = (const char *)a->cos.data + (size_t)(b * j->cs_b) * ts;
            const char *sin_b = (const char *)a->sin.data + (size_t)(b * j->ss_b) * ts;
            const int64_t heads = in->shape[1];
            const int64_t in_h = in->stride[1], in_s = in->stride[2], out_h = out->stride[1], out_s = out->stride[2];
            const char *in_b = (const char *)in->data + (size_t)(b * in->stride[0]) * es;
            char *out_b = (char *)out->data + (size_t)(b * out->stride[0]) * es;
            for (int64_t hd = 0; hd < heads; hd++) {
                for (int64_t s = s0; s < s1; s++) {
                    int64_t row = row_offset + s;  /* in range: checked before the work began */
                    if (pos) {
                        row = position_at(&a->positions, j->ps_b, b, s);
                        /* checked before the work began; checked again because ctypes releases the
                           GIL and another thread may have written the positions since */
                        if (row < 0 || row >= rows) continue;
                    }
                    const char *c = cos_b + (size_t)(row * cos_s) * ts;
                    const char *sn = sin_b + (size_t)(row * sin_s) * ts;
                    const char *x = in_b + (size_t)(hd * in_h + s * in_s) * es;
                    char *y = out_b + (size_t)(hd * out_h + s * out_s) * es;
                    switch (dtype) {
                    case DT_F32:
                        if (!unit) row_strided_f32((const float *)x, (float *)y, (const float *)c, (const float *)sn, xs, ys, cs, ss, r, d, interleaved, !inplace, (float)sign);
                        else if (inplace) row_inplace_f32((float *)y, (const float *)c, (const float *)sn, r, interleaved, (float)sign);
                        else row_copy_f32((const float *)x, (float *)y, (const float *)c, (const float *)sn, r, d, interleaved, (float)sign);
                        break;
                    case DT_F64:
                        if (!unit) row_strided_f64((const double *)x, (double *)y, (const double *)c, (const double *)sn, xs, ys, cs, ss, r, d, interleaved, !inplace, sign);
                        else if (inplace) row_inplace_f64((double *)y, (const double *)c, (const double *)sn, r, interleaved, sign);
                        else row_copy_f64((const double *)x, (double *)y, (const double *)c, (const double *)sn, r, d, interleaved, sign);
                        break;
                    case DT_BF16:
                        if (!unit) row_strided_bf16((const uint16_t *)x, (uint16_t *)y, (const float *)c, (const float *)sn, xs, ys, cs, ss, r, d, interleaved, !inplace, (float)sign);
                        else if (inplace) row_inplace_bf16((uint16_t *)y, (const float *)c, (const float *)sn, r, interleaved, (float)sign);
                        else row_copy_bf16((const uint16_t *)x, (uint16_t *)y, (const float *)c, (const float *)sn, r, d, interleaved, (float)sign);
                        break;
                    default:
                        if (!unit) row_strided_f16((const half_t *)x, (half_t *)y, (const float *)c, (const float *)sn, xs, ys, cs, ss, r, d, interleaved, !inplace, (float)sign);
                        else if (inplace) row_inplace_f16((half_t *)y, (const float *)c, (const float *)sn, r, interleaved, (float)sign);
                        else row_copy_f16((const half_t *)x, (half_t *)y, (const float *)c, (const float *)sn, r, d, interleaved, (float)sign);
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

/* ---- checks ----------------------------------------------------------------------------------- */
static int fail(posenc_rope_args *a, int code, int64_t ea, int64_t eb, int64_t value) {
    a->error_a = ea;
    a->error_b = eb;
    a->error_value = value;
    return code;
}

static size_t elem_size(int64_t dtype) {
    switch (dtype) {
    case DT_F32: case DT_I32: return 4;
    case DT_F64: case DT_I64: return 8;
    default: return 2;
    }
}

/* A tensor as the overlap checks see it: base address, element size, dims of size > 1 (a size-1
   dim adds no address, and torch leaves its stride arbitrary). */
typedef struct {
    uintptr_t base;
    size_t es;
    int n;
    int64_t size[4], stride[4];
    int empty;
} footprint;

static footprint footprint_of(const void *data, int64_t dtype, const int64_t *shape,
                              const int64_t *stride, int ndim) {
    footprint f;
    memset(&f, 0, sizeof f);
    f.base = (uintptr_t)data;
    f.es = elem_size(dtype);
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == 0) f.empty = 1;
        if (shape[i] > 1) {
            f.size[f.n] = shape[i];
            f.stride[f.n] = stride[i];
            f.n++;
        }
    }
    return f;
}

/* Last byte address touched, plus one. */
static uintptr_t footprint_end(const footprint *f) {
    uintptr_t extent = 0;
    for (int i = 0; i < f->n; i++) extent += (uintptr_t)((f->size[i] - 1) * f->stride[i]);
    return f->base + (extent + 1) * f->es;
}

/* Same addresses in the same order: the in-place case. */
static int identical(const footprint *x, const footprint *y) {
    if (x->base != y->base || x->es != y->es || x->n != y->n || x->empty != y->empty) return 0;
    for (int i = 0; i < x->n; i++)
        if (x->size[i] != y->size[i] || x->stride[i] != y->stride[i]) return 0;
    return 1;
}

typedef struct { int64_t c, lo, hi; } term;

static int64_t floor_div(int64_t a, int64_t b) { int64_t q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q; }
static int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

/* Is sum(t[i].c * e_i) == target for some integers e_i in [t[i].lo, t[i].hi]? Terms are sorted by
   decreasing c > 0; lo_sum/hi_sum[i] bound what terms i.. can add. 1 yes, 0 no, -1 out of budget. */
static int solve(const term *t, int n, int i, int64_t target, const int64_t *lo_sum,
                 const int64_t *hi_sum, int64_t *budget) {
    if (--*budget < 0) return -1;
    if (i == n) return target == 0;
    int64_t first = ceil_div(target - hi_sum[i + 1], t[i].c);
    int64_t last = floor_div(target - lo_sum[i + 1], t[i].c);
    if (first < t[i].lo) first = t[i].lo;
    if (last > t[i].hi) last = t[i].hi;
    for (int64_t e = first; e <= last; e++) {
        int found = solve(t, n, i + 1, target - e * t[i].c, lo_sum, hi_sum, budget);
        if (found != 0) return found;
    }
    return 0;
}

/* 1 when some element of x and some element of y share a byte, 0 when none does, -1 when the
   search ran out of budget (treated as an overlap by the caller). */
static int overlaps(const footprint *x, const footprint *y) {
    if (x->empty || y->empty) return 0;
    uintptr_t x_end = footprint_end(x), y_end = footprint_end(y);
    if (x_end <= y->base || y_end <= x->base) return 0;
    if (x->es != y->es) return 1;                /* different dtypes: the byte ranges decide */
    intptr_t delta_bytes = (intptr_t)(y->base - x->base);
    if (delta_bytes % (intptr_t)x->es != 0) return 1;   /* misaligned views: ranges decide */
    /* x.base + sum(i_d xs_d) == y.base + sum(j_d ys_d)  <=>  sum(i_d xs_d) - sum(j_d ys_d) == delta.
       Terms of equal stride merge into one difference variable, which keeps the search narrow. */
    term t[8];
    int n = 0;
    for (int side = 0; side < 2; side++) {
        const footprint *f = side ? y : x;
        for (int i = 0; i < f->n; i++) {
            if (f->stride[i] == 0) continue;     /* an expanded dim adds no address */
            int64_t lo = side ? -(f->size[i] - 1) : 0, hi = side ? 0 : f->size[i] - 1;
            int k = 0;
            while (k < n && t[k].c != f->stride[i]) k++;
            if (k == n) { t[n].c = f->stride[i]; t[n].lo = 0; t[n].hi = 0; n++; }
            t[k].lo += lo;
            t[k].hi += hi;
        }
    }
    for (int i = 1; i < n; i++)                  /* insertion sort, decreasing stride */
        for (int k = i; k > 0 && t[k].c > t[k - 1].c; k--) { term tmp = t[k]; t[k] = t[k - 1]; t[k - 1] = tmp; }
    int64_t lo_sum[9], hi_sum[9];
    lo_sum[n] = hi_sum[n] = 0;
    for (int i = n - 1; i >= 0; i--) {
        lo_sum[i] = lo_sum[i + 1] + t[i].c * t[i].lo;
        hi_sum[i] = hi_sum[i + 1] + t[i].c * t[i].hi;
    }
    int64_t budget = OVERLAP_BUDGET;
    return solve(t, n, 0, (int64_t)(delta_bytes / (intptr_t)x->es), lo_sum, hi_sum, &budget);
}

/* No two elements of an output may share memory. Sufficient test: with the dims sorted by stride,
   each stride exceeds the span of all smaller ones (every dense, transposed or sliced layout). */
static int self_overlaps(const footprint *f) {
    int64_t size[4], stride[4];
    int n = f->n;
    if (f->empty) return 0;
    for (int i = 0; i < n; i++) { size[i] = f->size[i]; stride[i] = f->stride[i]; }
    for (int i = 1; i < n; i++)
        for (int k = i; k > 0 && stride[k] < stride[k - 1]; k--) {
            int64_t ts = stride[k], tz = size[k];
            stride[k] = stride[k - 1]; size[k] = size[k - 1];
            stride[k - 1] = ts; size[k - 1] = tz;
        }
    int64_t span = 0;
    for (int i = 0; i < n; i++) {
        if (stride[i] <= span) return 1;
        span += (size[i] - 1) * stride[i];
    }
    return 0;
}

static int check(posenc_rope_args *a) {
    const posenc_operand *ops[4] = {&a->q, &a->k, &a->q_out, &a->k_out};
    int64_t dtype = a->q.dtype;
    if (dtype < DT_F32 || dtype > DT_F64) return fail(a, ERR_DTYPE, OP_Q, 0, dtype);
    for (int i = 1; i < 4; i++)
        if (ops[i]->dtype != dtype) return fail(a, ERR_DTYPE, i, 0, ops[i]->dtype);
    int64_t table_dtype = dtype == DT_F64 ? DT_F64 : DT_F32;
    if (a->cos.dtype != table_dtype) return fail(a, ERR_DTYPE, OP_COS, 0, a->cos.dtype);
    if (a->sin.dtype != table_dtype) return fail(a, ERR_DTYPE, OP_SIN, 0, a->sin.dtype);
    if (a->positions.data && a->positions.dtype != DT_I64 && a->positions.dtype != DT_I32)
        return fail(a, ERR_DTYPE, OP_POS, 0, a->positions.dtype);

    for (int i = 0; i < 4; i++)
        for (int dim = 0; dim < 4; dim++) {
            if (ops[i]->shape[dim] < 0) return fail(a, ERR_SHAPE, i, dim, ops[i]->shape[dim]);
            if (ops[i]->stride[dim] < 0) return fail(a, ERR_STRIDE, i, dim, ops[i]->stride[dim]);
        }
    const posenc_table *tables[2] = {&a->cos, &a->sin};
    for (int i = 0; i < 2; i++)
        for (int dim = 0; dim < 3; dim++) {
            if (tables[i]->shape[dim] < 0) return fail(a, ERR_SHAPE, OP_COS + i, dim, tables[i]->shape[dim]);
            if (tables[i]->stride[dim] < 0) return fail(a, ERR_STRIDE, OP_COS + i, dim, tables[i]->stride[dim]);
        }
    if (a->positions.data)
        for (int dim = 0; dim < 2; dim++) {
            if (a->positions.shape[dim] < 0) return fail(a, ERR_SHAPE, OP_POS, dim, a->positions.shape[dim]);
            if (a->positions.stride[dim] < 0) return fail(a, ERR_STRIDE, OP_POS, dim, a->positions.stride[dim]);
        }

    int64_t batch = a->q.shape[0], seq = a->q.shape[2], d = a->q.shape[3], r = a->rotary_dim;
    /* k agrees with q in batch, seq and head_dim; each output has its input's shape */
    if (a->k.shape[0] != batch) return fail(a, ERR_SHAPE, OP_K, 0, a->k.shape[0]);
    if (a->k.shape[2] != seq) return fail(a, ERR_SHAPE, OP_K, 2, a->k.shape[2]);
    if (a->k.shape[3] != d) return fail(a, ERR_SHAPE, OP_K, 3, a->k.shape[3]);
    for (int dim = 0; dim < 4; dim++) {
        if (a->q_out.shape[dim] != a->q.shape[dim]) return fail(a, ERR_SHAPE, OP_Q_OUT, dim, a->q_out.shape[dim]);
        if (a->k_out.shape[dim] != a->k.shape[dim]) return fail(a, ERR_SHAPE, OP_K_OUT, dim, a->k_out.shape[dim]);
    }
    if (r < 2 || r % 2 || r > d) return fail(a, ERR_ROTARY_DIM, 0, 0, r);
    int64_t rows = a->cos.shape[1];
    for (int i = 0; i < 2; i++) {
        const posenc_table *t = tables[i];
        if (t->shape[0] != 1 && t->shape[0] != batch) return fail(a, ERR_SHAPE, OP_COS + i, 0, t->shape[0]);
        if (t->shape[1] != rows) return fail(a, ERR_SHAPE, OP_COS + i, 1, t->shape[1]);
        if (t->shape[2] != r / 2) return fail(a, ERR_SHAPE, OP_COS + i, 2, t->shape[2]);
    }
    int64_t tokens = batch * seq;
    if (a->positions.data) {
        if (a->positions.shape[0] != 1 && a->positions.shape[0] != batch)
            return fail(a, ERR_SHAPE, OP_POS, 0, a->positions.shape[0]);
        if (a->positions.shape[1] != seq) return fail(a, ERR_SHAPE, OP_POS, 1, a->positions.shape[1]);
        if (tokens > 0) {
            int64_t pb = a->positions.shape[0] > 1 ? a->positions.stride[0] : 0;
            int64_t lo = INT64_MAX, hi = INT64_MIN;
            for (int64_t b = 0; b < a->positions.shape[0]; b++)
                for (int64_t s = 0; s < seq; s++) {
                    int64_t p = position_at(&a->positions, pb, b, s);
                    if (p < lo) lo = p;
                    if (p > hi) hi = p;
                }
            if (lo < 0) return fail(a, ERR_POS_NEGATIVE, 0, 0, lo);
            if (hi >= rows) return fail(a, ERR_POS_RANGE, 0, rows, hi);
        }
    } else if (a->row_offset < 0) {
        return fail(a, ERR_POS_NEGATIVE, 0, 0, a->row_offset);
    } else if (tokens > 0 && a->row_offset == 0 && rows < seq) {
        return fail(a, ERR_SHAPE, OP_COS, 1, rows);
    } else if (tokens > 0 && a->row_offset > rows - seq) {
        /* rows - seq cannot overflow (both >= 0); the largest row is reported saturated */
        int64_t last = a->row_offset <= INT64_MAX - (seq - 1) ? a->row_offset + (seq - 1) : INT64_MAX;
        return fail(a, ERR_POS_RANGE, 0, rows, last);
    }

    /* memory: outputs are written, so each must be disjoint from every other operand, except that
       an output may be exactly its own input (in place) */
    footprint f[7];
    for (int i = 0; i < 4; i++) f[i] = footprint_of(ops[i]->data, ops[i]->dtype, ops[i]->shape, ops[i]->stride, 4);
    f[OP_COS] = footprint_of(a->cos.data, a->cos.dtype, a->cos.shape, a->cos.stride, 3);
    f[OP_SIN] = footprint_of(a->sin.data, a->sin.dtype, a->sin.shape, a->sin.stride, 3);
    int n_ops = 6;
    if (a->positions.data) {
        f[OP_POS] = footprint_of(a->positions.data, a->positions.dtype, a->positions.shape, a->positions.stride, 2);
        n_ops = 7;
    }
    for (int out = OP_Q_OUT; out <= OP_K_OUT; out++) {
        if (self_overlaps(&f[out])) return fail(a, ERR_SELF_OVERLAP, out, 0, 0);
        for (int other = 0; other < n_ops; other++) {
            if (other == out || (other < out && other >= OP_Q_OUT)) continue;   /* each pair once */
            if (other == out - 2 && identical(&f[out], &f[other])) continue;   /* in place */
            int found = overlaps(&f[out], &f[other]);
            if (found) return fail(a, ERR_OVERLAP, out, other, found < 0);
        }
    }
    return OK;
}

/* ---- entry point ------------------------------------------------------------------------------ */
/* Rotate q and k into q_out and k_out. Returns OK, or an ERR_* code (with error_* filled in) before
   any element is touched. threads_failed counts threads that could not be started: their share ran
   on the calling thread, so the result is complete either way. */
int posenc_rope(posenc_rope_args *a) {
    a->error_a = a->error_b = a->error_value = a->threads_failed = 0;
    int status = check(a);
    if (status != OK) return status;
    int64_t batch = a->q.shape[0], seq = a->q.shape[2];
    job base;
    memset(&base, 0, sizeof base);
    base.a = a;
    base.cs_b = a->cos.shape[0] > 1 ? a->cos.stride[0] : 0;
    base.ss_b = a->sin.shape[0] > 1 ? a->sin.stride[0] : 0;
    base.ps_b = a->positions.data && a->positions.shape[0] > 1 ? a->positions.stride[0] : 0;
    int64_t units = batch * ((seq + BLOCK_S - 1) / BLOCK_S);
    if (units == 0) return OK;
    int64_t threads = a->threads;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    if (threads > units) threads = units;
    if (threads < 1) threads = 1;
    job jobs[MAX_THREADS];
    pthread_t ids[MAX_THREADS];
    int started[MAX_THREADS];
    for (int64_t t = 0; t < threads; t++) {
        jobs[t] = base;
        jobs[t].unit_begin = units * t / threads;
        jobs[t].unit_end = units * (t + 1) / threads;
    }
    for (int64_t t = 1; t < threads; t++)
        started[t] = pthread_create(&ids[t], NULL, thread_main, &jobs[t]) == 0;
    run_units(&jobs[0]);
    for (int64_t t = 1; t < threads; t++) {
        if (started[t]) {
            pthread_join(ids[t], NULL);
        } else {
            run_units(&jobs[t]);
            a->threads_failed++;
        }
    }
    return OK;
}
