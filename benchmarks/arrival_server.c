/* arrival_server.c: the stamp of each request's arrival at the server's socket, taken so
 * that it does not depend on the server keeping up (section 3 of side_by_side.py).
 *
 * Build: cc -O2 -o arrival_server arrival_server.c
 * Run:   arrival_server PORT OUT_FILE      (listens on 127.0.0.1:PORT; "ready" on stdout)
 *
 * Every accepted socket has SO_TIMESTAMPING with SOF_TIMESTAMPING_RX_SOFTWARE |
 * SOF_TIMESTAMPING_SOFTWARE (set on the listening socket first, so the kernel stamps
 * every packet from then on, also those queued before accept). recvmsg's SCM_TIMESTAMPING
 * cmsg then carries, for TCP, the software receive stamp of the last segment the read
 * returned (CLOCK_REALTIME): on loopback that is taken in netif_rx, inside the sender's
 * own send(). The request's arrival is the kernel stamp of the read that completed it
 * (its last byte). The stamp is converted to CLOCK_MONOTONIC, the clock the tools
 * schedule on, by an offset (realtime - monotonic) sampled at that read between two
 * monotonic reads (the narrowest of up to 4 such brackets); the user-space stamp (CLOCK_MONOTONIC right after that recvmsg) is
 * written too, so user - kernel is this server's own lateness.
 *
 * Answers: POST /v1/completions and /v1/chat/completions with a fixed two-event SSE
 * stream (one token, then [DONE]); GET /health and /v1/models; anything else 404.
 * HTTP/1.1 keep-alive, no pipelining (a client sends its next request after the reply).
 *
 * OUT_FILE, one line per generation request, written on SIGTERM/SIGINT:
 *   request_id kernel_mono_ns user_mono_ns kernel_real_ns offset_ns first_user_mono_ns
 * (request_id "-" when the request had no X-Request-Id; kernel fields 0 when the kernel
 * gave no stamp). Then a last line "# requests N stamped K".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/net_tstamp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef SO_TIMESTAMPING
#define SO_TIMESTAMPING 37
#endif
#ifndef SCM_TIMESTAMPING
#define SCM_TIMESTAMPING SO_TIMESTAMPING
#endif

#define BUF_MAX (1 << 20)

typedef struct {
    int fd;
    char *buf;
    size_t len, cap;
    int64_t first_user; /* monotonic stamp of the read that brought the request's first byte */
} conn_t;

static volatile sig_atomic_t stop;
static void on_signal(int s) { (void)s; stop = 1; }

static int64_t now_ns(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static const char *find_header(const char *h, size_t n, const char *name, size_t *vlen) {
    size_t nl = strlen(name);
    const char *p = h, *end = h + n;
    while (p < end) {
        const char *eol = memmem(p, (size_t)(end - p), "\r\n", 2);
        if (!eol) eol = end;
        if ((size_t)(eol - p) > nl && p[nl] == ':' && strncasecmp(p, name, nl) == 0) {
            const char *v = p + nl + 1;
            while (v < eol && (*v == ' ' || *v == '\t')) v++;
            const char *ve = eol;
            while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t')) ve--;
            *vlen = (size_t)(ve - v);
            return v;
        }
        p = eol + 2;
    }
    return NULL;
}

static const char SSE_HEAD[] =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
    "Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n";
static const char COMPLETION_EVENT[] =
    "data: {\"id\":\"cmpl-arrival\",\"object\":\"text_completion\",\"created\":0,"
    "\"model\":\"reference\",\"choices\":[{\"index\":0,\"text\":\"a\",\"logprobs\":null,"
    "\"finish_reason\":\"length\"}],\"usage\":null}\n\n";
static const char CHAT_EVENT[] =
    "data: {\"id\":\"chatcmpl-arrival\",\"object\":\"chat.completion.chunk\",\"created\":0,"
    "\"model\":\"reference\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\","
    "\"content\":\"a\"},\"finish_reason\":\"length\"}]}\n\n";
static const char DONE_EVENT[] = "data: [DONE]\n\n";

static void send_all(int fd, const char *p, size_t n) {
    /* replies are small; a full socket buffer here means a client that stopped reading */
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) { struct timespec t = {0, 100000}; nanosleep(&t, NULL); continue; }
            return;
        }
        p += w;
        n -= (size_t)w;
    }
}

