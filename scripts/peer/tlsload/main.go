// tlsload: TLS handshakes (and optionally one request per connection) as fast as a server
// answers them, on Go's crypto/tls, for scripts/peer-compare.sh's LOAD=go runs: a client that
// tlsgate did not write, for the handshake figures of record (issue 18).
//
// Each of -c loops: connect, handshake (TLS 1.2 or 1.3, X25519, the certificate chain not
// verified, to keep the client's work per handshake small: the server's CertificateVerify
// signature is still checked, as crypto/tls always does), then either `GET /` with
// `Connection: close` and the whole response read, or close_notify and the server's close
// awaited (the server closes first either way, so the TIME_WAIT sockets are the server's). With -resume the loops share one
// session cache (the newest ticket is used, TLS 1.2 or 1.3; crypto/tls has no TLS 1.2
// session-ID resumption). -keepalive instead sends requests on one connection per loop.
//
// Prints one JSON line: handshakes, how many resumed, requests answered 200, errors, seconds.
package main

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

type counts struct {
	handshakes, resumed, requests, errors atomic.Int64
}

// get sends one GET / on `c` and reads the whole response; false if it was not a 200.
func get(c net.Conn, r *bufio.Reader, sni string, close bool) bool {
	head := "GET / HTTP/1.1\r\nHost: " + sni + "\r\n"
	if close {
		head += "Connection: close\r\n"
	}
	if _, err := io.WriteString(c, head+"\r\n"); err != nil {
		return false
	}
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return false
	}
	_, err = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return err == nil && resp.StatusCode == 200
}

func main() {
	target := flag.String("target", "127.0.0.1:443", "host:port")
	sni := flag.String("sni", "localhost", "server name sent")
	version := flag.String("tls", "1.3", "TLS version: 1.2 or 1.3")
	loops := flag.Int("c", 16, "concurrent connections")
	duration := flag.Duration("d", 5*time.Second, "how long to run")
	resume := flag.Bool("resume", false, "resume sessions (tickets) from a shared cache")
	request := flag.Bool("request", false, "send GET / on each new connection (Connection: close)")
	keepalive := flag.Bool("keepalive", false, "requests on one connection per loop instead of new connections")
	flag.Parse()

	cfg := &tls.Config{
		ServerName:         *sni,
		InsecureSkipVerify: true, // the server's CPU is measured, not the client's checks
		// X25519 for the key exchange (the only TLS 1.3 key share sent); P-256 listed too, as a
		// TLS 1.2 server may only use an ECDSA P-256 certificate with a client that names it.
		CurvePreferences: []tls.CurveID{tls.X25519, tls.CurveP256},
		NextProtos:       []string{"http/1.1"},
	}
	switch *version {
	case "1.2":
		cfg.MinVersion, cfg.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
	case "1.3":
		cfg.MinVersion, cfg.MaxVersion = tls.VersionTLS13, tls.VersionTLS13
	default:
		fmt.Fprintln(os.Stderr, "tlsload: -tls is 1.2 or 1.3")
		os.Exit(2)
	}
	if *resume {
		cfg.ClientSessionCache = tls.NewLRUClientSessionCache(1)
	} else {
		cfg.SessionTicketsDisabled = true
	}

	var n counts
	start := time.Now()
	deadline := start.Add(*duration)
	dialer := net.Dialer{Timeout: 5 * time.Second}
	connect := func() (*tls.Conn, bool) {
		raw, err := dialer.Dial("tcp", *target)
		if err != nil {
			n.errors.Add(1)
			time.Sleep(10 * time.Millisecond)
			return nil, false
		}
		_ = raw.SetDeadline(time.Now().Add(10 * time.Second))
		c := tls.Client(raw, cfg)
		if err := c.Handshake(); err != nil {
			n.errors.Add(1)
			_ = raw.Close()
			return nil, false
		}
		n.handshakes.Add(1)
		if c.ConnectionState().DidResume {
			n.resumed.Add(1)
		}
		return c, true
	}
	var wg sync.WaitGroup
	for i := 0; i < *loops; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if *keepalive {
				c, ok := connect()
				for !ok && time.Now().Before(deadline) {
					c, ok = connect()
				}
				if !ok {
					return
				}
				defer c.Close()
				_ = c.SetDeadline(deadline.Add(5 * time.Second))
				r := bufio.NewReader(c)
				for time.Now().Before(deadline) {
					if !get(c, r, *sni, false) {
						n.errors.Add(1)
						return
					}
					n.requests.Add(1)
				}
				return
			}
			for time.Now().Before(deadline) {
				c, ok := connect()
				if !ok {
					continue
				}
				if *request {
					if get(c, bufio.NewReader(c), *sni, true) {
						n.requests.Add(1)
					} else {
						n.errors.Add(1)
					}
				} else {
					// close_notify, then wait for the server to close: the side that closes
					// first keeps the TIME_WAIT socket, and a client keeping them exhausts the
					// loopback's ephemeral ports to one server port within seconds.
					_ = c.CloseWrite()
					_, _ = io.Copy(io.Discard, c)
				}
				_ = c.Close()
			}
		}()
	}
	wg.Wait()
	out, _ := json.Marshal(map[string]any{
		"handshakes": n.handshakes.Load(), "resumed": n.resumed.Load(),
		"requests": n.requests.Load(), "errors": n.errors.Load(),
		"seconds": time.Since(start).Seconds(),
	})
	fmt.Println(string(out))
}
