/* The inner loop of metrics/stats.py's _slopes_between, compiled: the Theil-Sen slopes of
 * a block of rows against every later point, counted below a bracket and kept inside it,
 * in one pass with no temporary arrays (the numpy fallback makes eight passes over each
 * tile of pairs). A 72-hour soak's memory series (51,840 samples) has 1.3 billion pairs.
 *
 * block(t, y, a, b, lo, hi) -> (below, inside)
 *   t, y: C-contiguous float64 buffers of equal length n, t in non-decreasing order.
 *   For every pair i < j with a <= i < b and t[j] != t[i]: s = (y[j] - y[i]) / (t[j] - t[i]),
 *   computed as numpy computes it (IEEE double: the subtractions and the division each
 *   rounded once, no contraction); below counts s < lo; inside holds (as the bytes of
 *   float64 values, rows in order) every s with lo <= s <= hi.
 *   Eight pairs a step with AVX-512 where the CPU has it (chosen at import), else one.
 *   The GIL is released for the loop, so threads run blocks at once.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>
#include <string.h>

/* One row: the slopes of the point (ti, yi) against the m later points (t ascending);
 * returns how many are below lo, and appends those within [lo, hi] to out (which has room
 * for m more), *k counting them. Equal times have no slope. Every path computes each
 * slope as (y[j] - yi) / (t[j] - ti), a subtraction and a division each rounded once as
 * IEEE requires, so all give the same bits as numpy. */
typedef long long (*row_fn)(const double *, const double *, double, double, Py_ssize_t,
                            double, double, double *, size_t *);

static long long row_scalar(const double *t, const double *y, double ti, double yi,
                            Py_ssize_t m, double lo, double hi, double *out, size_t *k) {
    long long below = 0;
    size_t used = *k;
    for (Py_ssize_t j = 0; j < m; j++) {
        const double dt = t[j] - ti;
        const double s = (y[j] - yi) / dt;
        const int has = dt != 0.0;
        below += has & (s < lo);
        out[used] = s; /* branch-free: kept only when counted */
        used += has & (s >= lo) & (s <= hi);
    }
    *k = used;
    return below;
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#include <immintrin.h>
#define HAVE_AVX512 1
/* AVX-512: eight pairs a step, the kept ones stored by a compress. */
__attribute__((target("avx512f"))) static long long row_avx512(
    const double *t, const double *y, double ti, double yi, Py_ssize_t m, double lo,
    double hi, double *out, size_t *k) {
    const __m512d vti = _mm512_set1_pd(ti), vyi = _mm512_set1_pd(yi);
    const __m512d vlo = _mm512_set1_pd(lo), vhi = _mm512_set1_pd(hi);
    const __m512d zero = _mm512_setzero_pd();
    long long below = 0;
    size_t used = *k;
    Py_ssize_t j = 0;
    for (; j + 8 <= m; j += 8) {
        const __m512d dt = _mm512_sub_pd(_mm512_loadu_pd(t + j), vti);
        const __m512d s = _mm512_div_pd(_mm512_sub_pd(_mm512_loadu_pd(y + j), vyi), dt);
        const __mmask8 has = _mm512_cmp_pd_mask(dt, zero, _CMP_NEQ_OQ);
        const __mmask8 low = _mm512_mask_cmp_pd_mask(has, s, vlo, _CMP_LT_OQ);
        const __mmask8 in = _mm512_mask_cmp_pd_mask(
            _mm512_mask_cmp_pd_mask(has, s, vlo, _CMP_GE_OQ), s, vhi, _CMP_LE_OQ);
        below += __builtin_popcount((unsigned)low);
        _mm512_mask_compressstoreu_pd(out + used, in, s);
        used += (size_t)__builtin_popcount((unsigned)in);
    }
    *k = used;
    return below + row_scalar(t + j, y + j, ti, yi, m - j, lo, hi, out, k);
}
#endif

static row_fn pick_row(void) {
#ifdef HAVE_AVX512
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return row_avx512;
#endif
    return row_scalar;
}

static row_fn row = row_scalar; /* pick_row's choice, at import */

static PyObject *block(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer tb, yb;
    Py_ssize_t a, b;
    double lo, hi;
    if (!PyArg_ParseTuple(args, "y*y*nndd", &tb, &yb, &a, &b, &lo, &hi))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = tb.len / (Py_ssize_t)sizeof(double);
    if (tb.len != yb.len || tb.len % (Py_ssize_t)sizeof(double) != 0) {
        PyErr_SetString(PyExc_ValueError, "t and y must be float64 buffers of one length");
        goto done;
    }
    if (a < 0 || b > n || a > b) {
        PyErr_SetString(PyExc_ValueError, "rows out of range");
        goto done;
    }
    const double *t = (const double *)tb.buf, *y = (const double *)yb.buf;
    size_t cap = 1 << 16, used = 0;
    double *out = malloc(cap * sizeof(double));
    long long below = 0;
    int oom = 0;
    if (!out) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = a; i < b; i++) {
        const Py_ssize_t m = n - i - 1;
        if (cap - used < (size_t)m + 1) { /* room for the whole row */
            size_t want = 2 * cap > used + (size_t)m + 1 ? 2 * cap : used + (size_t)m + 1;
            double *more = realloc(out, want * sizeof(double));
            if (!more) {
                oom = 1;
                break;
            }
            out = more;
            cap = want;
        }
        below += row(t + i + 1, y + i + 1, t[i], y[i], m, lo, hi, out, &used);
    }
    Py_END_ALLOW_THREADS
    if (oom) {
        PyErr_NoMemory();
    } else {
        PyObject *bytes = PyBytes_FromStringAndSize((const char *)out, (Py_ssize_t)(used * sizeof(double)));
        if (bytes) {
            result = Py_BuildValue("LN", below, bytes);
        }
    }
    free(out);
done:
    PyBuffer_Release(&tb);
    PyBuffer_Release(&yb);
    return result;
}

static PyMethodDef methods[] = {
    {"block", block, METH_VARARGS,
     "block(t, y, a, b, lo, hi) -> (below, inside bytes): the slopes of rows a..b-1 against "
     "every later point, counted below lo and kept within [lo, hi]"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_pairslopes", "Theil-Sen's pairwise slopes of a block of rows.", -1, methods,
};

PyMODINIT_FUNC PyInit__pairslopes(void) {
    row = pick_row();
    return PyModule_Create(&module);
}
