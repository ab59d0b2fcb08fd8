/* sslload: TLS handshakes with one request each, on OpenSSL's libssl, for scripts/peer-compare.sh's
 * independent-client runs (issue 18): a client tlsgate did not write that resumes the three ways
 * (TLS 1.2 session ID, TLS 1.2 ticket, TLS 1.3 ticket) and is cheap enough per connection to keep
 * a server core busy from one client core (Python's ssl needs ~0.7 ms of CPU per connection).
 *
 *   cc -O2 -o sslload sslload.c -lssl -lcrypto -lpthread
 *   sslload -t 127.0.0.1:443 [-s localhost] [-v 1.2|1.3] [-r none|id|ticket] [-q] [-c 16] [-d 5]
 *
 * Each of -c threads: connect (TCP_NODELAY), handshake (X25519, the chain not verified: the
 * server's CPU is measured, not the client's checks), with -q send `GET /` with
 * `Connection: close` and read to the end of the connection, close. -r id refuses tickets and
 * offers the newest session any thread got, so the server can only resume by session ID;
 * -r ticket offers the newest ticket. Prints one JSON line: handshakes, resumed, requests
 * answered 200, errors, seconds. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static struct sockaddr_in target;
static const char *sni = "localhost";
static int want_request;
static int resume; /* 0 none, 1 session ID, 2 ticket */
static double deadline;
static SSL_CTX *ctx;
static pthread_mutex_t newest_lock = PTHREAD_MUTEX_INITIALIZER;
static SSL_SESSION *newest;
static atomic_long handshakes, resumed, requests, errors;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Every session the client is given (TLS 1.2 at the handshake's end, TLS 1.3 with each
 * NewSessionTicket) becomes the one the next connection offers. */
static int keep_newest(SSL *ssl, SSL_SESSION *session) {
  (void)ssl;
  pthread_mutex_lock(&newest_lock);
  SSL_SESSION *old = newest;
  newest = session;
  pthread_mutex_unlock(&newest_lock);
  if (old) SSL_SESSION_free(old);
  return 1; /* the reference is ours */
}

static int one(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1, ok = 0;
  if (fd < 0) return 0;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  struct timeval tv = {10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (connect(fd, (struct sockaddr *)&target, sizeof target) != 0) {
    close(fd);
    return 0;
  }
  SSL *ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  SSL_set_tlsext_host_name(ssl, sni);
  if (resume) {
    pthread_mutex_lock(&newest_lock);
    if (newest) SSL_set_session(ssl, newest);
    pthread_mutex_unlock(&newest_lock);
  }
  if (SSL_connect(ssl) == 1) {
    atomic_fetch_add(&handshakes, 1);
    if (SSL_session_reused(ssl)) atomic_fetch_add(&resumed, 1);
    ok = 1;
    if (want_request) {
      char req[256], buf[16384];
      int n = snprintf(req, sizeof req, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", sni);
      size_t got = 0;
      int status200 = 0, r;
      if (SSL_write(ssl, req, n) == n) {
        while ((r = SSL_read(ssl, buf, sizeof buf)) > 0) {
          if (got == 0 && r >= 12 && memcmp(buf, "HTTP/1.1 200", 12) == 0) status200 = 1;
          got += (size_t)r;
        }
      }
      if (status200)
        atomic_fetch_add(&requests, 1);
      else
        ok = 0;
    }
  }
  /* Closed without a close_notify, but marked shut down: OpenSSL would otherwise take the
   * connection's session out of circulation on SSL_free as possibly bad. */
  SSL_set_shutdown(ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
  SSL_free(ssl);
  close(fd);
  ERR_clear_error();
  return ok;
}

static void *loop(void *arg) {
  (void)arg;
  while (now() < deadline) {
    if (!one()) {
      atomic_fetch_add(&errors, 1);
      usleep(10000);
    }
  }
  return NULL;
}

int main(int argc, char **argv) {
  const char *addr = "127.0.0.1:443", *version = "1.3", *mode = "none";
  int threads = 16;
  double seconds = 5;
  int opt;
  while ((opt = getopt(argc, argv, "t:s:v:r:qc:d:")) != -1) {
    switch (opt) {
      case 't': addr = optarg; break;
      case 's': sni = optarg; break;
      case 'v': version = optarg; break;
      case 'r': mode = optarg; break;
      case 'q': want_request = 1; break;
      case 'c': threads = atoi(optarg); break;
      case 'd': seconds = atof(optarg); break;
      default:
        fprintf(stderr, "usage: sslload -t host:port [-s sni] [-v 1.2|1.3] [-r none|id|ticket] [-q] [-c n] [-d s]\n");
        return 2;
    }
  }
  char host[64];
  const char *colon = strrchr(addr, ':');
  if (!colon || (size_t)(colon - addr) >= sizeof host) return 2;
  memcpy(host, addr, colon - addr);
  host[colon - addr] = 0;
  target.sin_family = AF_INET;
  target.sin_port = htons(atoi(colon + 1));
  if (inet_pton(AF_INET, host, &target.sin_addr) != 1) return 2;
  resume = !strcmp(mode, "id") ? 1 : !strcmp(mode, "ticket") ? 2 : 0;
  if (resume == 0 && strcmp(mode, "none")) return 2;

  ctx = SSL_CTX_new(TLS_client_method());
  int v = !strcmp(version, "1.2") ? TLS1_2_VERSION : TLS1_3_VERSION;
  SSL_CTX_set_min_proto_version(ctx, v);
  SSL_CTX_set_max_proto_version(ctx, v);
  /* X25519 for the key exchange; P-256 named too, as a TLS 1.2 server may only use an ECDSA
   * P-256 certificate with a client that lists the curve. */
  SSL_CTX_set1_groups_list(ctx, "X25519:P-256");
  SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
  static const unsigned char alpn[] = "\x08http/1.1";
  SSL_CTX_set_alpn_protos(ctx, alpn, sizeof alpn - 1);
  if (resume != 2) SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
  SSL_CTX_set_session_cache_mode(ctx, resume ? SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE
                                             : SSL_SESS_CACHE_OFF);
  if (resume) SSL_CTX_sess_set_new_cb(ctx, keep_newest);

  double start = now();
  deadline = start + seconds;
  pthread_t *ts = calloc(threads, sizeof *ts);
  for (int i = 0; i < threads; i++) pthread_create(&ts[i], NULL, loop, NULL);
  for (int i = 0; i < threads; i++) pthread_join(ts[i], NULL);
  printf("{\"handshakes\":%ld,\"resumed\":%ld,\"requests\":%ld,\"errors\":%ld,\"seconds\":%.3f}\n",
         atomic_load(&handshakes), atomic_load(&resumed), atomic_load(&requests), atomic_load(&errors),
         now() - start);
  return 0;
}
