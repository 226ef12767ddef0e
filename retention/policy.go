package retention

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/varve-go/varve"
	"github.com/varve-go/varve/internal/backoff"
)

// The system streams of retention and the types of their events.
const (
	// PoliciesStream holds the policies: each event the whole set.
	PoliciesStream = varve.SystemPrefix + "retention"
	// RunsStream holds the scavenger's reports, one event per pass.
	RunsStream   = varve.SystemPrefix + "retention-runs"
	PoliciesType = "varve.retention-policies"
	RunType      = "varve.retention-run"
)

// Bounds of the policies and of what their streams keep.
const (
	// MaxRules bounds the targets that have a policy.
	MaxRules = 1000
	// KeptPolicySets is how many sets of policies PoliciesStream keeps:
	// the one in force and those before it.
	KeptPolicySets = 16
	// KeptReports is how many reports RunsStream keeps.
	KeptReports = 100
)

// ErrNoPolicy: the target has no policy to remove.
var ErrNoPolicy = errors.New("retention: no policy for the target")

// Policy says which events of a stream the scavenger removes; the zero
// value removes none. The limits combine: an event goes when any of them
// removes it.
type Policy struct {
	// MaxAge removes the events before the first one recorded at most
	// MaxAge ago; 0: no limit.
	MaxAge time.Duration
	// MaxCount keeps the last MaxCount events; 0: no limit.
	MaxCount int64
	// TruncateBefore removes the events with versions below it; 0: none.
	TruncateBefore varve.Version
	// AllowEmpty lets the limits remove a stream's last event too; without
	// it the last event stays whatever the limits say.
	AllowEmpty bool
}

// Validate reports a negative limit as [varve.ErrInvalidArgument].
func (p Policy) Validate() error {
	if p.MaxAge < 0 || p.MaxCount < 0 {
		return fmt.Errorf("%w: retention policy: max age %s and max count %d must not be negative", varve.ErrInvalidArgument, p.MaxAge, p.MaxCount)
	}
	return nil
}

// IsZero reports whether p removes nothing.
func (p Policy) IsZero() bool { return p == Policy{} }

// String describes p: "max age 720h0m0s, max count 100" or "no limit".
func (p Policy) String() string {
	var parts []string
	if p.MaxAge > 0 {
		parts = append(parts, "max age "+p.MaxAge.String())
	}
	if p.MaxCount > 0 {
		parts = append(parts, "max count "+strconv.FormatInt(p.MaxCount, 10))
	}
	if p.TruncateBefore > 0 {
		parts = append(parts, "before version "+strconv.FormatUint(p.TruncateBefore, 10))
	}
	if len(parts) == 0 {
		parts = append(parts, "no limit")
	}
	if p.AllowEmpty {
		parts = append(parts, "may remove the last event")
	}
	return strings.Join(parts, ", ")
}

// Target is what a policy applies to: a stream, or every stream of a
// category. Exactly one of the fields is set.
type Target struct {
	Stream   string
	Category string
}

// String is `stream "order-1"` or `category "order"`.
func (t Target) String() string {
	if t.Category != "" {
		return "category " + strconv.Quote(t.Category)
	}
	return "stream " + strconv.Quote(t.Stream)
}

// Check reports whether t is a valid target on a store whose category
// separator is sep: one stream id an application may write
// ([varve.CheckStreamID]), or one category of 1..256 bytes of UTF-8
// without NUL, without sep and not beginning with "$". A bad target is
// [varve.ErrInvalidArgument].
func (t Target) Check(sep string) error {
	switch {
	case t.Stream != "" && t.Category != "":
		return fmt.Errorf("%w: retention target: a stream or a category, not both", varve.ErrInvalidArgument)
	case t.Stream != "":
		if err := varve.CheckStreamID(t.Stream); err != nil {
			return fmt.Errorf("retention target: %w", err)
		}
		return nil
	case t.Category == "":
		return fmt.Errorf("%w: retention target: give a stream or a category", varve.ErrInvalidArgument)
	}
	c := t.Category
	switch {
	case len(c) > varve.MaxStreamIDLen || !utf8.ValidString(c) || strings.IndexByte(c, 0) >= 0:
		return fmt.Errorf("%w: retention target: category %q: 1..%d bytes of UTF-8 without NUL", varve.ErrInvalidArgument, c, varve.MaxStreamIDLen)
	case strings.HasPrefix(c, varve.SystemPrefix):
		return fmt.Errorf("%w: retention target: category %q: categories beginning with %q are system streams'", varve.ErrInvalidArgument, c, varve.SystemPrefix)
	case sep != "" && strings.Contains(c, sep):
		return fmt.Errorf("%w: retention target: category %q holds the store's category separator %q", varve.ErrInvalidArgument, c, sep)
	}
	return nil
}

