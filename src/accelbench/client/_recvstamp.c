/* The hot path of client/http1.py's ReceiveHub, compiled: one epoll_wait over a pool's
 * sockets and one recvmsg per ready socket, each read stamped with the kernel's receive
 * time (SO_TIMESTAMPNS) converted to CLOCK_MONOTONIC, the clock of time.monotonic_ns.
 * It does in C what ReceiveHub._read_py does in Python (which stays the fallback where
 * this does not build); benchmarks/README.md states what it saves.
 *
 * read_ready(epfd, off_ns, prev_off_ns, prev_at_ns, max_age_ns, slack_ns)
 *     -> list of (fd, data, t_ns, delay_ns):
 *   data: the bytes read; t_ns: the kernel stamp converted to monotonic time with the
 *   realtime offset read now (off_ns) or at the previous look (prev_off_ns, at
 *   prev_at_ns), whichever is nearer the arrival, when it is no older than max_age_ns;
 *   else the monotonic time of the read; delay_ns: how long the bytes waited before the
 *   read, or -1 without a usable stamp. A stamp up to slack_ns after the read (the
 *   offsets' uncertainty) is taken as the read's own time.
 *   data None: the socket ended; delay_ns is then its errno (0 for an orderly close).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
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

static PyObject *read_ready(PyObject *self, PyObject *args) {
    int epfd;
    long long off, prev_off, prev_at, max_age, slack;
    if (!PyArg_ParseTuple(args, "iLLLLL", &epfd, &off, &prev_off, &prev_at, &max_age, &slack))
        return NULL;
    struct epoll_event evs[MAX_EVENTS];
    int n = epoll_wait(epfd, evs, MAX_EVENTS, 0);
    if (n < 0) {
        if (errno == EINTR) return PyList_New(0);
        return PyErr_SetFromErrno(PyExc_OSError);
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
        PyObject *item;
        if (r < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
            item = Py_BuildValue("(iOLL)", fd, Py_None, 0LL, (long long)errno);
        } else if (r == 0) {
            item = Py_BuildValue("(iOLL)", fd, Py_None, 0LL, 0LL);
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
            PyObject *data = PyBytes_FromStringAndSize(read_buf, r);
            if (data == NULL) {
                Py_DECREF(out);
                return NULL;
            }
            item = Py_BuildValue("(iNLL)", fd, data, t, delay);
        }
        if (item == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        int rc = PyList_Append(out, item);
        Py_DECREF(item);
        if (rc < 0) {
            Py_DECREF(out);
            return NULL;
        }
    }
    return out;
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
     "read_ready(epfd, off_ns, prev_off_ns, prev_at_ns, max_age_ns, slack_ns) -> [(fd, data | None, t_ns, delay_ns | errno)]"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_recvstamp", "ReceiveHub's compiled read loop.", -1, methods,
};

PyMODINIT_FUNC PyInit__recvstamp(void) { return PyModule_Create(&module); }
