/* The per-value loops of a long run's streamed summary (metrics/summary.py's chunk gaps,
 * metrics/stats.py's StreamedDescribe), compiled: each is one or two passes over a batch
 * with no temporary arrays, where numpy made some forty (a 72-hour soak has 415 million
 * chunk times). Optional like _pairslopes: without it the numpy code runs, and the tests
 * pin both paths to the same figures (the percentiles, counts and extremes bit for bit;
 * sums in another order, so a mean or std may differ in the last digit or two).
 * The GIL is released for every loop, so threads run batches at once.
 *
 * gaps(times, t_off, tokens, k_off, rows, osl, a, b) -> (gaps, weights, known, in_span)
 *   times: int64 chunk arrival times (ns), the list column's values; t_off: its int32
 *   offsets (n + 1, absolute into times); tokens, k_off: the chunk_tokens list column
 *   likewise (int32 values), or empty buffers when there is none; rows: one byte per row,
 *   1 for the rows summarised (ok, with their chunk lists), 2 where that row's tokens
 *   are known too (not null); osl: float64 per row (NaN: 0) or empty; [a, b]: the span.
 *   gaps: float64 bytes, (t[j] - t[j-1]) / 1e6 for each later chunk j of each row, in
 *   order (as numpy: an int64 difference, then a double division); weights: int64 bytes,
 *   chunk j's tokens, or 1 for every gap where a row's tokens are not known (null, or a
 *   list of another length: then ``known`` is 0 for the whole batch, as in numpy's path);
 *   in_span: the rows' OSL / chunks summed over their chunks with a <= t <= b.
 *
 * batch(v, w) -> (stats, keys, counts, wcounts) or None when v holds a NaN
 *   v: float64, w: int64 weights (same length). stats: (n, sum, m2, min, max, lo key,
 *   weighted n, weighted sum, weighted m2, weighted min, weighted max, weighted lo key,
 *   every weight > 0); keys: int64 bytes, stats.py's _bucket_keys of each value; counts:
 *   int64 bytes, the values per key from ``lo key``; wcounts: the weights per key of the
 *   values with weight > 0 from ``weighted lo key`` (empty when there are none).
 *
 * keep(v, w, keys, wanted) -> (v, w) of the values whose key is marked in ``wanted``
 *   (one byte per key), in order.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define KEY_SHIFT 42 /* stats.py: 52 mantissa bits - 10 kept */
#define KEY_ZERO (1LL << 21)
#define KEYS (1LL << 22)
#define BLOCK 256 /* values summed per partial sum (a rounding error that grows slowly) */

static int64_t key_of(double v) {
    double a = fabs(v);
    int64_t bits;
    memcpy(&bits, &a, sizeof bits);
    bits >>= KEY_SHIFT;
    return v >= 0.0 ? KEY_ZERO + bits : KEY_ZERO - 1 - bits;
}

static PyObject *new_bytes(Py_ssize_t n, char **buf) {
    PyObject *b = PyByteArray_FromStringAndSize(NULL, n);
    if (b)
        *buf = PyByteArray_AS_STRING(b);
    return b;
}

