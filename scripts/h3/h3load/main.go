// h3load: an HTTP/3 load generator that is not tlsgate's own (quic-go's client), for
// scripts/h3-compare.sh, which measures tlsgate's HTTP/3 against Caddy's per server
// CPU-second. Two modes:
//   - keep-alive (default): -c QUIC connections, each carrying -m requests at a time, GET -url
//     again and again for -d;
//   - -new: -c senders, each opening a new QUIC connection per request (a full handshake: no
//     session cache, unless -resume, which offers the previous connection's ticket).
//
// Prints one JSON object: requests answered 200, errors (first error text kept), seconds.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

type report struct {
	Requests   int64   `json:"requests"`
	Errors     int64   `json:"errors"`
	FirstError string  `json:"first_error,omitempty"`
	Seconds    float64 `json:"seconds"`
	Rate       float64 `json:"rate"`
}

func main() {
	url := flag.String("url", "", "https URL to GET")
	caFile := flag.String("ca", "", "CA certificate (PEM)")
	sni := flag.String("sni", "localhost", "server name")
	conns := flag.Int("c", 16, "connections (keep-alive) or senders (-new)")
	streams := flag.Int("m", 1, "requests at a time per connection (keep-alive)")
	dur := flag.Duration("d", 5*time.Second, "duration")
	newConn := flag.Bool("new", false, "a new QUIC connection per request")
	resume := flag.Bool("resume", false, "with -new: offer the previous connection's session ticket")
	flag.Parse()

	pem, err := os.ReadFile(*caFile)
	if err != nil {
		fail(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		fail(fmt.Errorf("%s: no certificate", *caFile))
	}
	base := &tls.Config{ServerName: *sni, RootCAs: pool, NextProtos: []string{http3.NextProtoH3}}
	qconf := &quic.Config{MaxIdleTimeout: 10 * time.Second}

	var ok, bad atomic.Int64
	var firstErr atomic.Value
	note := func(err error) {
		bad.Add(1)
		firstErr.CompareAndSwap(nil, err.Error())
	}
	get := func(client *http.Client, ctx context.Context) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
		resp, err := client.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				note(err)
			}
			return
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			if ctx.Err() == nil {
				note(fmt.Errorf("status %d, body error %v", resp.StatusCode, err))
			}
			return
		}
		ok.Add(1)
	}

	ctx, cancel := context.WithTimeout(context.Background(), *dur)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < *conns; i++ {
		if *newConn {
			wg.Add(1)
			go func() {
				defer wg.Done()
				conf := base.Clone()
				if *resume {
					conf.ClientSessionCache = tls.NewLRUClientSessionCache(1)
				}
				for ctx.Err() == nil {
					tr := &http3.Transport{TLSClientConfig: conf, QUICConfig: qconf}
					get(&http.Client{Transport: tr}, ctx)
					tr.Close()
				}
			}()
			continue
		}
		// One transport per connection: quic-go's transport keeps one connection per authority.
		tr := &http3.Transport{TLSClientConfig: base.Clone(), QUICConfig: qconf}
		client := &http.Client{Transport: tr}
		for j := 0; j < *streams; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					get(client, ctx)
				}
			}()
		}
		defer tr.Close()
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	r := report{Requests: ok.Load(), Errors: bad.Load(), Seconds: secs, Rate: float64(ok.Load()) / secs}
	if e, _ := firstErr.Load().(string); e != "" {
		r.FirstError = e
	}
	out, _ := json.Marshal(r)
	fmt.Println(string(out))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "h3load:", err)
	os.Exit(2)
}
