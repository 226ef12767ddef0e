package redact

import (
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	tests := []struct {
		in, want string
		secrets  []string
	}{
		{"memory:", "memory:", nil},
		{"sqlite:///tmp/x.db", "sqlite:///tmp/x.db", nil},
		{"postgres://u:pw@127.0.0.1/db?sslmode=disable", "postgres://u:xxxxx@127.0.0.1/db?sslmode=disable", []string{"pw@"}},
		{"postgres://u@127.0.0.1/db?password=hunter2&sslpassword=k3y", "postgres://u@127.0.0.1/db?password=xxxxx&sslpassword=xxxxx", []string{"hunter2", "k3y"}},
		{"nats://s3cr3tT0ken@127.0.0.1:4222", "nats://xxxxx@127.0.0.1:4222", []string{"s3cr3tT0ken"}},
		{"nats://user:pw@h1:4222,h2:4222", "", []string{"pw"}},
		{"nats://127.0.0.1:4222?user_jwt=eyJhbGci&nkey=SUAXYZ&stream=S", "nats://127.0.0.1:4222?user_jwt=xxxxx&nkey=xxxxx&stream=S", []string{"eyJhbGci", "SUAXYZ"}},
		{"postgres://u:p%zzword@h/db", "", []string{"p%zzword", "zzword"}},
		{"postgres://u:password@h:badport/db", "", []string{"password"}},
		{"https://u:pw@hooks.example/x?token=abc123", "https://u:xxxxx@hooks.example/x?token=xxxxx", []string{"abc123"}},
		{"postgres://h/db?varve_schema=a;password=x9x9", "", []string{"x9x9"}},
		{"host=127.0.0.1 user=u password='se cret' dbname=test", "host=127.0.0.1 user=u password=xxxxx dbname=test", []string{"se cret"}},
		{"host=h password=plain sslpassword=k2", "host=h password=xxxxx sslpassword=xxxxx", []string{"plain", "k2"}},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got := URL(tc.in)
			if tc.want != "" && got != tc.want {
				t.Errorf("URL(%q) = %q, want %q", tc.in, got, tc.want)
			}
			for _, s := range tc.secrets {
				if strings.Contains(got, s) {
					t.Errorf("URL(%q) = %q still holds %q", tc.in, got, s)
				}
			}
		})
	}
}

// FuzzURL: whatever the URL around it, a password or token never survives.
func FuzzURL(f *testing.F) {
	for _, s := range []string{"postgres://u:%s@h/db", "nats://%s@h:4222", "postgres://h/db?password=%s", "postgres://u:%s@h:x/db",
		"nats://h?user_jwt=%s", "host=h password=%s", "https://u:%s@h/x", "sqlite://%s@/x.db", "postgres://u:%s@h/db?a=%%zz"} {
		f.Add(s, "Zq9Secret")
	}
	f.Fuzz(func(t *testing.T, tmpl, secret string) {
		if len(secret) < 6 || strings.ContainsAny(secret, " '\"\\/@:?#&=%;,[]{}\t\n\r") || strings.Contains(Mask, secret) || !strings.Contains(tmpl, "%s") || strings.Count(tmpl, "%") != 1 {
			return
		}
		in := strings.Replace(tmpl, "%s", secret, 1)
		got := URL(in)
		if !strings.Contains(in, "password="+secret) && !strings.Contains(in, ":"+secret+"@") && !strings.Contains(in, "//"+secret+"@") && !strings.Contains(in, "jwt="+secret) {
			return // the secret sits where no rule says it is one
		}
		if strings.Contains(got, secret) {
			t.Fatalf("URL(%q) = %q leaks %q", in, got, secret)
		}
	})
}
