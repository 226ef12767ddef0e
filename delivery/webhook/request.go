package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"net/http"
	"net/url"
	"strconv"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/delivery"
)

// ownHeaders are the headers of every request that the sink sets itself,
// in the order of the values of setHeaders.
var ownHeaders = [...]string{"Content-Type", "User-Agent", delivery.HeaderIdempotencyKey, HeaderID,
	HeaderTimestamp, HeaderSignature, delivery.HeaderAttempt, delivery.HeaderPosition}

// maxSignerScratch is the most bytes a pooled signer keeps between requests.
const maxSignerScratch = 4 << 10

// signer is a keyed HMAC and its buffers, reused across requests.
type signer struct {
	mac     hash.Hash
	scratch []byte
	sum     []byte
}

func (w *Sink) newSigner() any {
	return &signer{mac: hmac.New(sha256.New, w.key), sum: make([]byte, 0, sha256.Size)}
}

// appendSignature appends the Standard Webhooks signature "v1,<base64>" of
// a message to dst; it is what sign returns.
func (w *Sink) appendSignature(dst []byte, id string, ts, body []byte) []byte {
	s := w.signers.Get().(*signer)
	s.mac.Reset()
	s.scratch = append(append(append(append(s.scratch[:0], id...), '.'), ts...), '.')
	s.mac.Write(s.scratch)
	s.mac.Write(body)
	s.sum = s.mac.Sum(s.sum[:0])
	dst = append(dst, "v1,"...)
	dst = base64.StdEncoding.AppendEncode(dst, s.sum)
	if cap(s.scratch) <= maxSignerScratch {
		w.signers.Put(s)
	}
	return dst
}

// setHeaders sets the sink's own headers of d's request on h, with one
// allocation for their values and one for the strings they slice.
func (w *Sink) setHeaders(h http.Header, d delivery.Delivery, body []byte) {
	buf := make([]byte, 0, 64+len(d.Key))
	buf = strconv.AppendInt(buf, w.now().Unix(), 10)
	tsEnd := len(buf)
	buf = strconv.AppendInt(buf, int64(d.Attempt), 10)
	attemptEnd := len(buf)
	buf = appendPosition(buf, d.Event.Position)
	posEnd := len(buf)
	buf = w.appendSignature(buf, d.Key, buf[:tsEnd], body)
	all := string(buf)
	vals := [len(ownHeaders)]string{"application/json", "varve-delivery", d.Key, d.Key,
		all[:tsEnd], all[posEnd:], all[tsEnd:attemptEnd], all[attemptEnd:posEnd]}
	backing := vals[:] // escapes: one allocation for all the values
	for i, k := range ownHeaders {
		h[k] = backing[i : i+1 : i+1]
	}
}

// appendPosition appends what p.String returns.
func appendPosition(b []byte, p varve.Position) []byte {
	if p.Commit != 0 {
		b = strconv.AppendUint(b, p.Commit, 10)
		b = append(b, ':')
	}
	return strconv.AppendUint(b, p.Seq, 10)
}

// send sends req. Our own client follows no redirect and has no cookie jar
// and no timeout of its own, so its transport does all that Client.Do would,
// except the basic auth of the URL's user, done here; a transport error is
// a *url.Error as Client.Do returns it.
func (w *Sink) send(req *http.Request) (*http.Response, error) {
	if w.transport == nil {
		return w.client.Do(req)
	}
	if u := req.URL.User; u != nil && req.Header.Get("Authorization") == "" {
		password, _ := u.Password()
		req.SetBasicAuth(u.Username(), password)
	}
	resp, err := w.transport.RoundTrip(req)
	if err != nil {
		return nil, &url.Error{Op: "Post", URL: w.ep.shown, Err: err}
	}
	return resp, nil
}
