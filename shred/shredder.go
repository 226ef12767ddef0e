package shred

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/maypok86/otter/v2"

	"github.com/varve-go/varve"
)

// Config configures a Shredder.
type Config struct {
	// Master wraps the data keys the Shredder makes. Required.
	Master MasterKey
	// Previous are master keys that wrapped keys before a rotation: the
	// Shredder unwraps with them keys that Rotate has not wrapped again.
	Previous []MasterKey
	// CacheTTL is how long a process uses a data key it unwrapped before it
	// asks the key store again; default 30 s. An erasure in another process
	// takes effect here within it: data this process seals with the erased
	// key in that time is erased with it.
	CacheTTL time.Duration
	// CacheSize bounds the data keys kept unwrapped; default 10,000.
	CacheSize int
}

// Shredder seals events with per-subject data keys and opens them again
// as the store's [varve.Opener]; Erase destroys a subject's key.
// It is safe for concurrent use.
type Shredder struct {
	keys    varve.KeyStore
	masters map[string]MasterKey
	master  MasterKey
	// bySubject is each subject's current key, for sealing; byID each key
	// seen by id, or nil for a key that is gone, for opening.
	bySubject *otter.Cache[string, *dataKey]
	byID      *otter.Cache[uuid.UUID, *dataKey]
	ttl       time.Duration
}

type dataKey struct {
	id      uuid.UUID
	subject string
	aead    cipher.AEAD // nil: the key is gone, for good (ids are not reused)
	at      time.Time   // when it was read from the key store
	// Nonces of this process's seals under the key: a random 32-bit fixed
	// field and a 64-bit counter from a random start (NIST SP 800-38D
	// 8.2.1), so that a seal need not read crypto/rand. Two processes
	// repeat a nonce only if both fields meet: about 2^-32 times the
	// chance that two random 64-bit ranges of their seal counts overlap.
	fixed [4]byte
	ctr   atomic.Uint64
}

// nonce writes the next nonce of k into b (nonceLen bytes).
func (k *dataKey) nonce(b []byte) {
	copy(b, k.fixed[:])
	binary.BigEndian.PutUint64(b[4:], k.ctr.Add(1))
}

// cached returns c's entry for key unless it is a key older than the TTL.
// (The caches expire entries here rather than with a cleaning goroutine.)
func cached[K comparable](s *Shredder, c *otter.Cache[K, *dataKey], key K) (*dataKey, bool) {
	k, ok := c.GetIfPresent(key)
	if ok && k.aead != nil && time.Since(k.at) >= s.ttl {
		c.Invalidate(key)
		return nil, false
	}
	return k, ok
}

// New returns a Shredder whose keys are kept by b's key store (b or a
// backend it wraps must implement [varve.KeyStore]).
func New(b varve.Backend, cfg Config) (*Shredder, error) {
	ks, ok := varve.As[varve.KeyStore](b)
	if !ok {
		return nil, fmt.Errorf("shred: the backend keeps no keys: %w", varve.ErrNotSupported)
	}
	if cfg.Master == nil {
		return nil, fmt.Errorf("%w: Config.Master is required", ErrMasterKey)
	}
	if cfg.CacheTTL == 0 {
		cfg.CacheTTL = 30 * time.Second
	}
	if cfg.CacheSize == 0 {
		cfg.CacheSize = 10_000
	}
	if cfg.CacheTTL < 0 || cfg.CacheSize < 0 {
		return nil, fmt.Errorf("shred: negative cache bound: %w", varve.ErrInvalidArgument)
	}
	s := &Shredder{keys: ks, master: cfg.Master, masters: map[string]MasterKey{}, ttl: cfg.CacheTTL}
	for _, m := range append([]MasterKey{cfg.Master}, cfg.Previous...) {
		if _, dup := s.masters[m.ID()]; dup {
			return nil, fmt.Errorf("%w: two master keys named %q", ErrMasterKey, m.ID())
		}
		s.masters[m.ID()] = m
	}
	var err error
	s.bySubject, err = otter.New(&otter.Options[string, *dataKey]{MaximumSize: cfg.CacheSize})
	if err == nil {
		s.byID, err = otter.New(&otter.Options[uuid.UUID, *dataKey]{MaximumSize: cfg.CacheSize})
	}
	if err != nil {
		return nil, fmt.Errorf("shred: cache: %w", err)
	}
	return s, nil
}

