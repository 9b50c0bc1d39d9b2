// The floor of an HTTP/1.1 keep-alive forwarder on this kernel: each client connection gets
// its own upstream connection, bytes are relayed both ways with one recv and one send, no
// parsing. Usage: floor LISTEN_PORT UPSTREAM_PORT WORKERS
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAXFD 65536
static int peer[MAXFD];

static void nodelay(int fd) { int one = 1; setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); }

static int send_all(int fd, const char *p, ssize_t n) {
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w > 0) { p += w; n -= w; continue; }
        if (w < 0 && errno == EAGAIN) { struct pollfd q = {fd, POLLOUT, 0}; poll(&q, 1, 1000); continue; }
        return -1;
    }
    return 0;
}

static void worker(int lport, int uport) {
    int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(l, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(lport)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (bind(l, (void *)&a, sizeof a) || listen(l, 4096)) { perror("listen"); exit(1); }
    struct sockaddr_in u = {.sin_family = AF_INET, .sin_port = htons(uport)};
    inet_pton(AF_INET, "127.0.0.1", &u.sin_addr);
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = l}, evs[256];
    epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev);
    static char buf[65536];
    for (;;) {
        int n = epoll_wait(ep, evs, 256, -1);
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == l) {
                int c;
                while ((c = accept4(l, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    int s = socket(AF_INET, SOCK_STREAM, 0);
                    if (s < 0 || s >= MAXFD || c >= MAXFD || connect(s, (void *)&u, sizeof u)) { close(c); if (s >= 0) close(s); continue; }
                    int fl = 1; ioctl(s, FIONBIO, &fl);
                    nodelay(c); nodelay(s);
                    peer[c] = s; peer[s] = c;
                    struct epoll_event e1 = {.events = EPOLLIN, .data.fd = c}, e2 = {.events = EPOLLIN, .data.fd = s};
                    epoll_ctl(ep, EPOLL_CTL_ADD, c, &e1); epoll_ctl(ep, EPOLL_CTL_ADD, s, &e2);
                }
                continue;
            }
            ssize_t r = recv(fd, buf, sizeof buf, 0);
            if (r > 0 && send_all(peer[fd], buf, r) == 0) continue;
            if (r < 0 && errno == EAGAIN) continue;
            int p = peer[fd];
            close(fd); close(p);
        }
    }
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: floor LISTEN_PORT UPSTREAM_PORT WORKERS\n"); return 2; }
    int lport = atoi(argv[1]), uport = atoi(argv[2]), w = atoi(argv[3]);
    for (int i = 0; i < w; i++) if (fork() == 0) { prctl(PR_SET_PDEATHSIG, SIGTERM); worker(lport, uport); return 0; }
    while (wait(NULL) > 0) {}
    return 0;
}
