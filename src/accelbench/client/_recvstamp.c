/* The hot path of client/http1.py's ReceiveHub, compiled: one epoll_wait over a pool's
 * sockets and one recvmsg per ready socket, each read stamped with the kernel's receive
 * time (SO_TIMESTAMPNS) converted to CLOCK_MONOTONIC, the clock of time.monotonic_ns;
 * and, for a streaming response in its usual shape, the whole per-chunk path: the
 * chunked framing, the SSE event, the JSON fields the record needs (the event's text),
 * and the record's marks. It does in C what ReceiveHub._read_py, HTTP1Protocol._process
 * (its whole-chunk fast path), SSEParser.single and ResponseHandler._token do in Python;
 * those stay the fallback where this does not build, and handle every read this leaves
 * to them. benchmarks/README.md states what it saves.
 *
 * read_ready(epfd, off_ns, prev_off_ns, prev_at_ns, max_age_ns, slack_ns, fast, counts
 *            [, relay, partial])
 *     -> (reads, n_reads, n_stamped, max_delay_ns, n_relayed); reads: list of
 *   (fd, data, t_ns, delay_ns):
 *   data: the bytes read (or what is left of them, below); t_ns: the kernel stamp
 *   converted to monotonic time with the realtime offset read now (off_ns) or at the
 *   previous look (prev_off_ns, at prev_at_ns), whichever is nearer the arrival, when it
 *   is no older than max_age_ns; else the monotonic time of the read; delay_ns: how long
 *   the bytes waited before the read, or -1 without a usable stamp. A stamp up to
 *   slack_ns after the read (the offsets' uncertainty) is taken as the read's own time.
 *   data None: the socket ended; delay_ns is then its errno (0 for an orderly close).
 *   Every read is counted in n_reads; a stamped one in n_stamped and in the histogram
 *   `counts` (ReceiveDelays.counts, updated in place; max_delay_ns its largest delay).
 *
 *   fast: {fd: (handler, record, record.chunk_times, handler.texts, chat, max_chunks,
 *   max_chars)} for the connections whose
 *   response is a 200 event stream in the state where a whole chunk is one event
 *   (ResponseHandler.c_fields). Of such a read, every leading whole chunk that is one
 *   `data: {json}\n\n` content event is taken here, exactly as ResponseHandler._token's
 *   fast path takes it: record.chunk_times gets t_ns (record.t_first too if it is the
 *   first), record.t_last = t_ns, handler.texts the text, handler.text_len its length,
 *   handler.usage_marks None. At the first chunk it does not take (anything else: the
 *   last chunk, a finish_reason, usage, an error, a JSON value it does not accept, a
 *   partial chunk) the fd leaves `fast` and the rest of the read goes back to Python in
 *   `reads`; a read taken whole is not in `reads`. What is taken here never differs from
 *   what Python would do: the JSON scanner below accepts a subset of what orjson.loads
 *   accepts (a key with an escape, a lone surrogate, a number that might overflow a
 *   double, nesting deeper than 64: Python's), and anything it cannot decide goes back.
 *
 *   relay: {fd: (caller_fd, out, idx)} for the shadow proxy's baseline connections whose
 *   response is a chunked body between whole chunks, relayed to a caller whose
 *   connection has nothing waiting to be written (ReceiveHub.relay). A read of such an fd
 *   that is whole content chunks, and nothing else, is sent to caller_fd here (a dup of
 *   the caller's socket, so a descriptor closed and reused meanwhile is never written),
 *   and each chunk's payload is appended to the bytearray `out` as the frame the proxy's
 *   _Remote.on_data queues for the candidate process (candidate.py base(): length, 'D',
 *   idx, t_ns, payload; none when out is None): what Python does for it, without Python.
 *   Any other read (the last chunk, a partial one, anything else) is sent too (all of a
 *   read is the response's: HTTP1Protocol._teed), leaves `relay` and goes back whole to
 *   be parsed, nothing of it queued here; so does a read the caller's socket took only
 *   in part or not at all. Each read given back so has its sent byte count in `partial`
 *   {fd: sent}: Python tees only the rest.
 *   n_relayed (the fifth value returned) counts the reads relayed here.
 *
 * take_frames(buf, pos, fast) -> pos
 *   The other end of `relay`: the shadow proxy's candidate process reading the frames
 *   queued for it (shadow/candidate.py _Frames). fast: {idx: ResponseHandler.c_fields()}
 *   for the baseline responses in the state above. Every leading whole 'D' frame of buf
 *   from pos whose idx is in fast and whose payload is one `data: {json}\n\n` content
 *   event is taken here, by the same code as a chunk of `fast` above (the same marks, the
 *   same refusals); returns the offset of the first frame left to Python.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>

#ifndef SCM_TIMESTAMPNS
#define SCM_TIMESTAMPNS 35
#endif

#define MAX_EVENTS 1024
#define READ_SIZE 65536

static char read_buf[READ_SIZE]; /* used with the GIL held: one caller at a time */
static char text_buf[READ_SIZE]; /* an unescaped text (never longer than its read) */

