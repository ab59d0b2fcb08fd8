// h3client: an HTTP/3 client that is not tlsgate's own (quic-go's), for tlsgate's HTTP/3
// end-to-end tests (crates/tlsgate/tests/http3.rs). It sends -n requests to -url over one QUIC
// connection (verifying the server against -ca, with -sni as the server name), optionally with
// a body of -body bytes, and prints one JSON line per request: status, protocol, body length
// and its first bytes, the Alt-Svc header. With -resume, a second connection follows with the
// first one's session ticket and reports whether it resumed; with -early its request goes in
// 0-RTT (and "used_0rtt" says whether the server accepted it; a refused request is sent again
// on a new connection without early data, marked "rejected_0rtt"). With -url3 a third connection
// follows the same way; with -replay every resuming connection offers the first session ticket
// the client got (a client replaying it), not the newest. Interim (1xx) responses are listed before the final one. With -hold, it keeps the connection open that long after the requests and then sends
// -n more on it (to check that garbage sent meanwhile did not disturb it).
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"os"
	"strings"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/quic-go/qlog"
)

type result struct {
	Conn     int    `json:"conn"`
	Status   int    `json:"status,omitempty"`
	Proto    string `json:"proto,omitempty"`
	Length   int    `json:"length"`
	Head     string `json:"head,omitempty"`
	AltSvc   string `json:"alt_svc,omitempty"`
	Resumed  bool   `json:"resumed"`
	Early    bool   `json:"early"`
	Used0RTT bool   `json:"used_0rtt"`
	// The server refused the 0-RTT data; the request was then sent again after the handshake.
	Rejected0RTT bool   `json:"rejected_0rtt,omitempty"`
	Error        string `json:"error,omitempty"`
	Elapsed      int64  `json:"elapsed_ms"`
	LocalUDP     string `json:"local,omitempty"`
	// Interim (1xx) responses before the final one: "103 <Link header>".
	Interim []string `json:"interim,omitempty"`
	err     error
}

