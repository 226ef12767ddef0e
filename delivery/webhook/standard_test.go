package webhook_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/delivery/webhook"
)

// The example of the Standard Webhooks specification
// (github.com/standard-webhooks/standard-webhooks, spec and libraries).
const (
	vectorSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTimestamp = "1614265330"
	vectorBody      = `{"test": 2432232314}`
	vectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func vectorHeader(sig string) http.Header {
	h := http.Header{}
	h.Set("webhook-id", vectorID)
	h.Set("webhook-timestamp", vectorTimestamp)
	h.Set("webhook-signature", sig)
	return h
}

// standardVerify is a verifier written from the text of the Standard
// Webhooks specification, sharing no code with package webhook: the key is
// the base64 after "whsec_", the signed content "{msg_id}.{timestamp}.
// {payload}", the signature HMAC-SHA256 in base64 behind "v1,", and the
// header a space-delimited list of signatures of which one must match.
func standardVerify(secret string, h http.Header, body []byte) bool {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(h.Get("webhook-id") + "." + h.Get("webhook-timestamp") + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for _, sig := range strings.Split(h.Get("webhook-signature"), " ") {
		version, encoded, ok := strings.Cut(sig, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(encoded)
		if err == nil && hmac.Equal(got, want) {
			return true
		}
	}
	return false
}

// TestStandardVector: the specification's example verifies, with Verify and
// with the independent verifier, and only with the secret decoded as the
// scheme says.
func TestStandardVector(t *testing.T) {
	t.Parallel()
	body := []byte(vectorBody)
	if !standardVerify(vectorSecret, vectorHeader(vectorSignature), body) {
		t.Fatal("the independent verifier rejects the specification's example")
	}
	if standardVerify(vectorSecret, vectorHeader(vectorSignature), append(body, ' ')) {
		t.Fatal("the independent verifier accepts a changed body")
	}
	key, err := webhook.ParseSecret(vectorSecret)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		secret []byte
		sig    string
		ok     bool
	}{
		{"whsec form", []byte(vectorSecret), vectorSignature, true},
		{"the decoded key as raw bytes", key, vectorSignature, true},
		{"among several signatures", []byte(vectorSecret), "v1,bm9wZQ== " + vectorSignature + " v1a,bm9wZQ==", true},
		{"the whsec string as raw key bytes is another key", []byte(strings.TrimPrefix(vectorSecret, "whsec_")), vectorSignature, false},
		{"another signature", []byte(vectorSecret), "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=", false},
	} {
		err := webhook.Verify(tc.secret, vectorHeader(tc.sig), body, 0)
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, webhook.ErrBadSignature) {
			t.Errorf("%s: Verify = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

// TestStandardInterop: a request of the sink configured with a "whsec_"
// secret passes the independent verifier; with a raw secret, Verify
// accepts what the sink signs.
func TestStandardInterop(t *testing.T) {
	t.Parallel()
	type request struct {
		header http.Header
		body   []byte
	}
	got := make(chan request, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- request{r.Header.Clone(), body}
	}))
	defer srv.Close()
	for _, secret := range []string{vectorSecret, "whsec_" + base64.RawStdEncoding.EncodeToString([]byte("25 bytes of a random key!")), "raw key"} {
		w, err := webhook.New(webhook.Config{URL: srv.URL, Secret: []byte(secret)})
		if err != nil {
			t.Fatal(err)
		}
		err = w.Deliver(context.Background(), testDelivery())
		w.Close()
		if err != nil {
			t.Fatal(err)
		}
		req := <-got
		if strings.HasPrefix(secret, "whsec_") && !standardVerify(padded(secret), req.header, req.body) {
			t.Errorf("secret %s: a Standard Webhooks verifier rejects the request", secret)
		}
		if err := webhook.Verify([]byte(secret), req.header, req.body, 0); err != nil {
			t.Errorf("secret %s: Verify: %v", secret, err)
		}
	}
}

// padded adds the base64 padding that a "whsec_" secret may leave out.
func padded(secret string) string {
	if n := len(secret) - len("whsec_"); n%4 != 0 {
		return secret + strings.Repeat("=", 4-n%4)
	}
	return secret
}

func TestParseSecret(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want string // "" for an error
	}{
		{"whsec_" + base64.StdEncoding.EncodeToString([]byte("key!")), "key!"},
		{"whsec_" + base64.RawStdEncoding.EncodeToString([]byte("key!")), "key!"},
		{"plain secret", "plain secret"},
		{"whsec_not base64!", ""},
		{"whsec_", ""},
		{"", ""},
	} {
		key, err := webhook.ParseSecret(tc.in)
		if tc.want == "" {
			if !errors.Is(err, varve.ErrInvalidArgument) {
				t.Errorf("ParseSecret(%q) = %q, %v; want ErrInvalidArgument", tc.in, key, err)
			}
			continue
		}
		if err != nil || string(key) != tc.want {
			t.Errorf("ParseSecret(%q) = %q, %v; want %q", tc.in, key, err, tc.want)
		}
	}
	if _, err := webhook.New(webhook.Config{URL: "http://127.0.0.1:1/", Secret: []byte("whsec_%%%")}); !errors.Is(err, varve.ErrInvalidArgument) {
		t.Errorf("New with a bad whsec_ secret: %v, want ErrInvalidArgument", err)
	}
}