/* -- a strict JSON scanner: a subset of RFC 8259 as orjson reads it ---------------------- */
typedef const unsigned char *cp;

#define MAX_DEPTH 64

static cp ws(cp p, cp e) {
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    return p;
}

static int hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static long hex4(cp p) {
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(p[i]);
        if (h < 0) return -1;
        v = v * 16 + h;
    }
    return v;
}

/* One UTF-8 sequence starting at p (*p >= 0x80), strictly (no overlong form, surrogate
 * or code point above U+10FFFF): its length, or 0 if it is not one. */
static int utf8_len(cp p, cp e) {
    unsigned char c = p[0];
    int n;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0;
        else if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90;
        else if (c == 0xF4) hi = 0x8F;
    } else return 0;
    if (e - p < n) return 0;
    if (p[1] < lo || p[1] > hi) return 0;
    for (int i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF) return 0;
    return n;
}

/* A string at p ('"'): returns the byte after its closing quote, NULL if it is not one
 * we accept; *esc is set when it holds an escape. */
static cp scan_string(cp p, cp e, int *esc) {
    p++;
    *esc = 0;
    while (p < e) {
        unsigned char c = *p;
        if (c == '"') return p + 1;
        if (c < 0x20) return NULL;
        if (c == '\\') {
            *esc = 1;
            if (e - p < 2) return NULL;
            unsigned char k = p[1];
            if (k == 'u') {
                if (e - p < 6) return NULL;
                long v = hex4(p + 2);
                if (v < 0) return NULL;
                if (v >= 0xDC00 && v <= 0xDFFF) return NULL; /* a lone low surrogate */
                if (v >= 0xD800 && v <= 0xDBFF) {            /* needs its low half next */
                    if (e - p < 12 || p[6] != '\\' || p[7] != 'u') return NULL;
                    long w = hex4(p + 8);
                    if (w < 0xDC00 || w > 0xDFFF) return NULL;
                    p += 12;
                } else p += 6;
                continue;
            }
            if (!(k == '"' || k == '\\' || k == '/' || k == 'b' || k == 'f' || k == 'n' ||
                  k == 'r' || k == 't'))
                return NULL;
            p += 2;
            continue;
        }
        if (c >= 0x80) {
            int n = utf8_len(p, e);
            if (!n) return NULL;
            p += n;
            continue;
        }
        p++;
    }
    return NULL;
}

/* A number: at most 100 integer digits and a 2-digit exponent, so that it cannot
 * overflow a double (which orjson refuses). */
static cp scan_number(cp p, cp e) {
    if (p < e && *p == '-') p++;
    if (p >= e) return NULL;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') {
        cp s = p;
        while (p < e && *p >= '0' && *p <= '9') p++;
        if (p - s > 100) return NULL;
    } else return NULL;
    if (p < e && *p == '.') {
        p++;
        cp s = p;
        while (p < e && *p >= '0' && *p <= '9') p++;
        if (p == s) return NULL;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < e && (*p == '+' || *p == '-')) p++;
        cp s = p;
        while (p < e && *p >= '0' && *p <= '9') p++;
        if (p == s || p - s > 2) return NULL;
    }
    return p;
}

static cp scan_value(cp p, cp e, int depth);

/* The members of an object at p ('{'); for each, on_member(key, key_len, value, ctx). */
typedef void (*member_fn)(cp key, Py_ssize_t klen, cp val, void *ctx);

static cp scan_object(cp p, cp e, int depth, member_fn on_member, void *ctx) {
    if (depth > MAX_DEPTH) return NULL;
    p = ws(p + 1, e);
    if (p < e && *p == '}') return p + 1;
    for (;;) {
        if (p >= e || *p != '"') return NULL;
        int esc;
        cp k = p + 1;
        cp q = scan_string(p, e, &esc);
        if (q == NULL || esc) return NULL; /* a key with an escape might be any name */
        Py_ssize_t klen = (q - 1) - k;
        p = ws(q, e);
        if (p >= e || *p != ':') return NULL;
        p = ws(p + 1, e);
        cp v = p;
        p = scan_value(p, e, depth + 1);
        if (p == NULL) return NULL;
        if (on_member) on_member(k, klen, v, ctx);
        p = ws(p, e);
        if (p < e && *p == ',') {
            p = ws(p + 1, e);
            continue;
        }
        if (p < e && *p == '}') return p + 1;
        return NULL;
    }
}

