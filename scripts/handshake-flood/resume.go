package main

// The -resume mode: each connection resumes one session, completes the abbreviated handshake
// with the least client work and sends `GET /` (`Connection: close`) on it, reading the answer to
// the server's close — the seeds' short-connection case with resumption, with a client cheap
// enough that one client core keeps a server core busy (OpenSSL's libssl cannot: issue 18).
//
// The session comes from `openssl s_client -sess_out` as `openssl sess_id -text -noout` prints
// it (Protocol, Cipher, Session-ID, Master-Key or Resumption PSK, the ticket's hex dump):
//   - TLS 1.2 with a ticket: the ticket in the session_ticket extension (RFC 5077);
//   - TLS 1.2 without one: the session ID (RFC 5246 section 7.3's abbreviated handshake);
//   - TLS 1.3: the ticket as a PSK identity with its binder (RFC 8446 section 4.2.11), PSK-DHE
//     (one X25519 on the client, the rest as in -finish).
// Every connection sends the same ClientHello (one random, one key share, computed once): the
// server derives fresh keys from its own random and share. TLS 1.2 needs
// ECDHE-*-AES128-GCM-SHA256, TLS 1.3 TLS_AES_128_GCM_SHA256 (the s_client call picks them).
// The server's Finished is checked (decrypted, and for TLS 1.2 compared); a connection the
// server answers with a full handshake counts as failed, so a resumption rate is all resumed.

import (
	"bufio"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
)

// session is what a resumption needs of a saved session.
type session struct {
	tls13    bool
	suite    uint16
	id       []byte // TLS 1.2 session ID
	secret   []byte // TLS 1.2 master secret, TLS 1.3 resumption PSK
	ticket   []byte
	extended bool // TLS 1.2: the session used the extended master secret (RFC 7627)
}

// readSession parses `openssl sess_id -text -noout` output.
func readSession(path string) (session, error) {
	f, err := os.Open(path)
	if err != nil {
		return session{}, err
	}
	defer f.Close()
	var s session
	var inTicket bool
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if inTicket {
			// "0000 - df 52 7b d4 26 ad c5 20-05 32 18 6b 10 ab ca 13   .R{.&.. ..."
			if i := strings.Index(line, " - "); i == 4 {
				hexPart := line[7:]
				if len(hexPart) > 47 {
					hexPart = hexPart[:47]
				}
				b, err := hex.DecodeString(strings.NewReplacer(" ", "", "-", "").Replace(strings.TrimSpace(hexPart)))
				if err != nil {
					return session{}, fmt.Errorf("ticket line %q: %v", line, err)
				}
				s.ticket = append(s.ticket, b...)
				continue
			}
			inTicket = false
		}
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		switch key {
		case "Protocol":
			s.tls13 = value == "TLSv1.3"
		case "Cipher":
			switch value {
			case "ECDHE-ECDSA-AES128-GCM-SHA256":
				s.suite = 0xc02b
			case "ECDHE-RSA-AES128-GCM-SHA256":
				s.suite = 0xc02f
			case "TLS_AES_128_GCM_SHA256":
				s.suite = 0x1301
			default:
				return session{}, fmt.Errorf("cipher %s: only the AES-128-GCM SHA-256 suites are supported", value)
			}
		case "Session-ID":
			s.id, err = hex.DecodeString(value)
		case "Master-Key", "Resumption PSK":
			s.secret, err = hex.DecodeString(value)
		case "TLS session ticket":
			inTicket = true
		case "Extended master secret":
			s.extended = value == "yes"
		}
		if err != nil {
			return session{}, fmt.Errorf("%s: %v", key, err)
		}
	}
	if s.suite == 0 || len(s.secret) == 0 || (s.tls13 && len(s.ticket) == 0) || (!s.tls13 && len(s.id) == 0 && len(s.ticket) == 0) {
		return session{}, fmt.Errorf("%s: no resumable session (protocol, cipher, secret, session ID or ticket missing)", path)
	}
	return s, sc.Err()
}

// prf12 is TLS 1.2's PRF with SHA-256 (RFC 5246 section 5).
func prf12(secret []byte, label string, seed []byte, n int) []byte {
	seed = append([]byte(label), seed...)
	out := make([]byte, 0, n+32)
	a := seed
	for len(out) < n {
		m := hmac.New(sha256.New, secret)
		m.Write(a)
		a = m.Sum(nil)
		m.Reset()
		m.Write(a)
		m.Write(seed)
		out = m.Sum(out)
	}
	return out[:n]
}