// aad is the additional data that binds a wrapped key to its subject and id.
func aad(subject string, id uuid.UUID) []byte { return append([]byte(subject+"\x00"), id[:]...) }

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// unwrap makes the AEAD of a stored key.
func (s *Shredder) unwrap(ctx context.Context, w varve.WrappedKey) (*dataKey, error) {
	m, ok := s.masters[w.Master]
	if !ok {
		return nil, fmt.Errorf("%w: the key of %q was wrapped by master key %q, which this Shredder lacks (Config.Previous)", ErrMasterKey, w.Subject, w.Master)
	}
	raw, err := m.Unwrap(ctx, w.Wrapped, aad(w.Subject, w.ID))
	if err != nil {
		return nil, err
	}
	defer clear(raw)
	aead, err := newAEAD(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: data key of %q: %v", ErrMasterKey, w.Subject, err)
	}
	k := &dataKey{id: w.ID, subject: w.Subject, aead: aead, at: time.Now()}
	var start [12]byte
	if _, err := io.ReadFull(rand.Reader, start[:]); err != nil {
		return nil, err
	}
	copy(k.fixed[:], start[:4])
	k.ctr.Store(binary.BigEndian.Uint64(start[4:]))
	return k, nil
}

// current returns the subject's key for sealing, made if it has none.
func (s *Shredder) current(ctx context.Context, subject string) (*dataKey, error) {
	if k, ok := cached(s, s.bySubject, subject); ok {
		return k, nil
	}
	w, err := s.keys.GetKey(ctx, subject)
	if errors.Is(err, varve.ErrKeyNotFound) {
		raw := make([]byte, 32)
		if _, err := io.ReadFull(rand.Reader, raw); err != nil {
			return nil, err
		}
		id := uuid.New()
		wrapped, err := s.master.Wrap(ctx, raw, aad(subject, id))
		clear(raw)
		if err != nil {
			return nil, fmt.Errorf("shred: wrap the key of %q: %w", subject, err)
		}
		w, err = s.keys.PutKey(ctx, varve.WrappedKey{Subject: subject, ID: id, Master: s.master.ID(), Wrapped: wrapped})
		if err != nil {
			return nil, fmt.Errorf("shred: store the key of %q: %w", subject, err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("shred: key of %q: %w", subject, err)
	}
	k, err := s.unwrap(ctx, w)
	if err != nil {
		return nil, err
	}
	s.bySubject.Set(subject, k)
	s.byID.Set(k.id, k)
	return k, nil
}

// byKey returns the key that sealed h, or a dataKey without an AEAD when it
// is gone.
func (s *Shredder) byKey(ctx context.Context, h header) (*dataKey, error) {
	if k, ok := cached(s, s.byID, h.key); ok {
		return k, nil
	}
	w, err := s.keys.GetKey(ctx, h.subject())
	k := &dataKey{id: h.key, subject: h.subject()}
	switch {
	case errors.Is(err, varve.ErrKeyNotFound):
	case err != nil:
		return nil, fmt.Errorf("shred: key of %q: %w", h.subject(), err)
	case w.ID == h.key:
		if k, err = s.unwrap(ctx, w); err != nil {
			return nil, err
		}
		s.bySubject.Set(h.subject(), k)
	}
	s.byID.Set(h.key, k)
	return k, nil
}

func checkSubject(subject string) error {
	if err := varve.CheckName(subject); err != nil {
		return fmt.Errorf("shred: subject %q: %w", subject, err)
	}
	return nil
}

// seal returns the envelope of plaintext under the subject's key.
func (s *Shredder) seal(ctx context.Context, subject string, plaintext []byte) ([]byte, error) {
	if err := checkSubject(subject); err != nil {
		return nil, err
	}
	k, err := s.current(ctx, subject)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(magic)+16+binary.MaxVarintLen64+len(subject)+nonceLen+len(plaintext)+tagLen)
	out = append(out, magic...)
	out = append(out, k.id[:]...)
	out = binary.AppendUvarint(out, uint64(len(subject)))
	out = append(out, subject...)
	hdr := len(out)
	out = out[:hdr+nonceLen]
	k.nonce(out[hdr:])
	return k.aead.Seal(out, out[hdr:], plaintext, out[:hdr]), nil
}

// Seal returns ev with its data sealed under the subject's key, made if the
// subject has none. Metadata, type and tags stay as they are: keep personal
// data out of them. Subjects should be opaque ids (a user id, not an email
// address): they are stored in the clear beside the data.
func (s *Shredder) Seal(ctx context.Context, subject string, ev varve.Event) (varve.Event, error) {
	env, err := s.seal(ctx, subject, ev.Data)
	if err != nil {
		return ev, err
	}
	ev.Data = env
	return ev, nil
}

// SealFields returns ev with the named top-level fields of its JSON object
// data sealed under the subject's key: each value becomes a string that
// holds its envelope, and the other fields stay readable (to filters, to
// SQL over the store). A named field that is absent is left out.
func (s *Shredder) SealFields(ctx context.Context, subject string, ev varve.Event, fields ...string) (varve.Event, error) {
	if err := checkSubject(subject); err != nil {
		return ev, err
	}
	want := map[string]bool{}
	for _, f := range fields {
		want[f] = true
	}
	dec := json.NewDecoder(bytes.NewReader(ev.Data))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ev, fmt.Errorf("shred: seal fields: the data is not a JSON object: %w", varve.ErrInvalidArgument)
	}
	var out bytes.Buffer
	out.WriteByte('{')
	for n := 0; dec.More(); n++ {
		t, err := dec.Token()
		if err != nil {
			return ev, fmt.Errorf("shred: seal fields: %v: %w", err, varve.ErrInvalidArgument)
		}
		name := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return ev, fmt.Errorf("shred: seal fields: %v: %w", err, varve.ErrInvalidArgument)
		}
		if want[name] {
			env, err := s.seal(ctx, subject, v)
			if err != nil {
				return ev, err
			}
			v = json.RawMessage(`"` + fieldPrefix + base64.RawURLEncoding.EncodeToString(env) + `"`)
		}
		if n > 0 {
			out.WriteByte(',')
		}
		kb, _ := json.Marshal(name)
		out.Write(kb)
		out.WriteByte(':')
		out.Write(v)
	}
	out.WriteByte('}')
	ev.Data = out.Bytes()
	return ev, nil
}

