package main

// The -finish mode: a TLS 1.3 full handshake completed with the least client work, then one
// `GET /` with `Connection: close` (RFC 8446 section 7's key schedule; TLS_AES_128_GCM_SHA256
// only). The server's certificate, CertificateVerify and Finished are not checked: a load
// generator, not a client to trust. The request makes the server close first, so the client
// keeps no TIME_WAIT sockets (closing first at thousands of connections a second exhausts the
// loopback's ephemeral ports within seconds), and a 200 proves the handshake was accepted.

import (
	"bufio"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"io"
	"net"
)

// expandLabel is HKDF-Expand-Label with SHA-256.
func expandLabel(secret []byte, label string, context []byte, length int) []byte {
	info := binary.BigEndian.AppendUint16(nil, uint16(length))
	info = append(info, byte(6+len(label)))
	info = append(info, "tls13 "+label...)
	info = append(info, byte(len(context)))
	info = append(info, context...)
	out, err := hkdf.Expand(sha256.New, secret, string(info), length)
	if err != nil {
		panic(err)
	}
	return out
}

// derivedFromEarly is Derive-Secret(Early Secret, "derived", "") without a PSK: the same for
// every connection.
var derivedFromEarly = func() []byte {
	early, err := hkdf.Extract(sha256.New, make([]byte, 32), nil)
	if err != nil {
		panic(err)
	}
	empty := sha256.Sum256(nil)
	return expandLabel(early, "derived", empty[:], 32)
}()