static cp scan_array(cp p, cp e, int depth, cp *first) {
    if (depth > MAX_DEPTH) return NULL;
    p = ws(p + 1, e);
    if (first) *first = NULL;
    if (p < e && *p == ']') return p + 1;
    for (;;) {
        if (first && *first == NULL) *first = p;
        p = scan_value(p, e, depth + 1);
        if (p == NULL) return NULL;
        p = ws(p, e);
        if (p < e && *p == ',') {
            p = ws(p + 1, e);
            continue;
        }
        if (p < e && *p == ']') return p + 1;
        return NULL;
    }
}

static cp scan_value(cp p, cp e, int depth) {
    if (p >= e) return NULL;
    int esc;
    switch (*p) {
    case '{': return scan_object(p, e, depth, NULL, NULL);
    case '[': return scan_array(p, e, depth, NULL);
    case '"': return scan_string(p, e, &esc);
    case 't': return (e - p >= 4 && memcmp(p, "true", 4) == 0) ? p + 4 : NULL;
    case 'f': return (e - p >= 5 && memcmp(p, "false", 5) == 0) ? p + 5 : NULL;
    case 'n': return (e - p >= 4 && memcmp(p, "null", 4) == 0) ? p + 4 : NULL;
    default: return scan_number(p, e);
    }
}

#define KEY(k, name) (klen == (Py_ssize_t)sizeof(name) - 1 && memcmp(k, name, klen) == 0)
#define IS_NULL(v) ((v)[0] == 'n')

/* the last occurrence of each name counts, as in the dict orjson builds */
typedef struct {
    int error;
    cp usage, choices;
} Top;

static void top_member(cp k, Py_ssize_t klen, cp v, void *ctx) {
    Top *t = ctx;
    if (KEY(k, "error")) t->error = 1;
    else if (KEY(k, "usage")) t->usage = v;
    else if (KEY(k, "choices")) t->choices = v;
}

typedef struct {
    cp finish, text, delta;
} Choice;

static void choice_member(cp k, Py_ssize_t klen, cp v, void *ctx) {
    Choice *c = ctx;
    if (KEY(k, "finish_reason")) c->finish = v;
    else if (KEY(k, "text")) c->text = v;
    else if (KEY(k, "delta")) c->delta = v;
}

typedef struct {
    cp content, reasoning_content, reasoning;
} Delta;

static void delta_member(cp k, Py_ssize_t klen, cp v, void *ctx) {
    Delta *d = ctx;
    if (KEY(k, "content")) d->content = v;
    else if (KEY(k, "reasoning_content")) d->reasoning_content = v;
    else if (KEY(k, "reasoning")) d->reasoning = v;
}

/* The text of a string value at v (already scanned), as str; NULL without an exception
 * when it is not a string we take (not a string, or empty). */
static PyObject *string_value(cp v, cp e) {
    int esc;
    if (*v != '"') return NULL;
    cp q = scan_string(v, e, &esc);
    if (q == NULL || q - v == 2) return NULL;
    cp s = v + 1, t = q - 1;
    if (!esc) return PyUnicode_DecodeUTF8((const char *)s, t - s, "strict");
    char *o = text_buf;
    while (s < t) {
        if (*s != '\\') {
            *o++ = (char)*s++;
            continue;
        }
        unsigned char k = s[1];
        if (k != 'u') {
            char c = k == 'b' ? '\b' : k == 'f' ? '\f' : k == 'n' ? '\n' : k == 'r' ? '\r'
                   : k == 't' ? '\t' : (char)k;
            *o++ = c;
            s += 2;
            continue;
        }
        long cpt = hex4(s + 2);
        s += 6;
        if (cpt >= 0xD800 && cpt <= 0xDBFF) {
            cpt = 0x10000 + ((cpt - 0xD800) << 10) + (hex4(s + 2) - 0xDC00);
            s += 6;
        }
        if (cpt < 0x80) *o++ = (char)cpt;
        else if (cpt < 0x800) {
            *o++ = (char)(0xC0 | (cpt >> 6));
            *o++ = (char)(0x80 | (cpt & 0x3F));
        } else if (cpt < 0x10000) {
            *o++ = (char)(0xE0 | (cpt >> 12));
            *o++ = (char)(0x80 | ((cpt >> 6) & 0x3F));
            *o++ = (char)(0x80 | (cpt & 0x3F));
        } else {
            *o++ = (char)(0xF0 | (cpt >> 18));
            *o++ = (char)(0x80 | ((cpt >> 12) & 0x3F));
            *o++ = (char)(0x80 | ((cpt >> 6) & 0x3F));
            *o++ = (char)(0x80 | (cpt & 0x3F));
        }
    }
    return PyUnicode_DecodeUTF8(text_buf, o - text_buf, "strict");
}