static PyObject *gaps(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer tb, ob, kb, kob, rb, sb;
    long long a, b;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*LL", &tb, &ob, &kb, &kob, &rb, &sb, &a, &b))
        return NULL;
    PyObject *result = NULL, *gout = NULL, *wout = NULL;
    const Py_ssize_t rows = rb.len;
    const int has_tok = kob.len > 0;
    if (ob.len != (rows + 1) * 4 || (has_tok && kob.len != ob.len) || tb.len % 8 ||
        kb.len % 4 || (sb.len && sb.len != rows * 8)) {
        PyErr_SetString(PyExc_ValueError, "gaps: buffers of inconsistent lengths");
        goto done;
    }
    const int64_t *t = tb.buf;
    const int32_t *off = ob.buf, *tok = kb.buf, *koff = kob.buf;
    const unsigned char *row = rb.buf;
    const double *osl = sb.len ? sb.buf : NULL;
    const Py_ssize_t nt = tb.len / 8, nk = kb.len / 4;
    Py_ssize_t total = 0;
    int bad = 0;
    for (Py_ssize_t i = 0; i < rows; i++) {
        if (!row[i])
            continue;
        const int32_t s = off[i], e = off[i + 1];
        if (s < 0 || e < s || e > nt) {
            bad = 1;
            break;
        }
        if (has_tok && row[i] == 2 && (koff[i] < 0 || koff[i + 1] < koff[i] || koff[i + 1] > nk)) {
            bad = 1;
            break;
        }
        total += e > s ? e - s - 1 : 0;
    }
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "gaps: offsets out of range");
        goto done;
    }
    char *gb = NULL, *wb = NULL;
    if (!(gout = new_bytes(total * 8, &gb)) || !(wout = new_bytes(total * 8, &wb)))
        goto done;
    double *g = (double *)gb;
    int64_t *w = (int64_t *)wb;
    int known = has_tok;
    double span = 0.0;
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < rows; i++) {
        if (!row[i])
            continue;
        const int32_t s = off[i], e = off[i + 1];
        if (known && (row[i] != 2 || koff[i + 1] - koff[i] != e - s))
            known = 0;
        const int32_t ks = known ? koff[i] : 0;
        for (int32_t j = s + 1; j < e; j++) {
            g[k] = (double)(t[j] - t[j - 1]) / 1e6;
            w[k] = known ? (int64_t)tok[ks + (j - s)] : 1;
            k++;
        }
        if (osl && e > s) {
            double o = osl[i];
            if (isnan(o))
                o = 0.0;
            else if (isinf(o))
                o = o > 0 ? 1.7976931348623157e308 : -1.7976931348623157e308;
            const double per = o / (double)(e - s);
            for (int32_t j = s; j < e; j++)
                if (t[j] >= a && t[j] <= b)
                    span += per;
        }
    }
    if (!known) /* a row's tokens unknown: every gap weighs 1, as numpy's path */
        for (Py_ssize_t j = 0; j < total; j++)
            w[j] = 1;
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("OOid", gout, wout, known, span);
done:
    Py_XDECREF(gout);
    Py_XDECREF(wout);
    PyBuffer_Release(&tb);
    PyBuffer_Release(&ob);
    PyBuffer_Release(&kb);
    PyBuffer_Release(&kob);
    PyBuffer_Release(&rb);
    PyBuffer_Release(&sb);
    return result;
}

static PyObject *batch(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer vb, wb;
    if (!PyArg_ParseTuple(args, "y*y*", &vb, &wb))
        return NULL;
    PyObject *result = NULL, *kout = NULL, *cout = NULL, *wcout = NULL;
    if (vb.len % 8 || wb.len != vb.len) {
        PyErr_SetString(PyExc_ValueError, "batch: v and w must be 8-byte buffers of one length");
        goto done;
    }
    const Py_ssize_t n = vb.len / 8;
    const double *v = vb.buf;
    const int64_t *w = wb.buf;
    char *kb = NULL;
    if (!(kout = new_bytes(n * 8, &kb)))
        goto done;
    int64_t *key = (int64_t *)kb;
    int nan = 0;
    double sum = 0.0, part = 0.0, vmin = INFINITY, vmax = -INFINITY;
    double wsumv = 0.0, wpart = 0.0, wmin = INFINITY, wmax = -INFINITY;
    long long wn = 0, npos = 0;
    int64_t klo = KEYS, khi = -1, wklo = KEYS, wkhi = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        const double x = v[i];
        if (isnan(x)) {
            nan = 1;
            break;
        }
        if (i % BLOCK == 0) {
            sum += part;
            part = 0.0;
            wsumv += wpart;
            wpart = 0.0;
        }
        part += x;
        vmin = x < vmin ? x : vmin;
        vmax = x > vmax ? x : vmax;
        const int64_t k = key_of(x);
        key[i] = k;
        klo = k < klo ? k : klo;
        khi = k > khi ? k : khi;
        if (w[i] > 0) {
            wn += w[i];
            npos++;
            wpart += x * (double)w[i];
            wmin = x < wmin ? x : wmin;
            wmax = x > wmax ? x : wmax;
            wklo = k < wklo ? k : wklo;
            wkhi = k > wkhi ? k : wkhi;
        }
    }
    sum += part;
    wsumv += wpart;
    Py_END_ALLOW_THREADS
    if (nan) {
        Py_INCREF(Py_None);
        result = Py_None;
        goto done;
    }
    char *cb = NULL, *wcb = NULL;
    const Py_ssize_t nc = n ? (Py_ssize_t)(khi - klo + 1) : 0;
    const Py_ssize_t nwc = npos ? (Py_ssize_t)(wkhi - wklo + 1) : 0;
    if (!(cout = new_bytes(nc * 8, &cb)) || !(wcout = new_bytes(nwc * 8, &wcb)))
        goto done;
    int64_t *c = (int64_t *)cb, *wc = (int64_t *)wcb;
    double m2 = 0.0, wm2 = 0.0;
    Py_BEGIN_ALLOW_THREADS
    memset(c, 0, (size_t)nc * 8);
    memset(wc, 0, (size_t)nwc * 8);
    const double mean = n ? sum / (double)n : 0.0;
    const double wmean = wn ? wsumv / (double)wn : 0.0;
    double p2 = 0.0, wp2 = 0.0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i % BLOCK == 0) {
            m2 += p2;
            p2 = 0.0;
            wm2 += wp2;
            wp2 = 0.0;
        }
        const double d = v[i] - mean;
        p2 += d * d;
        c[key[i] - klo]++;
        if (w[i] > 0) {
            const double e = v[i] - wmean;
            wp2 += e * e * (double)w[i];
            wc[key[i] - wklo] += w[i];
        }
    }
    m2 += p2;
    wm2 += wp2;
    Py_END_ALLOW_THREADS
    result = Py_BuildValue(
        "(ndddd L LddddL i)OOO", n, sum, m2, vmin, vmax, (long long)klo, wn, wsumv, wm2, wmin,
        wmax, (long long)wklo, (int)(npos == n), kout, cout, wcout);