static void send_plain(int fd, const char *status, const char *body) {
    char out[1024];
    int k = snprintf(out, sizeof out,
                     "HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                     "Connection: keep-alive\r\n\r\n%s", status, strlen(body), body);
    send_all(fd, out, (size_t)k);
}

static void send_sse(int fd, int chat) {
    const char *ev = chat ? CHAT_EVENT : COMPLETION_EVENT;
    size_t el = strlen(ev), dl = strlen(DONE_EVENT);
    char out[2048];
    int k = snprintf(out, sizeof out, "%s%zx\r\n%s\r\n%zx\r\n%s\r\n0\r\n\r\n", SSE_HEAD, el, ev, dl,
                     DONE_EVENT);
    send_all(fd, out, (size_t)k);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s PORT OUT_FILE\n", argv[0]);
        return 2;
    }
    int port = atoi(argv[1]);
    FILE *out = fopen(argv[2], "w");
    if (!out || port <= 0 || port > 65535) {
        fprintf(stderr, "error: bad port or cannot open %s\n", argv[2]);
        return 2;
    }
    static char obuf[1 << 22];
    setvbuf(out, obuf, _IOFBF, sizeof obuf);
    struct sigaction sa = {0};
    sa.sa_handler = on_signal; /* no SA_RESTART: epoll_wait returns EINTR */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    int ts_flags = SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE;
    int one = 1;
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (setsockopt(ls, SOL_SOCKET, SO_TIMESTAMPING, &ts_flags, sizeof ts_flags) != 0) {
        perror("SO_TIMESTAMPING");
        return 1;
    }
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(ls, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(ls, 4096) != 0) {
        perror("bind/listen");
        return 1;
    }
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
    printf("ready\n");
    fflush(stdout);

    char rbuf[65536];
    char cbuf[512];
    struct epoll_event evs[256];
    long requests = 0, stamped = 0;
    while (!stop) {
        int n = epoll_wait(ep, evs, 256, -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            perror("epoll_wait");
            break;
        }
        for (int i = 0; i < n; i++) {
            conn_t *c = evs[i].data.ptr;
            if (!c) {
                for (;;) {
                    int fd = accept4(ls, NULL, NULL, SOCK_NONBLOCK);
                    if (fd < 0) break;
                    setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING, &ts_flags, sizeof ts_flags);
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    conn_t *nc = calloc(1, sizeof *nc);
                    nc->fd = fd;
                    struct epoll_event e = {.events = EPOLLIN, .data.ptr = nc};
                    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
                }
                continue;
            }
            struct iovec iov = {rbuf, sizeof rbuf};
            struct msghdr m = {0};
            m.msg_iov = &iov;
            m.msg_iovlen = 1;
            m.msg_control = cbuf;
            m.msg_controllen = sizeof cbuf;
            ssize_t r = recvmsg(c->fd, &m, 0);
            int64_t user = now_ns(CLOCK_MONOTONIC);
            /* realtime - monotonic from the narrowest of up to 4 (mono, real, mono)
             * brackets: a bracket the scheduler cut in two would put half the cut in the
             * offset, and so in the converted stamp */
            int64_t offset = 0, width = INT64_MAX, m1 = user;
            for (int k = 0; k < 4 && width > 2000; k++) {
                if (k) m1 = now_ns(CLOCK_MONOTONIC);
                int64_t real = now_ns(CLOCK_REALTIME), m2 = now_ns(CLOCK_MONOTONIC);
                if (m2 - m1 < width) {
                    width = m2 - m1;
                    offset = real - (m1 + (m2 - m1) / 2);
                }
            }
            if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
            if (r <= 0) {
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                close(c->fd);
                free(c->buf);
                free(c);
                continue;
            }
            int64_t kreal = 0;
            for (struct cmsghdr *cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm)) {
                if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_TIMESTAMPING) {
                    struct timespec ts[3];
                    memcpy(ts, CMSG_DATA(cm), sizeof ts);
                    kreal = (int64_t)ts[0].tv_sec * 1000000000LL + ts[0].tv_nsec;
                }
            }
            if (c->len == 0) c->first_user = user;
            if (c->len + (size_t)r > c->cap) {
                size_t cap = c->cap ? c->cap : 8192;
                while (cap < c->len + (size_t)r) cap *= 2;
                if (cap > BUF_MAX) {
                    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                    close(c->fd);
                    free(c->buf);
                    free(c);
                    continue;
                }
                c->buf = realloc(c->buf, cap);
                c->cap = cap;
            }
            memcpy(c->buf + c->len, rbuf, (size_t)r);
            c->len += (size_t)r;
            for (;;) { /* every complete request in the buffer */
                char *he = memmem(c->buf, c->len, "\r\n\r\n", 4);
                if (!he) break;
                size_t hlen = (size_t)(he - c->buf) + 4, vl = 0;
                const char *cl = find_header(c->buf, hlen, "content-length", &vl);
                size_t body = cl ? (size_t)strtoull(cl, NULL, 10) : 0;
                if (c->len < hlen + body) break;
                int post = strncmp(c->buf, "POST ", 5) == 0;
                const char *path = c->buf + (post ? 5 : 4);
                int chat = strncmp(path, "/v1/chat/completions", 20) == 0;
                int gen = post && (chat || strncmp(path, "/v1/completions", 15) == 0);
                if (gen) {
                    const char *rid = find_header(c->buf, hlen, "x-request-id", &vl);
                    int64_t kmono = kreal ? kreal - offset : 0;
                    requests++;
                    stamped += kreal != 0;
                    fprintf(out, "%.*s %lld %lld %lld %lld %lld\n", rid ? (int)vl : 1,
                            rid ? rid : "-", (long long)kmono, (long long)user, (long long)kreal,
                            (long long)offset, (long long)c->first_user);
                    send_sse(c->fd, chat);
                } else if (!post && strncmp(path, "/health", 7) == 0) {
                    send_plain(c->fd, "200 OK", "{\"status\":\"ok\"}");
                } else if (!post && strncmp(path, "/v1/models", 10) == 0) {
                    send_plain(c->fd, "200 OK",
                               "{\"object\":\"list\",\"data\":[{\"id\":\"reference\","
                               "\"object\":\"model\",\"owned_by\":\"accelbench\"}]}");
                } else {
                    send_plain(c->fd, "404 Not Found", "{\"error\":\"not found\"}");
                }
                memmove(c->buf, c->buf + hlen + body, c->len - hlen - body);
                c->len -= hlen + body;
                c->first_user = user;
            }
        }
    }
    fprintf(out, "# requests %ld stamped %ld\n", requests, stamped);
    fclose(out);
    return 0;
}
