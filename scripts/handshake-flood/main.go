// flood: full TLS handshakes as fast as the server answers them, from several source addresses
// at once, for scripts/handshake-flood.sh.
//
// The cheapest flood there is, and the one a budget must stop: each loop connects (bound to
// its source address), sends one fixed TLS 1.3 ClientHello (built once: SNI, X25519 with a key
// share computed once, no session to resume), reads until the server's encrypted first flight
// arrives — ServerHello, then application-data records carrying the certificate and the
// CertificateVerify, so the server has signed — and resets the connection. The client does no
// cryptography per connection, so one core of clients keeps a server core signing.
//
// Two more modes serve scripts/peer-compare.sh's saturating cells: -finish completes the full
// TLS 1.3 handshake and sends `GET /` (finish.go); -resume FILE resumes one saved session on
// every connection and sends `GET /` (resume.go). "done" then counts 200 answers.
//
// Prints one JSON line: flights received (signatures the server spent), handshakes refused with
// an alert, connections closed or failed otherwise, and the seconds it ran.
package main

import (
	"crypto/ecdh"
	"crypto/rand"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func ext(out []byte, kind uint16, body []byte) []byte {
	out = binary.BigEndian.AppendUint16(out, kind)
	out = binary.BigEndian.AppendUint16(out, uint16(len(body)))
	return append(out, body...)
}

// sniBody is a server_name extension's body naming `sni`.
func sniBody(sni string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(len(sni)+3))
	b = append(b, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(len(sni)))
	return append(b, sni...)
}

// helloRecord is the handshake record of a ClientHello whose body up to its extensions is `body`.
func helloRecord(body, exts []byte) []byte {
	body = binary.BigEndian.AppendUint16(body, uint16(len(exts)))
	body = append(body, exts...)
	msg := []byte{0x01, 0x00}
	msg = binary.BigEndian.AppendUint16(msg, uint16(len(body)))
	return handshakeRecord(append(msg, body...))
}

// handshakeRecord is `msg` (a whole handshake message) in one handshake record.
func handshakeRecord(msg []byte) []byte {
	record := []byte{0x16, 0x03, 0x01}
	record = binary.BigEndian.AppendUint16(record, uint16(len(msg)))
	return append(record, msg...)
}

// hello is the fixed ClientHello record and the private key of its X25519 share.
type hello struct {
	record []byte
	key    *ecdh.PrivateKey
	sni    string
	// derived is, when the hello resumes a TLS 1.3 session, the salt of the handshake secret
	// (Derive-Secret of the PSK's early secret, "derived"); nil for a full handshake.
	derived []byte
}

// clientHello is a TLS 1.3 ClientHello record for `sni` offering X25519 only. With `finish`
// (the handshake is completed): TLS_AES_128_GCM_SHA256 only, and no psk_key_exchange_modes, so
// the server issues no tickets, as a client without a session cache.
func clientHello(sni string, finish bool) hello {
	key, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	share := []byte{0x00, 0x24, 0x00, 0x1d, 0x00, 0x20}
	share = append(share, key.PublicKey().Bytes()...)
	var exts []byte
	exts = ext(exts, 0x0000, sniBody(sni))
	exts = ext(exts, 0x002b, []byte{0x02, 0x03, 0x04})
	exts = ext(exts, 0x000a, []byte{0x00, 0x02, 0x00, 0x1d})
	exts = ext(exts, 0x0033, share)
	exts = ext(exts, 0x000d, []byte{0x00, 0x06, 0x08, 0x04, 0x04, 0x03, 0x04, 0x01})
	if !finish {
		exts = ext(exts, 0x002d, []byte{0x01, 0x01})
	}
	body := []byte{0x03, 0x03}
	random := make([]byte, 32)
	_, _ = rand.Read(random)
	body = append(body, random...)
	body = append(body, 32)
	body = append(body, random...) // a compatibility session ID, as every TLS 1.3 client sends
	if finish {
		body = append(body, 0x00, 0x02, 0x13, 0x01, 0x01, 0x00)
	} else {
		body = append(body, 0x00, 0x06, 0x13, 0x01, 0x13, 0x02, 0x13, 0x03, 0x01, 0x00)
	}
	return hello{record: helloRecord(body, exts), key: key, sni: sni}
}

type outcome int

const (
	signed outcome = iota
	refused
	failed
)

// once sends the hello on `c` and reads records until the encrypted flight or an alert.
func once(c net.Conn, h hello) outcome {
	if _, err := c.Write(h.record); err != nil {
		return failed
	}
	header := make([]byte, 5)
	for {
		if _, err := io.ReadFull(c, header); err != nil {
			return failed
		}
		switch header[0] {
		case 0x15:
			return refused
		case 0x17:
			return signed
		}
		if _, err := io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint16(header[3:]))); err != nil {
			return failed
		}
	}
}

func main() {
	target := flag.String("target", "127.0.0.1:443", "host:port to flood")
	sources := flag.String("sources", "127.0.0.2", "comma-separated source addresses")
	conns := flag.Int("conns", 4, "concurrent handshake loops per source")
	duration := flag.Duration("duration", 10*time.Second, "how long to flood")
	sni := flag.String("sni", "localhost", "server name sent")
	finish := flag.Bool("finish", false, "complete each handshake and send GET / on it (Connection: close) instead of resetting after the server's flight")
	resume := flag.String("resume", "", "resume the session of this file (`openssl sess_id -text -noout` of an s_client -sess_out) on every connection, then GET / (see resume.go)")
	flag.Parse()

	h := clientHello(*sni, *finish)
	run := once
	if *finish {
		run = finishOnce
	}
	if *resume != "" {
		s, err := readSession(*resume)
		if err != nil {
			fmt.Fprintln(os.Stderr, "flood:", err)
			os.Exit(2)
		}
		h, h.derived = resumeHello(*sni, s)
		*finish = true // the server closes first, as with -finish
		if s.tls13 {
			run = finishOnce
		} else {
			run = func(c net.Conn, h hello) outcome { return resume12Once(c, h, s) }
		}
	}
	var counts [3]atomic.Int64
	start := time.Now()
	deadline := start.Add(*duration)
	var wg sync.WaitGroup
	for _, src := range strings.Split(*sources, ",") {
		dialer := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(strings.TrimSpace(src))}, Timeout: 5 * time.Second}
		for i := 0; i < *conns; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(deadline) {
					c, err := dialer.Dial("tcp", *target)
					if err != nil {
						counts[failed].Add(1)
						time.Sleep(10 * time.Millisecond)
						continue
					}
					_ = c.SetDeadline(time.Now().Add(5 * time.Second))
					counts[run(c, h)].Add(1)
					if !*finish {
						_ = c.(*net.TCPConn).SetLinger(0)
					}
					_ = c.Close()
				}
			}()
		}
	}
	wg.Wait()
	fmt.Printf("{\"done\":%d,\"refused\":%d,\"other\":%d,\"seconds\":%.3f}\n",
		counts[signed].Load(), counts[refused].Load(), counts[failed].Load(), time.Since(start).Seconds())
}