// SealBytes seals data under the subject's key, for what the application
// keeps beside the store, such as a snapshot or a read model's column.
// OpenBytes opens it.
func (s *Shredder) SealBytes(ctx context.Context, subject string, data []byte) ([]byte, error) {
	return s.seal(ctx, subject, data)
}

// open opens one envelope: its plaintext, or the marker when its key is
// gone (gone true).
func (s *Shredder) open(ctx context.Context, env []byte) (plain []byte, gone bool, err error) {
	h, err := sealedHeader(env)
	if err != nil {
		return nil, false, err
	}
	k, err := s.byKey(ctx, h)
	if err != nil {
		return nil, false, err
	}
	if k.aead == nil {
		return marker(h), true, nil
	}
	plain, err = k.aead.Open(nil, h.body[:nonceLen], h.body[nonceLen:], h.aad)
	if err != nil {
		return nil, false, fmt.Errorf("%w: the data of %q fails authentication", ErrCorrupt, h.subject())
	}
	return plain, false, nil
}

// OpenBytes opens data sealed by SealBytes or Seal, or the sealed fields of
// a JSON document; data that is not sealed comes back as it is. Data whose
// key was erased comes back as the erased marker, and erased fields as
// null ([Erased]), not as an error.
func (s *Shredder) OpenBytes(ctx context.Context, data []byte) ([]byte, error) {
	if bytes.HasPrefix(data, magic) {
		plain, _, err := s.open(ctx, data)
		return plain, err
	}
	var gone *header
	out, err := fieldTokens(data, func(env []byte) ([]byte, error) {
		plain, erased, err := s.open(ctx, env)
		if erased {
			if gone == nil {
				h, _ := sealedHeader(env)
				gone = &h
			}
			return []byte("null"), nil
		}
		return plain, err
	})
	if err == nil && gone != nil {
		out = withFieldMarker(out, *gone)
	}
	return out, err
}

// ErrErased: the data was sealed by a key that is gone (UnsealBytes).
var ErrErased = errors.New("shred: erased")

// UnsealBytes opens data sealed by SealBytes, like OpenBytes, but fails
// with ErrErased when the key is gone and with ErrCorrupt when data is not
// a sealed payload: for data that must not be mistaken for plaintext, such
// as a snapshot.
func (s *Shredder) UnsealBytes(ctx context.Context, data []byte) ([]byte, error) {
	plain, gone, err := s.open(ctx, data)
	if err == nil && gone {
		err = fmt.Errorf("%w: the key of %q", ErrErased, Subject(data))
	}
	if err != nil {
		return nil, err
	}
	return plain, nil
}

// OpenEvents implements [varve.Opener]: each sealed event's data is
// replaced by its plaintext, or by the erased marker.
func (s *Shredder) OpenEvents(ctx context.Context, evs []varve.RecordedEvent) error {
	for i := range evs {
		d := evs[i].Data
		if len(d) == 0 || d[0] != 0 && !bytes.Contains(d, []byte(fieldPrefix)) {
			continue
		}
		plain, err := s.OpenBytes(ctx, d)
		if err != nil {
			return fmt.Errorf("shred: open event %s@%d: %w", evs[i].Stream, evs[i].Version, err)
		}
		evs[i].Data = plain
	}
	return nil
}

// forget drops the cached keys of subject.
func (s *Shredder) forget(subject string, id uuid.UUID) {
	s.bySubject.Invalidate(subject)
	s.byID.Set(id, &dataKey{id: id, subject: subject})
}

var _ varve.Opener = (*Shredder)(nil)
