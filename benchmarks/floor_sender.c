/* floor_sender.c: the floor of open-loop sending on this machine (section 3 of
 * side_by_side.py). No HTTP client, no event loop: one thread sleeps to each request's
 * due time with clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) and writes a prebuilt
 * request on an idle keep-alive connection; a second thread reads the replies (epoll)
 * and hands their connections back. What this sender's requests miss their schedule by
 * is what the machine's scheduler leaves any sender.
 *
 * Build: cc -O2 -pthread -o floor_sender floor_sender.c
 * Run:   floor_sender PORT SCHEDULE OUT
 *   SCHEDULE: one offset a line, ns from the start (non-decreasing)
 *   OUT: one line a request, "c-INDEX t_sched_ns t_send_ns" (CLOCK_MONOTONIC), written
 *        at the end; exit 0 when every request got its whole reply within 30 s.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_FDS 65536

static int port, ep;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int free_fds[MAX_FDS], nfree;
static char tails[MAX_FDS][5]; /* the last 5 bytes read on each connection */
static long replies;

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int open_conn(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || fd >= MAX_FDS || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        perror("connect");
        exit(1);
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    memset(tails[fd], 0, 5);
    struct epoll_event e = {.events = EPOLLIN, .data.fd = fd};
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
    return fd;
}

static void *reader(void *arg) {
    (void)arg;
    char buf[65536];
    struct epoll_event evs[256];
    for (;;) {
        int n = epoll_wait(ep, evs, 256, -1);
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            ssize_t r = read(fd, buf, sizeof buf);
            if (r <= 0) {
                epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
                continue;
            }
            /* a reply ends with the chunked terminator "0\r\n\r\n" */
            char t[5 + 65536];
            memcpy(t, tails[fd], 5);
            memcpy(t + 5, buf, (size_t)r);
            memcpy(tails[fd], t + r, 5);
            if (memcmp(tails[fd], "0\r\n\r\n", 5) == 0) {
                memset(tails[fd], 0, 5);
                pthread_mutex_lock(&mu);
                free_fds[nfree++] = fd;
                replies++;
                pthread_mutex_unlock(&mu);
            }
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s PORT SCHEDULE OUT\n", argv[0]);
        return 2;
    }
    port = atoi(argv[1]);
    FILE *sf = fopen(argv[2], "r");
    if (port <= 0 || port > 65535 || !sf) {
        fprintf(stderr, "error: bad port or cannot read %s\n", argv[2]);
        return 2;
    }
    size_t n = 0, cap = 1024;
    int64_t *off = malloc(cap * sizeof *off);
    long long v;
    while (fscanf(sf, "%lld", &v) == 1) {
        if (n == cap) off = realloc(off, (cap *= 2) * sizeof *off);
        off[n++] = v;
    }
    fclose(sf);
    int64_t *sent = calloc(n ? n : 1, sizeof *sent);
    ep = epoll_create1(0);
    for (int i = 0; i < 32; i++) free_fds[nfree++] = open_conn();
    pthread_t th;
    pthread_create(&th, NULL, reader, NULL);

    char prompt[129];
    memset(prompt, 'a', 128);
    prompt[128] = 0;
    char body[512], req[1024];
    int bl = snprintf(body, sizeof body,
                      "{\"model\":\"reference\",\"prompt\":\"%s\",\"max_tokens\":1,\"stream\":true}",
                      prompt);
    int64_t start = now_ns() + 50000000LL;
    for (size_t i = 0; i < n; i++) {
        int64_t due = start + off[i];
        struct timespec ts = {due / 1000000000LL, due % 1000000000LL};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
        }
        pthread_mutex_lock(&mu);
        int fd = nfree ? free_fds[--nfree] : -1;
        pthread_mutex_unlock(&mu);
        if (fd < 0) fd = open_conn();
        int rl = snprintf(req, sizeof req,
                          "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Request-Id: c-%zu\r\n"
                          "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
                          i, bl, body);
        sent[i] = now_ns();
        if (send(fd, req, (size_t)rl, MSG_NOSIGNAL) != rl) {
            perror("send");
            return 1;
        }
    }
    int64_t give_up = now_ns() + 30000000000LL;
    for (;;) {
        pthread_mutex_lock(&mu);
        long got = replies;
        pthread_mutex_unlock(&mu);
        if (got >= (long)n || now_ns() > give_up) break;
        struct timespec t = {0, 1000000};
        nanosleep(&t, NULL);
    }
    FILE *out = fopen(argv[3], "w");
    if (!out) {
        perror("open OUT");
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        fprintf(out, "c-%zu %lld %lld\n", i, (long long)(start + off[i]), (long long)sent[i]);
    fclose(out);
    if (replies < (long)n) {
        fprintf(stderr, "only %ld of %zu replies\n", replies, n);
        return 1;
    }
    return 0;
}