/* The text of a content event's JSON payload, as ResponseHandler._token's fast path
 * takes it: an object without "error", with "usage" absent or null, whose "choices" is a
 * non-empty array whose first item is an object with "finish_reason" absent or null and
 * a non-empty string "text" (chat: a "delta" object with a non-empty string "content"
 * and "reasoning_content", "reasoning" absent or null). NULL without an exception for
 * anything else (Python decides it), NULL with one on a Python error. */
static PyObject *content_text(cp p, cp e, int chat) {
    p = ws(p, e);
    if (p >= e || *p != '{') return NULL;
    Top top = {0, NULL, NULL};
    cp q = scan_object(p, e, 1, top_member, &top);
    if (q == NULL || ws(q, e) != e) return NULL;
    if (top.error || (top.usage && !IS_NULL(top.usage)) || top.choices == NULL ||
        *top.choices != '[')
        return NULL;
    cp first;
    if (scan_array(top.choices, e, 2, &first) == NULL || first == NULL || *first != '{')
        return NULL;
    Choice c = {NULL, NULL, NULL};
    if (scan_object(first, e, 3, choice_member, &c) == NULL) return NULL;
    if (c.finish && !IS_NULL(c.finish)) return NULL;
    if (!chat) return c.text ? string_value(c.text, e) : NULL;
    if (c.delta == NULL || *c.delta != '{') return NULL;
    Delta d = {NULL, NULL, NULL};
    if (scan_object(c.delta, e, 4, delta_member, &d) == NULL) return NULL;
    if ((d.reasoning_content && !IS_NULL(d.reasoning_content)) ||
        (d.reasoning && !IS_NULL(d.reasoning)))
        return NULL;
    return d.content ? string_value(d.content, e) : NULL;
}

/* -- the chunks of one read ------------------------------------------------------------ */
static PyObject *s_t_first, *s_t_last, *s_text_len, *s_usage_marks;

/* A chunk-size line of 1 to 15 hex digits (no extension) before the CRLF at eol. */
static long long chunk_size(const char *p, const char *eol) {
    Py_ssize_t n = eol - p;
    if (n <= 0 || n >= 16) return -1;
    long long v = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int h = hexval((unsigned char)p[i]);
        if (h < 0) return -1;
        v = v * 16 + h;
    }
    return v;
}

/* A response's fields (ResponseHandler.c_fields) while its events are taken here. */
typedef struct {
    PyObject *handler, *rec, *times, *texts, *len_o, *t_o;
    int chat, first;
    Py_ssize_t max_chunks;
    long long max_chars, text_len, t;
} take_state;

/* Reads `fields` into *s: 1 when its events may be taken, 0 when not (Python's), -1 on a
 * Python error; take_end releases what this holds. */
static int take_begin(PyObject *fields, take_state *s, long long t) {
    memset(s, 0, sizeof *s);
    s->t = t;
    if (!PyTuple_Check(fields) || PyTuple_GET_SIZE(fields) != 7) {
        PyErr_SetString(PyExc_TypeError, "fast: (handler, record, chunk_times, texts, chat, "
                                         "max_chunks, max_chars) expected");
        return -1;
    }
    s->handler = PyTuple_GET_ITEM(fields, 0);
    s->rec = PyTuple_GET_ITEM(fields, 1);
    s->times = PyTuple_GET_ITEM(fields, 2);
    s->texts = PyTuple_GET_ITEM(fields, 3);
    s->chat = PyTuple_GET_ITEM(fields, 4) == Py_True;
    s->max_chunks = PyLong_AsSsize_t(PyTuple_GET_ITEM(fields, 5));
    s->max_chars = PyLong_AsLongLong(PyTuple_GET_ITEM(fields, 6));
    if ((s->max_chunks == -1 || s->max_chars == -1) && PyErr_Occurred()) return -1;
    if (!PyList_CheckExact(s->times) || !PyList_CheckExact(s->texts)) return 0;
    s->len_o = PyObject_GetAttr(s->handler, s_text_len);
    if (s->len_o == NULL) return -1;
    if (!PyLong_CheckExact(s->len_o)) return 0;
    s->text_len = PyLong_AsLongLong(s->len_o);
    if (s->text_len == -1 && PyErr_Occurred()) return -1;
    s->first = PyList_GET_SIZE(s->times) == 0;
    return 1;
}