// resumeHello is the fixed ClientHello resuming `s`, and for TLS 1.3 the salt of its handshake
// secret (Derive-Secret(Early Secret from the PSK, "derived", "")).
func resumeHello(sni string, s session) (hello, []byte) {
	if !s.tls13 {
		return tls12Hello(sni, s), nil
	}
	h := clientHello(sni, true) // the key share, SNI and random of -finish's hello
	// Rebuild -finish's hello with psk_key_exchange_modes and, last, pre_shared_key.
	body := h.record[5+4:]
	extStart := 2 + 32 + 1 + int(body[2+32]) + 2 + 4 + 2
	exts := append([]byte(nil), body[extStart:]...)
	exts = ext(exts, 0x002d, []byte{0x01, 0x01}) // psk_dhe_ke
	identity := binary.BigEndian.AppendUint16(nil, uint16(len(s.ticket)))
	identity = append(identity, s.ticket...)
	identity = append(identity, 0, 0, 0, 0) // obfuscated_ticket_age: checked by servers for 0-RTT only
	psk := binary.BigEndian.AppendUint16(nil, uint16(len(identity)))
	psk = append(psk, identity...)
	const bindersLen = 2 + 1 + 32
	exts = binary.BigEndian.AppendUint16(exts, 0x0029)
	exts = binary.BigEndian.AppendUint16(exts, uint16(len(psk)+bindersLen))
	exts = append(exts, psk...)
	msgBody := append([]byte(nil), body[:extStart-2]...)
	msgBody = binary.BigEndian.AppendUint16(msgBody, uint16(len(exts)+bindersLen))
	msgBody = append(msgBody, exts...)
	msg := []byte{0x01, 0}
	msg = binary.BigEndian.AppendUint16(msg, uint16(len(msgBody)+bindersLen))
	msg = append(msg, msgBody...)
	// The binder: HMAC over the hello up to the binders (RFC 8446 section 4.2.11.2).
	early, err := hkdf.Extract(sha256.New, s.secret, make([]byte, 32))
	if err != nil {
		panic(err)
	}
	empty := sha256.Sum256(nil)
	binderKey := expandLabel(early, "res binder", empty[:], 32)
	truncated := sha256.Sum256(msg)
	mac := hmac.New(sha256.New, expandLabel(binderKey, "finished", nil, 32))
	mac.Write(truncated[:])
	msg = append(msg, 0, 33, 32)
	h.record = handshakeRecord(append(msg, mac.Sum(nil)...))
	return h, expandLabel(early, "derived", empty[:], 32)
}

// tls12Hello is a TLS 1.2 ClientHello offering `s` by session ID or ticket, its cipher only.
func tls12Hello(sni string, s session) hello {
	exts := ext(nil, 0x0000, sniBody(sni))
	// X25519 and P-256: in TLS 1.2 the list also names the curves an ECDSA certificate may use.
	exts = ext(exts, 0x000a, []byte{0x00, 0x04, 0x00, 0x1d, 0x00, 0x17})
	exts = ext(exts, 0x000b, []byte{0x01, 0x00})
	exts = ext(exts, 0x000d, []byte{0x00, 0x06, 0x04, 0x03, 0x08, 0x04, 0x04, 0x01})
	exts = ext(exts, 0xff01, []byte{0x00})
	if s.extended {
		exts = ext(exts, 0x0017, nil)
	}
	id := s.id
	if len(s.ticket) > 0 {
		exts = ext(exts, 0x0023, s.ticket)
		// A session ID of its own, echoed when the ticket is accepted (RFC 5077 section 3.4).
		id = make([]byte, 32)
		_, _ = rand.Read(id)
	}
	body := []byte{0x03, 0x03}
	random := make([]byte, 32)
	_, _ = rand.Read(random)
	body = append(body, random...)
	body = append(body, byte(len(id)))
	body = append(body, id...)
	body = binary.BigEndian.AppendUint16(body, 2)
	body = binary.BigEndian.AppendUint16(body, s.suite)
	body = append(body, 0x01, 0x00)
	return hello{record: helloRecord(body, exts), sni: sni}
}

// gcm12 is one direction of TLS 1.2 AES-128-GCM records (RFC 5288): a 4-byte salt, the
// sequence number as the explicit nonce.
type gcm12 struct {
	aead cipher.AEAD
	salt []byte
	seq  uint64
}

