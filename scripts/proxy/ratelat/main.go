// ratelat: a fixed-rate (open-loop) HTTPS load generator that is not tlsgate's own, for the
// `rate` cell of scripts/proxy-compare.sh: latency at a rate below saturation (issue #25 asks
// for p99 no worse than the best peer there, not only at one connection).
//
// -c keep-alive TLS connections (HTTP/1.1) share -rate requests per second: connection i sends
// its k-th request at start + (i + k*c)/rate, as wrk2 does, or at once if the previous answer
// on it came after that time (the request is then late, and its wait counts). Two latencies
// per request, to the end of the response body:
//   - from the time it was due (wrk2's, corrected for coordinated omission: a server that
//     falls behind is charged for the queue it causes);
//   - from the time it was written (the service time alone).
//
// A fixed rate is only a fixed rate if it was kept: `late` counts requests written more than
// 1 ms after they were due, and the caller should treat many as a failed run.
//
// Prints one JSON object: requests answered 200, errors (the first one's text), seconds, rate
// achieved, late, and the percentiles (µs) of both latencies.
package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"sync"
	"time"
)

type report struct {
	Requests   int64   `json:"requests"`
	Errors     int64   `json:"errors"`
	FirstError string  `json:"first_error,omitempty"`
	Seconds    float64 `json:"seconds"`
	Rate       float64 `json:"rate"`
	Target     float64 `json:"target_rate"`
	Late       int64   `json:"late"`
	// From the time each request was due (wrk2's latency).
	P50  float64 `json:"p50_us"`
	P90  float64 `json:"p90_us"`
	P99  float64 `json:"p99_us"`
	P999 float64 `json:"p999_us"`
	Max  float64 `json:"max_us"`
	// From the time each request was written.
	SendP50 float64 `json:"send_p50_us"`
	SendP99 float64 `json:"send_p99_us"`
}

type conn struct {
	tls *tls.Conn
	br  *bufio.Reader
}

type result struct {
	due, sent []time.Duration
	ok, bad   int64
	late      int64
	firstErr  string
}

func main() {
	target := flag.String("url", "", "https URL to GET")
	caFile := flag.String("ca", "", "CA certificate (PEM)")
	sni := flag.String("sni", "localhost", "server name")
	conns := flag.Int("c", 16, "keep-alive connections")
	rate := flag.Float64("rate", 10000, "requests per second, all connections together")
	dur := flag.Duration("d", 5*time.Second, "duration")
	flag.Parse()
	if *rate <= 0 || *conns <= 0 {
		fail(fmt.Errorf("-rate and -c must be positive"))
	}

	u, err := url.Parse(*target)
	if err != nil || u.Scheme != "https" {
		fail(fmt.Errorf("-url: an https URL, got %q", *target))
	}
	pem, err := os.ReadFile(*caFile)
	if err != nil {
		fail(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		fail(fmt.Errorf("%s: no certificate", *caFile))
	}
	config := &tls.Config{ServerName: *sni, RootCAs: pool, NextProtos: []string{"http/1.1"},
		MinVersion: tls.VersionTLS13}
	request := []byte(fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: ratelat\r\n\r\n",
		u.RequestURI(), *sni))
	dial := func() (*conn, error) {
		c, err := tls.Dial("tcp", u.Host, config)
		if err != nil {
			return nil, err
		}
		return &conn{tls: c, br: bufio.NewReaderSize(c, 16384)}, nil
	}

	// Every connection is open before the clock starts: the run measures requests, not
	// handshakes.
	open := make([]*conn, *conns)
	for i := range open {
		if open[i], err = dial(); err != nil {
			fail(fmt.Errorf("connection %d: %w", i, err))
		}
	}

	interval := time.Duration(float64(time.Second) * float64(*conns) / *rate)
	start := time.Now().Add(10 * time.Millisecond)
	end := start.Add(*dur)
	results := make([]result, *conns)
	var wg sync.WaitGroup
	for i := range open {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r := &results[i]
			c := open[i]
			fault := func(e error) {
				r.bad++
				if r.firstErr == "" {
					r.firstErr = e.Error()
				}
			}
			offset := time.Duration(float64(time.Second) * float64(i) / *rate)
			for k := 0; ; k++ {
				due := start.Add(offset + time.Duration(k)*interval)
				if !due.Before(end) {
					return
				}
				if wait := time.Until(due); wait > 0 {
					time.Sleep(wait)
				}
				if c == nil {
					var e error
					if c, e = dial(); e != nil {
						fault(e)
						c = nil
						continue
					}
				}
				sent := time.Now()
				if sent.Sub(due) > time.Millisecond {
					r.late++
				}
				if _, e := c.tls.Write(request); e != nil {
					fault(e)
					c.tls.Close()
					c = nil
					continue
				}
				resp, e := http.ReadResponse(c.br, nil)
				if e != nil {
					fault(e)
					c.tls.Close()
					c = nil
					continue
				}
				_, e = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				done := time.Now()
				if e != nil {
					fault(e)
					c.tls.Close()
					c = nil
					continue
				}
				if resp.StatusCode != http.StatusOK {
					fault(fmt.Errorf("status %d", resp.StatusCode))
				} else {
					r.ok++
					r.due = append(r.due, done.Sub(due))
					r.sent = append(r.sent, done.Sub(sent))
				}
				if resp.Close {
					c.tls.Close()
					c = nil
				}
			}
		}(i)
	}
	wg.Wait()
	secs := time.Since(start).Seconds()

	rep := report{Seconds: secs, Target: *rate}
	var due, sent []time.Duration
	for _, r := range results {
		rep.Requests += r.ok
		rep.Errors += r.bad
		rep.Late += r.late
		if rep.FirstError == "" {
			rep.FirstError = r.firstErr
		}
		due = append(due, r.due...)
		sent = append(sent, r.sent...)
	}
	rep.Rate = float64(rep.Requests) / secs
	sort.Slice(due, func(a, b int) bool { return due[a] < due[b] })
	sort.Slice(sent, func(a, b int) bool { return sent[a] < sent[b] })
	rep.P50, rep.P90, rep.P99, rep.P999 = pct(due, 50), pct(due, 90), pct(due, 99), pct(due, 99.9)
	if n := len(due); n > 0 {
		rep.Max = us(due[n-1])
	}
	rep.SendP50, rep.SendP99 = pct(sent, 50), pct(sent, 99)
	out, _ := json.Marshal(rep)
	fmt.Println(string(out))
	if rep.Requests == 0 {
		os.Exit(1)
	}
}

// pct: the p-th percentile (nearest rank) of sorted durations, in µs; -1 when there are none.
func pct(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return -1
	}
	rank := int(p/100*float64(len(sorted))+0.5) - 1
	if rank < 0 {
		rank = 0
	}
	if rank >= len(sorted) {
		rank = len(sorted) - 1
	}
	return us(sorted[rank])
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }

func fail(err error) {
	fmt.Fprintln(os.Stderr, "ratelat:", err)
	os.Exit(1)
}