/* One SSE event alone, c[0:size] (`data: ` ... `\n\n`, no other line end:
 * SSEParser.single), taken as ResponseHandler._token's fast path takes it: its time and
 * text appended. Returns 1 when taken, 0 when not (anything else, or a limit reached:
 * Python decides, and fails the request), -1 on a Python error. */
static int take_event(take_state *s, const char *c, Py_ssize_t size) {
    if (size < 8 || memcmp(c, "data: ", 6) != 0 || c[size - 1] != '\n' ||
        c[size - 2] != '\n' || memchr(c, '\n', size - 2) || memchr(c, '\r', size))
        return 0;
    PyObject *text = content_text((cp)c + 6, (cp)c + size - 2, s->chat);
    if (text == NULL) return PyErr_Occurred() ? -1 : 0;
    Py_ssize_t tl = PyUnicode_GET_LENGTH(text);
    if (PyList_GET_SIZE(s->times) + 1 > s->max_chunks || s->text_len + tl > s->max_chars) {
        Py_DECREF(text); /* the handler's limit: Python fails the request */
        return 0;
    }
    if (s->t_o == NULL && (s->t_o = PyLong_FromLongLong(s->t)) == NULL) {
        Py_DECREF(text);
        return -1;
    }
    int rc = PyList_Append(s->times, s->t_o);
    if (rc == 0) rc = PyList_Append(s->texts, text);
    Py_DECREF(text);
    if (rc < 0) return -1;
    s->text_len += tl;
    return 1;
}

/* The marks of the events taken (if any), as _token leaves them; releases *s. 0, or -1 on
 * a Python error. */
static int take_end(take_state *s, int taken) {
    int rc = 0;
    if (taken) {
        PyObject *nl = PyLong_FromLongLong(s->text_len);
        rc = nl == NULL ? -1 : PyObject_SetAttr(s->handler, s_text_len, nl);
        Py_XDECREF(nl);
        if (rc == 0 && s->first) rc = PyObject_SetAttr(s->rec, s_t_first, s->t_o);
        if (rc == 0) rc = PyObject_SetAttr(s->rec, s_t_last, s->t_o);
        if (rc == 0) rc = PyObject_SetAttr(s->handler, s_usage_marks, Py_None);
    }
    Py_XDECREF(s->len_o);
    Py_XDECREF(s->t_o);
    return rc;
}

/* Takes the leading whole content chunks of buf[0:n] (see the top): returns how many
 * bytes it took, -1 on a Python error. */
static Py_ssize_t take_chunks(PyObject *fields, const char *buf, Py_ssize_t n, long long t) {
    take_state s;
    Py_ssize_t pos = 0, taken = 0;
    int ok = take_begin(fields, &s, t);
    if (ok < 0) goto error;
    while (ok && pos < n) {
        /* the chunk-size line's CRLF within 18 bytes (HTTP1Protocol._process) */
        const char *p = buf + pos, *lim = buf + (n - pos < 18 ? n : pos + 18), *eol = NULL;
        for (const char *x = p; x + 1 < lim; x++)
            if (x[0] == '\r' && x[1] == '\n') {
                eol = x;
                break;
            }
        if (eol == NULL || eol == p) break;
        long long size = chunk_size(p, eol);
        if (size <= 0) break;
        Py_ssize_t start = (eol - buf) + 2;
        if (size > n - start - 2) break;
        Py_ssize_t end = start + (Py_ssize_t)size;
        if (buf[end] != '\r' || buf[end + 1] != '\n') break;
        int r = take_event(&s, buf + start, (Py_ssize_t)size);
        if (r < 0) goto error;
        if (r == 0) break;
        taken++;
        pos = end + 2;
    }
    if (take_end(&s, taken > 0) < 0) return -1;
    return pos;
error:
    take_end(&s, 0);
    return -1;
}

static uint64_t get_be(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v = v << 8 | p[i];
    return v;
}

/* take_frames(buf, pos, fast) -> pos: the candidate process's reading of the proxy's
 * frames (shadow/candidate.py _Frames), the baseline's data events taken as read_ready's
 * `fast` takes a chunk. From buf[pos:], every leading whole frame that is a data frame
 * (4-byte length, 'D', idx, t_ns: two big-endian uint64, the payload) of an idx in
 * `fast` (idx -> ResponseHandler.c_fields) whose payload is one content event is taken
 * here, exactly as ResponseHandler.on_data would take it; returns the offset of the
 * first frame left to Python (any other frame, a payload of another shape, an idx not
 * in `fast`, a limit reached: Python parses it and offers the idx again), or of the
 * incomplete frame at the end. */
