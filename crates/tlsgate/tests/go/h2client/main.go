// h2client: Go's own HTTP/2 client (net/http's bundled http2, HPACK included) sends -n GET
// requests with browser-like fields over one connection, -pause (or -pauses) apart, and prints one line per
// response: "<status> <protocol> <body bytes>". Run with GODEBUG=http2debug=2, it logs every
// frame it reads and writes on stderr, which tlsgate's tests read.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	ca := flag.String("ca", "", "CA certificate file (PEM)")
	url := flag.String("url", "", "URL to request")
	n := flag.Int("n", 4, "requests")
	pause := flag.Duration("pause", 2500*time.Millisecond, "pause after each response")
	pauses := flag.String("pauses", "", "comma-separated pauses after responses 1, 2, ... (-pause for the rest)")
	flag.Parse()
	var after []time.Duration
	for _, p := range strings.Split(*pauses, ",") {
		if p == "" {
			continue
		}
		d, err := time.ParseDuration(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, "-pauses:", err)
			os.Exit(2)
		}
		after = append(after, d)
	}
	pem, err := os.ReadFile(*ca)
	if err != nil {
		fmt.Fprintln(os.Stderr, "read CA:", err)
		os.Exit(2)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		fmt.Fprintln(os.Stderr, "no certificate in", *ca)
		os.Exit(2)
	}
	client := &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool},
			ForceAttemptHTTP2: true,
		},
	}
	for i := 0; i < *n; i++ {
		req, _ := http.NewRequest("GET", *url, nil)
		req.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36")
		req.Header.Set("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
		req.Header.Set("Accept-Language", "en-GB,en;q=0.9,de;q=0.8")
		resp, err := client.Do(req)
		if err != nil {
			fmt.Fprintln(os.Stderr, "request", i, "failed:", err)
			os.Exit(1)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			fmt.Fprintln(os.Stderr, "response", i, "body:", err)
			os.Exit(1)
		}
		fmt.Println(resp.StatusCode, resp.Proto, len(body))
		if i+1 < *n {
			if i < len(after) {
				time.Sleep(after[i])
			} else {
				time.Sleep(*pause)
			}
		}
	}
}
