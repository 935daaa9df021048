package source

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
)

// Location is where a repository lives: a remote URL or a local path.
type Location struct {
	// Raw is the location as the user wrote it.
	Raw string
	// URL is the remote URL, normalized for transport; empty for a local
	// location.
	URL string
	// Path is the absolute directory of a local location (a local path or
	// a file:// URL).
	Path string
	// Ref is a ref carried in the location itself ("...git?ref=feature"),
	// as RepoConfig overrides write it.
	Ref string
}

var scpLike = regexp.MustCompile(`^([A-Za-z0-9._-]+)@([A-Za-z0-9.-]+):(.+)$`)

// ParseLocation parses a repository as written in a Sluice resource:
// https://, http://, ssh://, git@host:org/repo.git, file:///abs, or a local
// path, relative to baseDir. A "?ref=" query is split off into Ref.
func ParseLocation(raw, baseDir string) (Location, error) {
	loc := Location{Raw: raw}
	s := raw
	if i := strings.Index(s, "?"); i >= 0 {
		q, err := url.ParseQuery(s[i+1:])
		if err != nil {
			return loc, fmt.Errorf("%q: bad query: %w", Redact(raw), err)
		}
		for k := range q {
			if k != "ref" {
				return loc, fmt.Errorf("%q: unknown query parameter %q (only ref is understood)", Redact(raw), k)
			}
		}
		loc.Ref = q.Get("ref")
		s = s[:i]
	}
	switch {
	case s == "":
		return loc, fmt.Errorf("empty repository")
	case scpLike.MatchString(s):
		m := scpLike.FindStringSubmatch(s)
		loc.URL = "ssh://" + m[1] + "@" + m[2] + "/" + strings.TrimPrefix(m[3], "/")
	case strings.Contains(s, "://"):
		u, err := url.Parse(s)
		if err != nil {
			return loc, fmt.Errorf("%q: %w", Redact(raw), err)
		}
		switch u.Scheme {
		case "https", "http", "ssh", "git":
			if u.Host == "" {
				return loc, fmt.Errorf("%q: no host", Redact(raw))
			}
			loc.URL = s
		case "file":
			if u.Host != "" && u.Host != "localhost" {
				return loc, fmt.Errorf("%q: file:// URLs must be absolute (file:///path)", raw)
			}
			loc.Path = filepath.Clean(filepath.FromSlash(u.Path))
		default:
			return loc, fmt.Errorf("%q: unsupported scheme %q (use https, ssh, file or a local path)", Redact(raw), u.Scheme)
		}
	default:
		p := filepath.FromSlash(s)
		if !filepath.IsAbs(p) {
			p = filepath.Join(baseDir, p)
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return loc, err
		}
		loc.Path = abs
	}
	return loc, nil
}

// IsLocal reports whether the repository is on this machine's disk.
func (l Location) IsLocal() bool { return l.URL == "" }

// Key identifies the repository: two locations with the same Key are the
// same repository. Scheme and host are case-folded; credentials, a trailing
// slash and a ".git" suffix are ignored.
func (l Location) Key() string {
	if l.IsLocal() {
		return "file://" + filepath.ToSlash(l.Path)
	}
	u, err := url.Parse(l.URL)
	if err != nil {
		return l.URL
	}
	p := strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), ".git")
	host := strings.ToLower(u.Host)
	return strings.ToLower(u.Scheme) + "://" + host + p
}

// Repository identifies the repository regardless of how it is reached:
// https and ssh URLs of one host and path are the same repository.
func (l Location) Repository() string {
	if l.IsLocal() {
		return "file://" + filepath.ToSlash(l.Path)
	}
	u, err := url.Parse(l.URL)
	if err != nil {
		return l.URL
	}
	return strings.ToLower(u.Hostname()) + strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), ".git")
}

// String is the location without credentials.
func (l Location) String() string {
	if l.IsLocal() {
		return l.Path
	}
	return Redact(l.URL)
}

// Redact removes a password or token from a URL's userinfo, and from any
// URL inside a longer text.
func Redact(s string) string {
	return userinfo.ReplaceAllStringFunc(s, func(m string) string {
		i := strings.Index(m, "://")
		at := strings.LastIndex(m, "@")
		user := m[i+3 : at]
		if j := strings.Index(user, ":"); j >= 0 {
			user = user[:j] + ":***"
		} else if user != "git" && !strings.HasPrefix(m, "ssh") {
			user = "***"
		}
		return m[:i+3] + user + "@"
	})
}

var userinfo = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^/@\s]+@`)

// Origin is where a remote is reached: scheme, host and port, the port
// always written ("https://git.example.com:443", "ssh://host:22"); "" for
// a local location. Credentials given for one origin go to no other.
func (l Location) Origin() string {
	if l.IsLocal() {
		return ""
	}
	return OriginOf(l.URL)
}

// OriginOf is the origin of a URL ("" when it names no host).
func OriginOf(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return ""
	}
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		port = defaultPorts[scheme]
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// defaultPorts are the ports a URL without one reaches.
var defaultPorts = map[string]string{"https": "443", "http": "80", "ssh": "22", "git": "9418"}