static PyObject *take_frames(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos;
    PyObject *fast;
    if (!PyArg_ParseTuple(args, "y*nO!", &view, &pos, &PyDict_Type, &fast)) return NULL;
    const unsigned char *buf = (const unsigned char *)view.buf;
    Py_ssize_t n = view.len;
    if (pos < 0 || pos > n) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "take_frames: pos out of range");
        return NULL;
    }
    while (n - pos >= 21) {
        const unsigned char *p = buf + pos;
        Py_ssize_t len = (Py_ssize_t)get_be(p, 4);
        if (len < 17 || p[4] != 'D' || len > n - pos - 4) break;
        PyObject *key = PyLong_FromUnsignedLongLong(get_be(p + 5, 8));
        if (key == NULL) goto error;
        PyObject *fields = PyDict_GetItemWithError(fast, key); /* borrowed */
        Py_DECREF(key);
        if (fields == NULL) {
            if (PyErr_Occurred()) goto error;
            break;
        }
        take_state s;
        int r = take_begin(fields, &s, (long long)get_be(p + 13, 8));
        if (r > 0) r = take_event(&s, (const char *)p + 21, len - 17);
        if (take_end(&s, r > 0) < 0 || r < 0) goto error;
        if (r == 0) break;
        pos += 4 + len;
    }
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(pos);
error:
    PyBuffer_Release(&view);
    return NULL;
}

/* ReceiveDelays.add in C: quarter-octave buckets of ~microseconds (1.024 us). */
static int count_delay(PyObject *counts, long long d) {
    long long us = d >> 10;
    Py_ssize_t i;
    if (us < 4) i = (Py_ssize_t)us;
    else {
        int b = 64 - __builtin_clzll((unsigned long long)us);
        long long k = 4LL * b + ((us >> (b - 3)) & 3) - 8;
        i = (Py_ssize_t)(k < 159 ? k : 159);
    }
    if (i >= PyList_GET_SIZE(counts)) return 0;
    PyObject *old = PyList_GET_ITEM(counts, i);
    long long v = PyLong_AsLongLong(old);
    if (v == -1 && PyErr_Occurred()) return -1;
    PyObject *nv = PyLong_FromLongLong(v + 1);
    if (nv == NULL) return -1;
    PyList_SET_ITEM(counts, i, nv);
    Py_DECREF(old);
    return 0;
}

static void put_be(char *p, uint64_t v, int n) {
    for (int i = n - 1; i >= 0; i--, v >>= 8) p[i] = (char)(v & 0xff);
}

/* The relay of one read (`relay` above): every byte is sent to the caller as far as its
 * socket takes them (*sent); returns 1 when the read was whole content chunks, all sent,
 * and their frames queued; 0 when Python must parse it (and send what is left of it);
 * -2 on a Python error. */
