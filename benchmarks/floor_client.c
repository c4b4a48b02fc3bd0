/* The C floor of side_by_side.py's client-CPU section: the least a streaming client
 * can do per chunk on this machine. C keep-alive connections to HOST:PORT, each sends a
 * streamed /v1/completions request, reads whatever arrives into one buffer (epoll,
 * level-triggered, one read() per ready socket) and counts bytes and reads; a response
 * is over when the bytes read end with the chunked terminator "0\r\n\r\n". No HTTP or
 * SSE parsing, no timestamps kept. Then the next request on the same connection,
 * until N requests have completed.
 *
 *   cc -O2 -o floor_client benchmarks/floor_client.c
 *   floor_client HOST PORT CONCURRENCY REQUESTS ISL OSL
 *
 * Prints one JSON line: requests, reads, bytes, and this process's user/system CPU
 * seconds during the load (getrusage; start-up excluded). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static double secs(struct timeval t) { return t.tv_sec + t.tv_usec / 1e6; }

static void die(const char *what) {
    perror(what);
    exit(1);
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: %s HOST PORT CONCURRENCY REQUESTS ISL OSL\n", argv[0]);
        return 2;
    }
    const char *host = argv[1];
    int port = atoi(argv[2]), conc = atoi(argv[3]), total = atoi(argv[4]);
    int isl = atoi(argv[5]), osl = atoi(argv[6]);
    if (conc < 1 || total < 1 || isl < 1 || osl < 1) {
        fprintf(stderr, "floor_client: CONCURRENCY, REQUESTS, ISL and OSL must be >= 1\n");
        return 2;
    }
    if (conc > total) conc = total;

    /* the request: the same body for every request (the server ignores the prompt's
     * content; its length is ISL bytes = ISL tokens on the reference server) */
    char *prompt = malloc(isl + 1);
    for (int i = 0; i < isl; i++) prompt[i] = 'a' + i % 26;
    prompt[isl] = 0;
    size_t cap = isl + 512;
    char *body = malloc(cap), *req = malloc(cap + 256);
    int blen = snprintf(body, cap,
                        "{\"model\": \"reference\", \"prompt\": \"%s\", \"max_tokens\": %d, "
                        "\"stream\": true, \"stream_options\": {\"include_usage\": true}, "
                        "\"ignore_eos\": true}",
                        prompt, osl);
    int rlen = snprintf(req, cap + 256,
                        "POST /v1/completions HTTP/1.1\r\nHost: %s:%d\r\n"
                        "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
                        host, port, blen, body);

    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
        fprintf(stderr, "floor_client: HOST must be an IPv4 address\n");
        return 2;
    }
    int ep = epoll_create1(0);
    if (ep < 0) die("epoll_create1");
    /* the last 5 bytes read on each connection (a terminator split over two reads) */
    char(*tail)[5] = calloc(conc, 5);
    int *fds = calloc(conc, sizeof(int));
    long sent = 0, done = 0, reads = 0, bytes = 0;

    struct rusage r0, r1;
    getrusage(RUSAGE_SELF, &r0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < conc; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) die("socket");
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) die("connect");
        fds[i] = fd;
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (unsigned)i};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) die("epoll_ctl");
        if (write(fd, req, rlen) != rlen) die("write");
        sent++;
    }
    static char buf[1 << 16];
    struct epoll_event evs[1024];
    while (done < total) {
        int n = epoll_wait(ep, evs, 1024, 60000);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("epoll_wait");
        }
        if (n == 0) {
            fprintf(stderr, "floor_client: nothing for 60 s (%ld of %d done)\n", done, total);
            return 1;
        }
        for (int k = 0; k < n; k++) {
            int i = (int)evs[k].data.u32;
            ssize_t got = read(fds[i], buf, sizeof buf);
            if (got <= 0) {
                fprintf(stderr, "floor_client: connection %d closed (%ld of %d done)\n", i,
                        done, total);
                return 1;
            }
            reads++;
            bytes += got;
            /* keep the last 5 bytes of the stream to find the terminator */
            char last[5];
            if (got >= 5) {
                memcpy(last, buf + got - 5, 5);
            } else {
                memcpy(last, tail[i] + got, 5 - got);
                memcpy(last + 5 - got, buf, got);
            }
            memcpy(tail[i], last, 5);
            if (memcmp(last, "0\r\n\r\n", 5) == 0) {
                done++;
                memset(tail[i], 0, 5);
                if (sent < total) {
                    if (write(fds[i], req, rlen) != rlen) die("write");
                    sent++;
                }
            }
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    getrusage(RUSAGE_SELF, &r1);
    printf("{\"tool\": \"c-floor\", \"requests\": %ld, \"completed\": %ld, \"reads\": %ld, "
           "\"bytes\": %ld, \"wall_s\": %.6f, \"user_s\": %.6f, \"sys_s\": %.6f}\n",
           done, done, reads, bytes,
           (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9,
           secs(r1.ru_utime) - secs(r0.ru_utime), secs(r1.ru_stime) - secs(r0.ru_stime));
    return 0;
}
