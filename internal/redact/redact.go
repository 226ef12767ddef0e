// Package redact makes store URLs and DSNs fit for errors, logs and reports:
// one rule for every place a URL can reach. It removes passwords and tokens
// from the userinfo, masks the values of query parameters that carry
// credentials, masks password=... pairs of key=value DSNs, and never returns
// input it cannot parse unchanged.
package redact

import (
	"net/url"
	"regexp"
	"strings"
)

// Mask replaces each secret.
const Mask = "xxxxx"

// secretParams are query parameters (compared case-insensitively, with "-"
// and "_" ignored) whose values are credentials.
var secretParams = map[string]bool{
	"password": true, "sslpassword": true, "pass": true, "passwd": true, "pwd": true,
	"token": true, "accesstoken": true, "authtoken": true, "bearer": true, "auth": true,
	"apikey": true, "key": true, "secret": true, "clientsecret": true, "signature": true, "sig": true,
	"userjwt": true, "jwt": true, "nkey": true, "seed": true, "nkeyseed": true, "creds": true,
	"credentials": true, "sslkey": true, "sslcert": false,
}

func isSecretParam(k string) bool {
	k = strings.ToLower(strings.NewReplacer("-", "", "_", "").Replace(k))
	return secretParams[k]
}

// userSchemes are the schemes whose userinfo without a password is a user
// name; elsewhere it may be a bare token (nats://TOKEN@host) and is masked.
var userSchemes = map[string]bool{"postgres": true, "postgresql": true}

// URL returns raw without secrets. A URL that does not parse is reduced to
// its scheme and host-like part with the userinfo and query masked.
func URL(raw string) string {
	if !strings.Contains(raw, "://") && !strings.HasPrefix(raw, "mem") && strings.Contains(raw, "=") {
		return DSN(raw)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fallback(raw)
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), Mask)
		} else if !userSchemes[strings.ToLower(u.Scheme)] && u.User.Username() != "" {
			u.User = url.User(Mask)
		}
	}
	if u.RawQuery != "" {
		u.RawQuery = query(u.RawQuery)
	}
	if u.Fragment != "" {
		u.Fragment = Mask
	}
	if u.Opaque != "" && strings.ContainsAny(u.Opaque, "@?") {
		return fallback(raw)
	}
	// A credential-like pair anywhere else (a path, an opaque part) is
	// masked too.
	return DSN(u.String())
}

// query masks the values of secret parameters; a query that does not parse
// is masked whole.
func query(raw string) string {
	parts := strings.Split(raw, "&")
	for i, p := range parts {
		k, v, has := strings.Cut(p, "=")
		key, err := url.QueryUnescape(k)
		if err != nil || strings.ContainsAny(p, ";") {
			return Mask
		}
		if has && v != "" && isSecretParam(key) {
			parts[i] = k + "=" + Mask
		}
	}
	return strings.Join(parts, "&")
}

// fallback keeps the scheme and the host part of a URL that does not parse
// and masks everything that may hold a secret: the userinfo, the query and
// the rest of the authority.
func fallback(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		scheme, _, ok = strings.Cut(raw, ":")
		if !ok || strings.ContainsAny(scheme, "/@?") {
			return "(" + Mask + ")"
		}
		return scheme + ":" + Mask
	}
	if strings.ContainsAny(scheme, "/@?=") {
		return "(" + Mask + ")"
	}
	host := rest
	if i := strings.IndexAny(host, "/?#"); i >= 0 {
		host = host[:i]
	}
	if i := strings.LastIndexByte(host, '@'); i >= 0 {
		host = Mask + "@" + host[i+1:]
	}
	if strings.ContainsAny(host, "%:") {
		// A bad escape or port may be part of a password that lost its @.
		host = Mask
	}
	return scheme + "://" + host + "/" + Mask
}

var dsnSecret = regexp.MustCompile(`(?i)([a-z0-9_.-]*(?:password|passwd|token|secret|key|jwt|seed)[a-z0-9_]*)\s*=\s*('(?:[^'\\]|\\.)*'?|[^\s&]*)`)

// DSN masks the credentials of a key=value connection string such as
// PostgreSQL's "host=db user=u password=p".
func DSN(raw string) string {
	return dsnSecret.ReplaceAllString(raw, "${1}="+Mask)
}