func main() {
	url := flag.String("url", "", "https URL to request")
	caFile := flag.String("ca", "", "CA certificate (PEM)")
	sni := flag.String("sni", "localhost", "server name")
	method := flag.String("method", "GET", "request method")
	bodyLen := flag.Int("body", 0, "request body bytes (POST)")
	n := flag.Int("n", 1, "requests per connection")
	resume := flag.Bool("resume", false, "open a second connection resuming the first's session")
	early := flag.Bool("early", false, "with -resume: send the second connection's requests in 0-RTT")
	hold := flag.Duration("hold", 0, "keep the connection open this long, then repeat the requests")
	holds := flag.Int("holds", 1, "with -hold: how many times to wait and repeat")
	secondURL := flag.String("url2", "", "with -resume: the second connection's URL (another gateway)")
	thirdURL := flag.String("url3", "", "with -resume: a third connection's URL")
	replay := flag.Bool("replay", false, "with -resume: every resuming connection offers the first ticket")
	finDelay := flag.Duration("fin-delay", 0, "the request's body (-body bytes, perhaps none) is of unknown length and comes this long after its head, then the stream's end")
	flag.Parse()

	pem, err := os.ReadFile(*caFile)
	if err != nil {
		fail(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		fail(errors.New("no certificate in -ca"))
	}
	var cache tls.ClientSessionCache = tls.NewLRUClientSessionCache(8)
	if *replay {
		cache = &firstTicket{}
	}
	conns := 1
	if *resume {
		conns = 2
		if *thirdURL != "" {
			conns = 3
		}
	}
	for c := 0; c < conns; c++ {
		target := *url
		if c == 1 && *secondURL != "" {
			target = *secondURL
		}
		if c == 2 {
			target = *thirdURL
		}
		var dialed *quic.Conn
		tlsConf := &tls.Config{RootCAs: roots, ServerName: *sni, ClientSessionCache: cache, NextProtos: []string{"h3"}}
		// QLOGDIR set (a diagnosis): a qlog file per connection there.
		qconf := &quic.Config{HandshakeIdleTimeout: 5 * time.Second, MaxIdleTimeout: 30 * time.Second,
			Tracer: qlog.DefaultConnectionTracer}
		tr := &http3.Transport{TLSClientConfig: tlsConf, QUICConfig: qconf}
		if c >= 1 && *early {
			tr.Dial = func(ctx context.Context, addr string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
				conn, err := quic.DialAddrEarly(ctx, addr, tc, qc)
				dialed = conn
				return conn, err
			}
		}
		client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		rounds := 1
		if *hold > 0 {
			rounds = 1 + *holds
		}
		for r := 0; r < rounds; r++ {
			if r >= 1 {
				time.Sleep(*hold)
			}
			for i := 0; i < *n; i++ {
				res := request(client, c, target, *method, *bodyLen, c >= 1 && *early, *finDelay)
				if errors.Is(res.err, quic.Err0RTTRejected) || strings.Contains(res.Error, "0-RTT rejected") {
					// quic-go's transport keeps the refused connection as unusable: the
					// request goes again on a new one (resuming, without early data).
					again := &http3.Transport{TLSClientConfig: tlsConf, QUICConfig: qconf,
						Dial: func(ctx context.Context, addr string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
							return quic.DialAddr(ctx, addr, tc, qc)
						}}
					res = request(&http.Client{Transport: again, Timeout: 10 * time.Second}, c, target, *method, *bodyLen, false, *finDelay)
					res.Rejected0RTT = true
					again.Close()
				}
				if dialed != nil {
					res.Used0RTT = dialed.ConnectionState().Used0RTT
				}
				out, _ := json.Marshal(res)
				fmt.Println(string(out))
			}
		}
		tr.Close()
	}
}

func request(client *http.Client, conn int, url, method string, bodyLen int, early bool, finDelay time.Duration) result {
	res := result{Conn: conn}
	started := time.Now()
	var body io.Reader
	switch {
	case finDelay > 0:
		// Unknown length: the HEADERS frame goes without the FIN (and without a length).
		body = &lateBody{delay: finDelay, data: bytes.Repeat([]byte("b"), bodyLen)}
	case bodyLen > 0:
		body = bytes.NewReader(bytes.Repeat([]byte("b"), bodyLen))
	}
	m := method
	if early {
		m = http3.MethodGet0RTT
	}
	req, err := http.NewRequest(m, url, body)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	trace := &tlsTrace{}
	req = req.WithContext(context.WithValue(req.Context(), traceKey{}, trace))
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		Got1xxResponse: func(code int, header textproto.MIMEHeader) error {
			res.Interim = append(res.Interim, fmt.Sprintf("%d %s", code, header.Get("Link")))
			return nil
		},
	}))
	resp, err := client.Do(req)
	if err != nil {
		res.Error = err.Error()
		res.err = err
		return res
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		res.Error = err.Error()
	}
	res.Status = resp.StatusCode
	res.Proto = resp.Proto
	res.Length = len(data)
	if len(data) > 200 {
		data = data[:200]
	}
	res.Head = string(data)
	res.AltSvc = resp.Header.Get("Alt-Svc")
	if resp.TLS != nil {
		res.Resumed = resp.TLS.DidResume
	}
	res.Early = early
	res.Elapsed = time.Since(started).Milliseconds()
	return res
}

// firstTicket is a session cache that keeps the first session it is given for a server and
// offers it every time: a client replaying one ticket (and its early data).
type firstTicket struct {
	sessions map[string]*tls.ClientSessionState
}

func (f *firstTicket) Get(key string) (*tls.ClientSessionState, bool) {
	s, ok := f.sessions[key]
	return s, ok
}

func (f *firstTicket) Put(key string, cs *tls.ClientSessionState) {
	if f.sessions == nil {
		f.sessions = map[string]*tls.ClientSessionState{}
	}
	if _, ok := f.sessions[key]; !ok && cs != nil {
		f.sessions[key] = cs
	}
}

type traceKey struct{}
type tlsTrace struct{}

func fail(err error) {
	out, _ := json.Marshal(result{Error: err.Error()})
	fmt.Println(string(out))
	os.Exit(1)
}

// lateBody is a body of unknown length that comes only after a delay: data (perhaps none),
// then the end. The request's HEADERS frame goes without the stream's FIN, which follows with
// the data or on its own.
type lateBody struct {
	delay  time.Duration
	data   []byte
	waited bool
}

func (l *lateBody) Read(p []byte) (int, error) {
	if !l.waited {
		time.Sleep(l.delay)
		l.waited = true
	}
	if len(l.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p, l.data)
	l.data = l.data[n:]
	return n, nil
}
