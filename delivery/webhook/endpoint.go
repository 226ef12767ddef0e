package webhook

import (
	"errors"
	"net/url"
	"strings"

	"github.com/varve-go/varve/internal/redact"
)

// endpoint is the URL of a webhook and what may be shown of it: errors,
// logs and parked records get the redacted form, never a password or a
// token of the URL.
type endpoint struct {
	raw     string   // for the requests only
	shown   string   // redact.URL(raw)
	secrets []string // what the redaction masked, as given and escaped
}

func newEndpoint(raw string) endpoint {
	ep := endpoint{raw: raw, shown: redact.URL(raw)}
	u, err := url.Parse(raw)
	if err != nil {
		return ep
	}
	shown, err := url.Parse(ep.shown)
	if err != nil {
		return ep
	}
	var masked []string
	if u.User != nil && shown.User != nil {
		if p, ok := u.User.Password(); ok {
			if q, _ := shown.User.Password(); q == redact.Mask {
				masked = append(masked, p)
			}
		}
		if shown.User.Username() == redact.Mask {
			masked = append(masked, u.User.Username())
		}
	}
	got, gotErr := url.ParseQuery(u.RawQuery)
	mask, maskErr := url.ParseQuery(shown.RawQuery)
	if gotErr == nil && maskErr == nil {
		for k, vs := range got {
			for i, v := range vs {
				if m := mask[k]; i < len(m) && m[i] == redact.Mask && v != redact.Mask {
					masked = append(masked, v)
				}
			}
		}
	}
	if shown.Fragment == redact.Mask {
		masked = append(masked, u.Fragment)
	}
	for _, s := range masked {
		if s == "" {
			continue
		}
		ep.secrets = append(ep.secrets, s, url.QueryEscape(s), url.PathEscape(s))
	}
	return ep
}

// scrub masks the URL's secrets in s, such as an endpoint that echoes the
// request's URL in its answer.
func (ep endpoint) scrub(s string) string {
	for _, secret := range ep.secrets {
		if strings.Contains(s, secret) {
			s = strings.ReplaceAll(s, secret, redact.Mask)
		}
	}
	return s
}

// requestError replaces the raw URL that net/http puts in a request's
// error (only its password is hidden there, not its query) by the shown
// one; the error stays a *url.Error with the same cause.
func (ep endpoint) requestError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return &url.Error{Op: ue.Op, URL: ep.shown, Err: ue.Err}
	}
	return err
}