func newGCM12(key, salt []byte) *gcm12 {
	block, err := aes.NewCipher(key)
	if err != nil {
		panic(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return &gcm12{aead: aead, salt: salt}
}

func (g *gcm12) aad(kind byte, n int) []byte {
	a := binary.BigEndian.AppendUint64(nil, g.seq)
	a = append(a, kind, 0x03, 0x03)
	return binary.BigEndian.AppendUint16(a, uint16(n))
}

func (g *gcm12) seal(kind byte, plain []byte) []byte {
	explicit := binary.BigEndian.AppendUint64(nil, g.seq)
	out := []byte{kind, 0x03, 0x03, 0, 0}
	binary.BigEndian.PutUint16(out[3:], uint16(8+len(plain)+16))
	out = append(out, explicit...)
	out = g.aead.Seal(out, append(append([]byte(nil), g.salt...), explicit...), plain, g.aad(kind, len(plain)))
	g.seq++
	return out
}

func (g *gcm12) open(kind byte, body []byte) ([]byte, error) {
	if len(body) < 8+16 {
		return nil, io.ErrUnexpectedEOF
	}
	nonce := append(append([]byte(nil), g.salt...), body[:8]...)
	plain, err := g.aead.Open(nil, nonce, body[8:], g.aad(kind, len(body)-8-16))
	g.seq++
	return plain, err
}

// resume12Once resumes a TLS 1.2 session on `c` with the fixed hello, then asks for `/`.
func resume12Once(c net.Conn, h hello, s session) outcome {
	if _, err := c.Write(h.record); err != nil {
		return failed
	}
	transcript := sha256.New()
	transcript.Write(h.record[5:])
	clientRandom := h.record[5+4+2 : 5+4+2+32]
	r := bufio.NewReaderSize(c, 16<<10) // records that arrive together cost one read
	var (
		header   = make([]byte, 5)
		body     []byte
		messages []byte
		client   *gcm12
		server   *gcm12
		ccs      bool
	)
	for {
		var err error
		if body, err = readRecord(r, header, body); err != nil {
			return failed
		}
		switch {
		case header[0] == 0x15:
			return refused
		case header[0] == 0x14:
			if server == nil {
				return failed
			}
			ccs = true
		case header[0] == 0x16 && !ccs:
			messages = append(messages, body...)
			for len(messages) >= 4 {
				m := 4 + (int(messages[1])<<16 | int(binary.BigEndian.Uint16(messages[2:])))
				if len(messages) < m {
					break
				}
				msg := messages[:m]
				switch msg[0] {
				case 2: // ServerHello: its random gives the keys
					if m < 4+2+32 {
						return failed
					}
					seed := append(append([]byte(nil), msg[6:38]...), clientRandom...)
					kb := prf12(s.secret, "key expansion", seed, 40)
					client, server = newGCM12(kb[0:16], kb[32:36]), newGCM12(kb[16:32], kb[36:40])
				case 4: // NewSessionTicket (a renewed ticket): not kept, the same one is offered again
				default: // a Certificate: the server did not resume
					return failed
				}
				transcript.Write(msg)
				messages = messages[m:]
			}
		case header[0] == 0x16:
			plain, err := server.open(0x16, body)
			if err != nil || len(plain) != 16 || plain[0] != 20 {
				return failed
			}
			want := prf12(s.secret, "server finished", transcript.Sum(nil), 12)
			if !hmac.Equal(plain[4:], want) {
				return failed
			}
			transcript.Write(plain)
			finished := append([]byte{20, 0, 0, 12}, prf12(s.secret, "client finished", transcript.Sum(nil), 12)...)
			out := []byte{0x14, 0x03, 0x03, 0x00, 0x01, 0x01}
			out = append(out, client.seal(0x16, finished)...)
			out = append(out, client.seal(0x17, []byte("GET / HTTP/1.1\r\nHost: "+h.sni+"\r\nConnection: close\r\n\r\n"))...)
			if _, err := c.Write(out); err != nil {
				return failed
			}
			return answer12(r, server)
		default:
			return failed
		}
	}
}

// answer12 reads the answer to the server's close: done if it began with a 200.
func answer12(r io.Reader, server *gcm12) outcome {
	header := make([]byte, 5)
	var body, answer []byte
	for {
		var err error
		if body, err = readRecord(r, header, body); err != nil {
			break // the server's close (the answer read so far decides)
		}
		plain, err := server.open(header[0], body)
		if err != nil {
			return failed
		}
		if header[0] == 0x15 {
			break
		}
		if header[0] == 0x17 && len(answer) < 16 {
			answer = append(answer, plain...)
		}
	}
	if len(answer) >= 12 && string(answer[:12]) == "HTTP/1.1 200" {
		return signed
	}
	return failed
}
