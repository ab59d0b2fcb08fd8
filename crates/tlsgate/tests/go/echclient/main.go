// echclient: a TLS client that is not tlsgate's own (Go's crypto/tls), for tlsgate's ECH
// end-to-end tests (crates/tlsgate/tests/ech.rs). It connects to -addr offering the
// ECHConfigList -config (base64) with the inner name -sni, verifies the server against -ca,
// sends one HTTP/1.1 GET / and prints one JSON line: whether ECH was accepted, the names of the
// certificate served, the response status and body. With -retry, a rejection's retry configs
// are used for a second attempt (as browsers do), and reported.
package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

type result struct {
	Accepted     bool     `json:"accepted"`
	Rejected     bool     `json:"rejected"`
	Retried      bool     `json:"retried"`
	RetryConfigs string   `json:"retry_configs,omitempty"`
	ServedNames  []string `json:"served_names,omitempty"`
	Status       int      `json:"status,omitempty"`
	Body         string   `json:"body,omitempty"`
	Error        string   `json:"error,omitempty"`
}

func main() {
	addr := flag.String("addr", "", "host:port to connect to")
	sni := flag.String("sni", "", "inner server name")
	config := flag.String("config", "", "ECHConfigList, base64")
	caFile := flag.String("ca", "", "CA certificate (PEM) to verify the server with")
	retry := flag.Bool("retry", false, "on rejection, retry once with the server's retry configs")
	flag.Parse()

	pem, err := os.ReadFile(*caFile)
	if err != nil {
		fail(result{}, err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		fail(result{}, errors.New("no certificate in -ca"))
	}
	list, err := base64.StdEncoding.DecodeString(*config)
	if err != nil {
		fail(result{}, fmt.Errorf("-config: %w", err))
	}
	var out result
	state, body, status, err := attempt(*addr, *sni, list, roots)
	var rejection *tls.ECHRejectionError
	if errors.As(err, &rejection) {
		out.Rejected = true
		out.RetryConfigs = base64.StdEncoding.EncodeToString(rejection.RetryConfigList)
		if *retry && len(rejection.RetryConfigList) > 0 {
			out.Retried = true
			state, body, status, err = attempt(*addr, *sni, rejection.RetryConfigList, roots)
		}
	}
	if err != nil {
		fail(out, err)
	}
	out.Accepted = state.ECHAccepted
	if len(state.PeerCertificates) > 0 {
		out.ServedNames = state.PeerCertificates[0].DNSNames
	}
	out.Status = status
	out.Body = body
	emit(out)
}

func attempt(addr, sni string, list []byte, roots *x509.CertPool) (tls.ConnectionState, string, int, error) {
	cfg := &tls.Config{
		ServerName:                     sni,
		RootCAs:                        roots,
		MinVersion:                     tls.VersionTLS13,
		EncryptedClientHelloConfigList: list,
		NextProtos:                     []string{"http/1.1"},
	}
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(dialer, "tcp", addr, cfg)
	if err != nil {
		return tls.ConnectionState{}, "", 0, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	state := conn.ConnectionState()
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", sni)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return state, "", 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return state, string(body), resp.StatusCode, err
}

func emit(out result) {
	line, _ := json.Marshal(out)
	fmt.Println(string(line))
}

func fail(out result, err error) {
	out.Error = err.Error()
	emit(out)
	os.Exit(1)
}