// Rule is a target's policy, as kept in [PoliciesStream].
type Rule struct {
	Target    Target
	Policy    Policy
	UpdatedAt time.Time
}

// ruleJSON is the JSON of a Rule: in PoliciesStream, the server's API and
// the CLI's --json.
type ruleJSON struct {
	Stream         string        `json:"stream,omitempty"`
	Category       string        `json:"category,omitempty"`
	MaxAge         string        `json:"max_age,omitempty"`
	MaxCount       int64         `json:"max_count,omitempty"`
	TruncateBefore varve.Version `json:"truncate_before,omitempty"`
	AllowEmpty     bool          `json:"allow_empty,omitempty"`
	UpdatedAt      time.Time     `json:"updated_at"`
}

// MarshalJSON writes r flat: {"stream" or "category", "max_age" (a Go
// duration, "720h0m0s"), "max_count", "truncate_before", "allow_empty",
// "updated_at"}, the limits left out when zero.
func (r Rule) MarshalJSON() ([]byte, error) {
	j := ruleJSON{Stream: r.Target.Stream, Category: r.Target.Category, MaxCount: r.Policy.MaxCount,
		TruncateBefore: r.Policy.TruncateBefore, AllowEmpty: r.Policy.AllowEmpty, UpdatedAt: r.UpdatedAt}
	if r.Policy.MaxAge > 0 {
		j.MaxAge = r.Policy.MaxAge.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *Rule) UnmarshalJSON(b []byte) error {
	var j ruleJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	var age time.Duration
	if j.MaxAge != "" {
		var err error
		if age, err = time.ParseDuration(j.MaxAge); err != nil {
			return fmt.Errorf("retention rule: max_age %q: %w", j.MaxAge, err)
		}
	}
	*r = Rule{Target: Target{Stream: j.Stream, Category: j.Category},
		Policy:    Policy{MaxAge: age, MaxCount: j.MaxCount, TruncateBefore: j.TruncateBefore, AllowEmpty: j.AllowEmpty},
		UpdatedAt: j.UpdatedAt}
	return nil
}

// policySet is the data of a PoliciesType event.
type policySet struct {
	Rules []Rule `json:"rules"`
}

// Set gives target the policy p, replacing the one it had. Setting the
// policy a target has already writes nothing.
func Set(ctx context.Context, store *varve.Store, target Target, p Policy) error {
	err := target.Check(store.Config().CategorySeparator)
	if err == nil {
		err = p.Validate()
	}
	if err == nil && target.Category != "" && !store.Capabilities().ListStreams {
		err = fmt.Errorf("a category policy needs a store that lists its streams: %w", varve.ErrNotSupported)
	}
	if err == nil {
		err = change(ctx, store, func(rules []Rule) ([]Rule, bool, error) {
			i := slices.IndexFunc(rules, func(r Rule) bool { return r.Target == target })
			switch {
			case i >= 0 && rules[i].Policy == p:
				return rules, false, nil
			case i >= 0:
				rules[i] = Rule{Target: target, Policy: p, UpdatedAt: time.Now().UTC()}
			case len(rules) >= MaxRules:
				return nil, false, fmt.Errorf("%w: %d targets have a policy, the limit", varve.ErrInvalidArgument, MaxRules)
			default:
				rules = append(rules, Rule{Target: target, Policy: p, UpdatedAt: time.Now().UTC()})
			}
			return rules, true, nil
		})
	}
	if err != nil {
		return fmt.Errorf("retention: set the policy of %s: %w", target, err)
	}
	return nil
}

// Remove takes target's policy away; [ErrNoPolicy] when it has none.
func Remove(ctx context.Context, store *varve.Store, target Target) error {
	err := change(ctx, store, func(rules []Rule) ([]Rule, bool, error) {
		i := slices.IndexFunc(rules, func(r Rule) bool { return r.Target == target })
		if i < 0 {
			return nil, false, ErrNoPolicy
		}
		return slices.Delete(rules, i, i+1), true, nil
	})
	if err != nil {
		return fmt.Errorf("retention: remove the policy of %s: %w", target, err)
	}
	return nil
}

// List returns the policies in force: categories first, then streams, each
// in byte order.
func List(ctx context.Context, store *varve.Store) ([]Rule, error) {
	rules, _, err := load(ctx, store)
	if err != nil {
		return nil, fmt.Errorf("retention: list the policies: %w", err)
	}
	return rules, nil
}

// load reads the set in force and the version of PoliciesStream it is at
// (0: none yet).
func load(ctx context.Context, store *varve.Store) ([]Rule, varve.Version, error) {
	var empty varve.Version // the version of a read that found no event
	for {
		for e, err := range store.ReadStream(ctx, PoliciesStream, varve.ReadBackward(), varve.Limit(1)) {
			if errors.Is(err, varve.ErrStreamNotFound) {
				break
			}
			if err != nil {
				return nil, 0, err
			}
			if e.Type != PoliciesType {
				return nil, 0, fmt.Errorf("%s@%d is a %q event, not %q", PoliciesStream, e.Version, e.Type, PoliciesType)
			}
			var set policySet
			if err := json.Unmarshal(e.Data, &set); err != nil {
				return nil, 0, fmt.Errorf("%s@%d: %w", PoliciesStream, e.Version, err)
			}
			sortRules(set.Rules)
			return set.Rules, e.Version, nil
		}
		// An empty stream (never written, or deleted) has no version to
		// expect but NoStream; a stream emptied by a truncation cannot be,
		// since the last set is never truncated. A stream with events here
		// was written since the read: read it again, for an empty set at
		// its version would drop the rules just written.
		info, err := store.StreamInfo(ctx, PoliciesStream)
		if err != nil && !errors.Is(err, varve.ErrStreamNotFound) {
			return nil, 0, err
		}
		switch {
		case info.Deleted || info.Version == 0:
			return nil, 0, nil
		case info.Version == empty:
			return nil, 0, fmt.Errorf("%s is at version %d and has no event (truncated whole?)", PoliciesStream, info.Version)
		}
		empty = info.Version
	}
}

func sortRules(rules []Rule) {
	slices.SortFunc(rules, func(a, b Rule) int {
		kind := func(r Rule) int {
			if r.Target.Category != "" {
				return 0
			}
			return 1
		}
		return cmp.Or(cmp.Compare(kind(a), kind(b)), cmp.Compare(a.Target.Category, b.Target.Category), cmp.Compare(a.Target.Stream, b.Target.Stream))
	})
}

// maxChangeTries bounds the conflicts one change retries.
const maxChangeTries = 100

// change applies edit to the set in force and appends the result at the
// version it read, again on a conflict with another change.
func change(ctx context.Context, store *varve.Store, edit func([]Rule) ([]Rule, bool, error)) error {
	delay := backoff.Exponential{Initial: time.Millisecond, Max: 100 * time.Millisecond, Jitter: 1}
	for try := 1; ; try++ {
		rules, version, err := load(ctx, store)
		if err != nil {
			return err
		}
		rules, changed, err := edit(rules)
		if err != nil || !changed {
			return err
		}
		sortRules(rules)
		data, err := json.Marshal(policySet{Rules: rules})
		if err != nil {
			return err
		}
		res, err := store.System().Append(ctx, PoliciesStream, varve.Exact(version), varve.NewEvent(PoliciesType, data))
		if errors.Is(err, varve.ErrWrongExpectedVersion) && try < maxChangeTries {
			if err := backoff.Sleep(ctx, delay.Delay(try)); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		// The history beyond KeptPolicySets goes; should this fail, the
		// scavenger's next pass does it and reports why.
		_ = trim(ctx, store, PoliciesStream, res.LastVersion, KeptPolicySets)
		return nil
	}
}

// trim truncates a system stream at version so that it keeps its last
// keep events.
func trim(ctx context.Context, store *varve.Store, stream string, version varve.Version, keep uint64) error {
	if version <= keep {
		return nil
	}
	return store.System().Truncate(ctx, stream, version-keep+1)
}