static int relay_read(PyObject *rel, const char *buf, Py_ssize_t n, long long t,
                      Py_ssize_t *sent_out) {
    if (!PyTuple_Check(rel) || PyTuple_GET_SIZE(rel) != 3) {
        PyErr_SetString(PyExc_TypeError, "relay: (caller_fd, out, idx) expected");
        return -2;
    }
    int cfd = (int)PyLong_AsLong(PyTuple_GET_ITEM(rel, 0));
    PyObject *out = PyTuple_GET_ITEM(rel, 1);
    unsigned long long idx = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(rel, 2));
    if (PyErr_Occurred()) return -2;
    if (out != Py_None && !PyByteArray_Check(out)) {
        PyErr_SetString(PyExc_TypeError, "relay: out must be a bytearray or None");
        return -2;
    }
    Py_ssize_t pos = 0, payload = 0, chunks = 0;
    int whole = 1;
    while (pos < n) { /* whole chunks only, as HTTP1Protocol._process's fast path */
        const char *p = buf + pos, *lim = buf + (n - pos < 18 ? n : pos + 18), *eol = NULL;
        for (const char *x = p; x + 1 < lim; x++)
            if (x[0] == '\r' && x[1] == '\n') {
                eol = x;
                break;
            }
        long long size = eol == NULL || eol == p ? -1 : chunk_size(p, eol);
        Py_ssize_t start = eol == NULL ? 0 : (eol - buf) + 2;
        if (size <= 0 || size > n - start - 2 || buf[start + size] != '\r' ||
            buf[start + size + 1] != '\n') {
            whole = 0;
            break;
        }
        payload += (Py_ssize_t)size;
        chunks++;
        pos = start + (Py_ssize_t)size + 2;
    }
    if (chunks == 0) whole = 0;
    /* The bytes go to the caller whatever their shape: all of a read is the response's
     * (HTTP1Protocol._teed), and on a kept-alive connection nothing comes after it
     * before the next request. */
    Py_ssize_t sent = 0;
    while (sent < n) {
        ssize_t w = send(cfd, buf + sent, (size_t)(n - sent), MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) continue;
            break; /* full or broken: Python writes the rest through the transport */
        }
        sent += w;
    }
    *sent_out = sent;
    if (!whole || sent < n) return 0;
    if (out == Py_None) return 1;
    Py_ssize_t old = PyByteArray_GET_SIZE(out);
    if (PyByteArray_Resize(out, old + payload + chunks * 21) < 0) return -2;
    char *q = PyByteArray_AS_STRING(out) + old;
    pos = 0;
    while (pos < n) { /* the same walk, now known to be whole chunks */
        const char *p = buf + pos, *eol = p;
        while (!(eol[0] == '\r' && eol[1] == '\n')) eol++;
        long long size = chunk_size(p, eol);
        const char *c = eol + 2;
        put_be(q, (uint64_t)(17 + size), 4); /* candidate.py: _HEAD, 'D', _EV (idx, t) */
        q[4] = 'D';
        put_be(q + 5, idx, 8);
        put_be(q + 13, (uint64_t)t, 8);
        memcpy(q + 21, c, (size_t)size);
        q += 21 + size;
        pos = (c - buf) + (Py_ssize_t)size + 2;
    }
    return 1;
}

static PyObject *read_ready(PyObject *self, PyObject *args) {
    int epfd;
    long long off, prev_off, prev_at, max_age, slack;
    PyObject *fast, *counts, *relay = NULL, *partial = NULL;
    if (!PyArg_ParseTuple(args, "iLLLLLO!O!|O!O!", &epfd, &off, &prev_off, &prev_at, &max_age,
                          &slack, &PyDict_Type, &fast, &PyList_Type, &counts, &PyDict_Type,
                          &relay, &PyDict_Type, &partial))
        return NULL;
    if (relay != NULL && PyDict_GET_SIZE(relay) == 0) relay = NULL;
    struct epoll_event evs[MAX_EVENTS];
    long long n_reads = 0, n_stamped = 0, max_delay = 0, n_relayed = 0;
    int n = epoll_wait(epfd, evs, MAX_EVENTS, 0);
    if (n < 0) {
        if (errno != EINTR) return PyErr_SetFromErrno(PyExc_OSError);
        n = 0;
    }
    PyObject *out = PyList_New(0);
    if (out == NULL) return NULL;
    for (int i = 0; i < n; i++) {
        int fd = evs[i].data.fd; /* CPython's select.epoll registers data.fd */
        struct iovec iov = {read_buf, READ_SIZE};
        union {
            char b[CMSG_SPACE(sizeof(struct timespec)) * 2];
            struct cmsghdr align;
        } ctl;
        struct msghdr msg;
        memset(&msg, 0, sizeof msg);
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = ctl.b;
        msg.msg_controllen = sizeof ctl.b;
        ssize_t r = recvmsg(fd, &msg, 0);
        PyObject *item, *key = NULL;
        if (r <= 0) {
            if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
            long long err = r < 0 ? (long long)errno : 0LL;
            /* the connection ended: Python ends its response */
            if ((key = PyLong_FromLong(fd)) == NULL) goto error;
            if (PyDict_DelItem(fast, key) < 0) {
                if (!PyErr_ExceptionMatches(PyExc_KeyError)) goto error;
                PyErr_Clear();
            }
            if (relay != NULL && PyDict_DelItem(relay, key) < 0) {
                if (!PyErr_ExceptionMatches(PyExc_KeyError)) goto error;
                PyErr_Clear();
            }
            Py_CLEAR(key);
            item = Py_BuildValue("(iOLL)", fd, Py_None, 0LL, err);
        } else {
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            long long t = (long long)now.tv_sec * 1000000000LL + now.tv_nsec;
            long long delay = -1;
            for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS &&
                    c->cmsg_len >= CMSG_LEN(sizeof(struct timespec))) {
                    struct timespec ts;
                    memcpy(&ts, CMSG_DATA(c), sizeof ts);
                    long long real = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
                    long long k = real - off;
                    if (t - k > k - prev_at) k = real - prev_off; /* nearer the previous look */
                    long long d = t - k;
                    if (d >= -slack && d < max_age) { /* else the wall clock was stepped */
                        delay = d > 0 ? d : 0;
                        t = d > 0 ? k : t;
                    }
                }
            }
            n_reads++;
            if (delay >= 0) {
                n_stamped++;
                if (delay > max_delay) max_delay = delay;
                if (count_delay(counts, delay) < 0) goto error;
            }
            Py_ssize_t took = 0;
            if ((key = PyLong_FromLong(fd)) == NULL) goto error;
            if (relay != NULL) {
                PyObject *rel = PyDict_GetItemWithError(relay, key); /* borrowed */
                if (rel == NULL && PyErr_Occurred()) goto error;
                if (rel != NULL) {
                    Py_ssize_t sent = 0;
                    Py_INCREF(rel);
                    int rc = relay_read(rel, read_buf, r, t, &sent);
                    Py_DECREF(rel);
                    if (rc == -2) goto error;
                    if (rc == 1) {
                        n_relayed++;
                        Py_CLEAR(key);
                        continue; /* relayed and queued whole */
                    }
                    if (PyDict_DelItem(relay, key) < 0) goto error; /* Python's now */
                    if (partial != NULL) { /* what of it the caller has already */
                        PyObject *sv = PyLong_FromSsize_t(sent);
                        if (sv == NULL) goto error;
                        int rc = PyDict_SetItem(partial, key, sv);
                        Py_DECREF(sv);
                        if (rc < 0) goto error;
                    }
                }
            }
            PyObject *fields = PyDict_GetItemWithError(fast, key); /* borrowed */
            if (fields == NULL && PyErr_Occurred()) goto error;
            if (fields != NULL) {
                Py_INCREF(fields);
                took = take_chunks(fields, read_buf, r, t);
                Py_DECREF(fields);
                if (took < 0) goto error;
                if (took < r && PyDict_DelItem(fast, key) < 0) goto error; /* Python's now */
            }
            Py_CLEAR(key);
            if (took == r) continue; /* taken whole */
            PyObject *data = PyBytes_FromStringAndSize(read_buf + took, r - took);
            if (data == NULL) goto error;
            item = Py_BuildValue("(iNLL)", fd, data, t, delay);
        }
        if (item == NULL) goto error;
        int rc = PyList_Append(out, item);
        Py_DECREF(item);
        if (rc < 0) goto error;
        continue;
    error:
        Py_XDECREF(key);
        Py_DECREF(out);
        return NULL;
    }
    return Py_BuildValue("(NLLLL)", out, n_reads, n_stamped, max_delay, n_relayed);
}