done:
    Py_XDECREF(kout);
    Py_XDECREF(cout);
    Py_XDECREF(wcout);
    PyBuffer_Release(&vb);
    PyBuffer_Release(&wb);
    return result;
}

static PyObject *keep(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer vb, wb, kb, lb;
    if (!PyArg_ParseTuple(args, "y*y*y*y*", &vb, &wb, &kb, &lb))
        return NULL;
    PyObject *result = NULL, *vout = NULL, *wout = NULL;
    if (vb.len % 8 || wb.len != vb.len || kb.len != vb.len) {
        PyErr_SetString(PyExc_ValueError, "keep: v, w and keys must be 8-byte buffers of one length");
        goto done;
    }
    const Py_ssize_t n = vb.len / 8, nl = lb.len;
    const int64_t *key = kb.buf;
    const unsigned char *lut = lb.buf;
    Py_ssize_t m = 0;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        if (key[i] < 0 || key[i] >= nl) {
            bad = 1;
            break;
        }
        m += lut[key[i]] != 0;
    }
    Py_END_ALLOW_THREADS
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "keep: a key outside the table");
        goto done;
    }
    char *vo = NULL, *wo = NULL;
    if (!(vout = new_bytes(m * 8, &vo)) || !(wout = new_bytes(m * 8, &wo)))
        goto done;
    Py_BEGIN_ALLOW_THREADS
    const double *v = vb.buf;
    const int64_t *w = wb.buf;
    double *dv = (double *)vo;
    int64_t *dw = (int64_t *)wo;
    Py_ssize_t j = 0;
    for (Py_ssize_t i = 0; i < n && j < m; i++) {
        if (lut[key[i]]) {
            dv[j] = v[i];
            dw[j] = w[i];
            j++;
        }
    }
    Py_END_ALLOW_THREADS
    result = PyTuple_Pack(2, vout, wout);
done:
    Py_XDECREF(vout);
    Py_XDECREF(wout);
    PyBuffer_Release(&vb);
    PyBuffer_Release(&wb);
    PyBuffer_Release(&kb);
    PyBuffer_Release(&lb);
    return result;
}

static PyMethodDef methods[] = {
    {"gaps", gaps, METH_VARARGS,
     "gaps(times, t_off, tokens, k_off, rows, osl, a, b) -> (gaps, weights, known, in_span)"},
    {"batch", batch, METH_VARARGS,
     "batch(v, w) -> (stats, keys, counts, wcounts), or None where v holds a NaN"},
    {"keep", keep, METH_VARARGS, "keep(v, w, keys, wanted) -> (v, w) of the wanted keys"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_chunkstats",
    "The per-value loops of the streamed summary of a long run.", -1, methods,
};

PyMODINIT_FUNC PyInit__chunkstats(void) { return PyModule_Create(&module); }
