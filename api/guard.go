package api

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Browser guards. Whoever can open a page in the browser of someone who runs
// sluice (above all `sluice dev` on a laptop, where authentication is off)
// must not be able to drive the API through that browser:
//
//   - a state-changing request that names a foreign Origin (or "null") is
//     refused: browsers always send Origin on cross-origin POST, PUT, PATCH
//     and DELETE;
//   - a state-changing /api/ request must say Content-Type:
//     application/json (application/octet-stream for log shipping): the CORS
//     "simple" types (text/plain, forms) that a page may send cross-site
//     without a preflight are refused, and no preflight is ever allowed;
//   - when the API listens on loopback only, the Host header must name a
//     loopback host, so a DNS-rebound name cannot reach it as same-origin.
//
// Webhooks come from servers, not browsers: they carry no Origin and are
// verified by their own secrets; they skip the Content-Type rule.

// safeMethod reports whether m changes nothing.
func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// guarded wraps next with the browser guards.
func (h *handler) guarded(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.d.LoopbackOnly && !loopbackHost(r.Host) {
			writeError(w, http.StatusForbidden, fmt.Sprintf("host %q refused: this API listens on loopback only and answers only to localhost, 127.0.0.1 or [::1] (a guard against DNS rebinding)", r.Host))
			return
		}
		if safeMethod(r.Method) {
			next.ServeHTTP(w, r)
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r.Host) {
			writeError(w, http.StatusForbidden, fmt.Sprintf("cross-origin request refused: Origin %q is not this server (%s)", o, r.Host))
			return
		}
		if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
			writeError(w, http.StatusForbidden, "cross-site request refused (Sec-Fetch-Site: cross-site)")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// jsonOnly refuses state-changing /api/ requests that are not JSON (log
// shipping: octet-stream). It runs after authentication, so an outsider
// hears 401 first.
func jsonOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !safeMethod(r.Method) && strings.HasPrefix(r.URL.Path, "/api/") {
			want := "application/json"
			if strings.Contains(r.URL.Path, "/logs") || strings.Contains(r.URL.Path, "/artifacts/") {
				want = "application/octet-stream"
			}
			mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
			if err != nil || (mt != "application/json" && mt != want) {
				writeError(w, http.StatusUnsupportedMediaType, fmt.Sprintf("%s %s needs Content-Type: %s (got %q)", r.Method, r.URL.Path, want, r.Header.Get("Content-Type")))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// sameOrigin reports whether the Origin header names this host: its
// host[:port] equals the request's Host. "null" (sandboxed pages, file:)
// never does.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	return strings.EqualFold(u.Host, host)
}

// loopbackHost reports whether a Host header names this machine's loopback.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// LoopbackAddr reports whether a listen address binds only loopback
// (127.0.0.1:8080, localhost:8080, [::1]:8080); ":8080" binds every
// interface.
func LoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	return loopbackHost(host)
}

// remoteLoopback reports whether the request came from this machine.
func remoteLoopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