static long long ns_of(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* clock_offset() -> (realtime minus monotonic, uncertainty) in ns: http1.clock_offset_ns
 * in C (a realtime reading between two monotonic ones, the narrowest of up to 5 tries). */
static PyObject *clock_offset(PyObject *self, PyObject *noargs) {
    long long best_w = -1, best_off = 0;
    for (int i = 0; i < 5; i++) {
        long long m1 = ns_of(CLOCK_MONOTONIC);
        long long r = ns_of(CLOCK_REALTIME);
        long long m2 = ns_of(CLOCK_MONOTONIC);
        long long w = m2 - m1;
        if (best_w < 0 || w < best_w) {
            best_w = w;
            best_off = r - (m1 + m2) / 2;
        }
        if (w < 20000) break;
    }
    return Py_BuildValue("(LL)", best_off, best_w / 2 + 1);
}

static PyMethodDef methods[] = {
    {"clock_offset", clock_offset, METH_NOARGS,
     "clock_offset() -> (realtime minus monotonic ns, uncertainty ns)"},
    {"read_ready", read_ready, METH_VARARGS,
     "read_ready(epfd, off_ns, prev_off_ns, prev_at_ns, max_age_ns, slack_ns, fast, counts"
     "[, relay, partial]) -> ([(fd, data | None, t_ns, delay_ns | errno)], reads, stamped, "
     "max_delay_ns, relayed)"},
    {"take_frames", take_frames, METH_VARARGS,
     "take_frames(buf, pos, fast) -> pos: the leading data frames of known responses, taken"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_recvstamp", "ReceiveHub's compiled read loop and per-chunk path.", -1, methods,
};

PyMODINIT_FUNC PyInit__recvstamp(void) {
    if (!(s_t_first = PyUnicode_InternFromString("t_first")) ||
        !(s_t_last = PyUnicode_InternFromString("t_last")) ||
        !(s_text_len = PyUnicode_InternFromString("text_len")) ||
        !(s_usage_marks = PyUnicode_InternFromString("usage_marks")))
        return NULL;
    return PyModule_Create(&module);
}