// trafficKeys is one direction's AES-128-GCM key and IV from its traffic secret.
func trafficKeys(secret []byte) (cipher.AEAD, []byte) {
	block, err := aes.NewCipher(expandLabel(secret, "key", nil, 16))
	if err != nil {
		panic(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return aead, expandLabel(secret, "iv", nil, 12)
}

func nonce(iv []byte, seq uint64) []byte {
	n := append([]byte(nil), iv...)
	for i := 0; i < 8; i++ {
		n[len(n)-1-i] ^= byte(seq >> (8 * i))
	}
	return n
}

// serverShare is the X25519 key_share of a ServerHello message (nil if it has none).
func serverShare(sh []byte) []byte {
	// type(1) len(3) version(2) random(32) session_id(1+n) suite(2) compression(1) extensions
	p := 4 + 2 + 32
	if len(sh) < p+1 {
		return nil
	}
	p += 1 + int(sh[p])
	p += 2 + 1
	if len(sh) < p+2 {
		return nil
	}
	end := p + 2 + int(binary.BigEndian.Uint16(sh[p:]))
	p += 2
	for p+4 <= end && end <= len(sh) {
		kind, n := binary.BigEndian.Uint16(sh[p:]), int(binary.BigEndian.Uint16(sh[p+2:]))
		body := sh[p+4 : min(p+4+n, len(sh))]
		if kind == 0x0033 && len(body) == 4+32 && binary.BigEndian.Uint16(body) == 0x001d {
			return body[4:]
		}
		p += 4 + n
	}
	return nil
}

// finishOnce sends the hello on `c`, reads the server's flight up to its Finished and answers
// with the client Finished.
func finishOnce(c net.Conn, h hello) outcome {
	if _, err := c.Write(h.record); err != nil {
		return failed
	}
	transcript := sha256.New()
	transcript.Write(h.record[5:])
	r := bufio.NewReaderSize(c, 16<<10) // records that arrive together cost one read
	var (
		header    = make([]byte, 5)
		body      []byte
		messages  []byte // handshake bytes not yet taken apart
		secret    []byte // the handshake secret
		clientHS  []byte
		serverKey cipher.AEAD
		serverIV  []byte
		seq       uint64
	)
	for {
		var err error
		if body, err = readRecord(r, header, body); err != nil {
			return failed
		}
		switch header[0] {
		case 0x15:
			return refused
		case 0x14: // the server's compatibility ChangeCipherSpec
			continue
		case 0x16: // ServerHello, in the clear
			if serverKey != nil || len(body) < 4 || body[0] != 2 {
				return failed
			}
			transcript.Write(body)
			peer, err := ecdh.X25519().NewPublicKey(serverShare(body))
			if err != nil {
				return failed
			}
			shared, err := h.key.ECDH(peer)
			if err != nil {
				return failed
			}
			salt := derivedFromEarly
			if h.derived != nil {
				salt = h.derived
			}
			secret, err = hkdf.Extract(sha256.New, shared, salt)
			if err != nil {
				return failed
			}
			helloHash := transcript.Sum(nil)
			clientHS = expandLabel(secret, "c hs traffic", helloHash, 32)
			serverKey, serverIV = trafficKeys(expandLabel(secret, "s hs traffic", helloHash, 32))
		case 0x17:
			if serverKey == nil {
				return failed
			}
			plain, err := serverKey.Open(body[:0], nonce(serverIV, seq), body, header)
			seq++
			if err != nil {
				return failed
			}
			for len(plain) > 0 && plain[len(plain)-1] == 0 {
				plain = plain[:len(plain)-1]
			}
			if len(plain) == 0 || plain[len(plain)-1] != 0x16 {
				return failed
			}
			messages = append(messages, plain[:len(plain)-1]...)
			for len(messages) >= 4 {
				m := 4 + (int(messages[1])<<16 | int(binary.BigEndian.Uint16(messages[2:])))
				if len(messages) < m {
					break
				}
				if h.derived != nil && messages[0] == 11 {
					return failed // a Certificate: the server did not resume
				}
				transcript.Write(messages[:m])
				finished := messages[0] == 20
				messages = messages[m:]
				if finished {
					return request(c, r, secret, clientHS, transcript.Sum(nil), h.sni)
				}
			}
		default:
			return failed
		}
	}
}

// readRecord reads one TLS record from `r`: its 5-byte header into `header`, its body into
// `body` (grown when too small), which it returns.
func readRecord(r io.Reader, header, body []byte) ([]byte, error) {
	if _, err := io.ReadFull(r, header); err != nil {
		return body, err
	}
	n := int(binary.BigEndian.Uint16(header[3:]))
	if cap(body) < n {
		body = make([]byte, n)
	}
	body = body[:n]
	_, err := io.ReadFull(r, body)
	return body, err
}

// seal is one TLS 1.3 record of `inner` (content then its type byte) under `key`.
func seal(key cipher.AEAD, iv []byte, seq uint64, inner []byte) []byte {
	head := []byte{0x17, 0x03, 0x03, 0, 0}
	binary.BigEndian.PutUint16(head[3:], uint16(len(inner)+key.Overhead()))
	return key.Seal(append([]byte(nil), head...), nonce(iv, seq), inner, head)
}

// request sends the client Finished for `flightHash` (the transcript through the server's
// Finished) and, in the same write, `GET /` under the application keys, then reads the answer
// to the end of the connection: done if it began with a 200.
func request(c net.Conn, r io.Reader, handshakeSecret, clientHS, flightHash []byte, sni string) outcome {
	mac := hmac.New(sha256.New, expandLabel(clientHS, "finished", nil, 32))
	mac.Write(flightHash)
	finished := append([]byte{20, 0, 0, 32}, mac.Sum(nil)...)
	hsKey, hsIV := trafficKeys(clientHS)
	out := seal(hsKey, hsIV, 0, append(finished, 0x16))

	empty := sha256.Sum256(nil)
	master, err := hkdf.Extract(sha256.New, make([]byte, 32), expandLabel(handshakeSecret, "derived", empty[:], 32))
	if err != nil {
		return failed
	}
	clientKey, clientIV := trafficKeys(expandLabel(master, "c ap traffic", flightHash, 32))
	serverKey, serverIV := trafficKeys(expandLabel(master, "s ap traffic", flightHash, 32))
	get := "GET / HTTP/1.1\r\nHost: " + sni + "\r\nConnection: close\r\n\r\n\x17"
	out = append(out, seal(clientKey, clientIV, 0, []byte(get))...)
	if _, err := c.Write(out); err != nil {
		return failed
	}
	header := make([]byte, 5)
	var body, answer []byte
	for seq := uint64(0); ; seq++ {
		var err error
		if body, err = readRecord(r, header, body); err != nil {
			break // the server's close (the answer read so far decides)
		} else if header[0] != 0x17 {
			return failed
		}
		plain, err := serverKey.Open(body[:0], nonce(serverIV, seq), body, header)
		if err != nil {
			return failed
		}
		for len(plain) > 0 && plain[len(plain)-1] == 0 {
			plain = plain[:len(plain)-1]
		}
		if len(plain) == 0 {
			return failed
		}
		if kind := plain[len(plain)-1]; kind == 0x17 && len(answer) < 16 {
			answer = append(answer, plain[:len(plain)-1]...)
		} else if kind == 0x15 {
			break // close_notify (or an alert: then no 200 was read)
		}
	}
	if len(answer) >= 12 && string(answer[:12]) == "HTTP/1.1 200" {
		return signed
	}
	return failed
}
