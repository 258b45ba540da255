package console

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gorocketmq/gorocketmq/client"
)

// pageNames are the templates under templates/, each rendered inside
// layout.html.
var pageNames = []string{"cluster", "topics", "topic", "groups", "group", "messages", "message", "error"}

var funcs = template.FuncMap{
	"millis": func(ms int64) string {
		if ms <= 0 {
			return "-"
		}
		return time.UnixMilli(ms).Format("2006-01-02 15:04:05.000")
	},
	"pct": func(r float64) string { return fmt.Sprintf("%.1f%%", r*100) },
	"tps": func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) },
	// query builds a link's query string. It is a template.URL because
	// html/template would otherwise escape its '=' and '&' once more; every
	// key and value is already percent-encoded by url.Values, so nothing
	// in it can leave the attribute.
	"query": func(kv ...string) template.URL {
		v := url.Values{}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return template.URL(v.Encode())
	},
}

func parseTemplates() (map[string]*template.Template, error) {
	out := make(map[string]*template.Template, len(pageNames))
	for _, n := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+n+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", n, err)
		}
		out[n] = t
	}
	return out, nil
}

// page is what every template gets.
type page struct {
	Title    string
	Nav      string // the menu entry to highlight
	ReadOnly bool
	Token    string
	Flash    string
	Data     any
}

// render writes a page; a template error becomes a plain 500.
func (s *Server) render(w http.ResponseWriter, r *http.Request, name, title string, data any) {
	p := page{Title: title, Nav: name, ReadOnly: s.cfg.ReadOnly, Token: s.token, Data: data}
	if r != nil {
		p.Flash = s.flashOf(r.URL.Query())
	}
	s.renderPage(w, http.StatusOK, name, p)
}

func (s *Server) renderPage(w http.ResponseWriter, status int, name string, p page) {
	var buf bytes.Buffer
	if err := s.pages[name].Execute(&buf, p); err != nil {
		s.log.WithError(err).WithField("page", name).Error("rendering a page")
		http.Error(w, "console: cannot render the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// renderError shows err on the error page.
func (s *Server) renderError(w http.ResponseWriter, status int, err error) {
	s.renderPage(w, status, "error", page{Title: "Error", ReadOnly: s.cfg.ReadOnly, Token: s.token, Data: describe(err)})
}

// describe turns the errors operators hit most into plain sentences.
func describe(err error) string {
	var be *client.BrokerError
	switch {
	case errors.Is(err, client.ErrNoRoute):
		return "The topic does not exist (no route on the name server): " + err.Error()
	case errors.As(err, &be):
		return fmt.Sprintf("%s answered code %d: %s", be.Addr, int32(be.Code), be.Remark)
	}
	return err.Error()
}

// withFlash adds an outcome message to a redirect target, with its MAC
// under the console's token: a page shows only messages this console
// issued, so a crafted link cannot make it say "topic deleted".
func (s *Server) withFlash(target, msg string) string {
	u, err := url.Parse(target)
	if err != nil {
		return "/"
	}
	q := u.Query()
	q.Set("flash", msg)
	q.Set("fsig", s.flashMAC(msg))
	u.RawQuery = q.Encode()
	return u.String()
}

// flashOf returns the outcome message of a query, or "" when it carries
// none or its MAC does not match.
func (s *Server) flashOf(q url.Values) string {
	msg := q.Get("flash")
	if msg == "" || !hmac.Equal([]byte(q.Get("fsig")), []byte(s.flashMAC(msg))) {
		return ""
	}
	return msg
}

func (s *Server) flashMAC(msg string) string {
	m := hmac.New(sha256.New, []byte(s.token))
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
}

// Input rules (RocketMQ's: topic and group names are [%|a-zA-Z0-9_-],
// at most 127 characters; message ids are hex).
var (
	namePattern  = regexp.MustCompile(`^[%|a-zA-Z0-9_-]{1,127}$`)
	msgIDPattern = regexp.MustCompile(`^[0-9A-Fa-f]{32,56}$`)
	addrPattern  = regexp.MustCompile(`^[0-9A-Za-z.\-:\[\]]{1,255}:\d{1,5}$`)
)

func checkName(what, v string) (string, error) {
	v = strings.TrimSpace(v)
	if !namePattern.MatchString(v) {
		return "", fmt.Errorf("%w: %s \"%s\": use 1-127 of a-z A-Z 0-9 _ - %% |", ErrBadInput, what, v)
	}
	return v, nil
}

func checkMsgID(v string) (string, error) {
	v = strings.TrimSpace(v)
	if !msgIDPattern.MatchString(v) {
		return "", fmt.Errorf("%w: message id \"%s\": 32 or 56 hex digits (an offset id or a producer's unique id)", ErrBadInput, v)
	}
	return v, nil
}

func checkAddr(v string) (string, error) {
	v = strings.TrimSpace(v)
	if !addrPattern.MatchString(v) {
		return "", fmt.Errorf("%w: broker address \"%s\": host:port", ErrBadInput, v)
	}
	return v, nil
}

func checkInt(what, v string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%w: %s \"%s\": a whole number from %d to %d", ErrBadInput, what, v, lo, hi)
	}
	return n, nil
}

// checkText accepts a key, tag or body: valid UTF-8, not empty, bounded.
func checkText(what, v string, maxLen int, required bool) (string, error) {
	switch {
	case required && v == "":
		return "", fmt.Errorf("%w: %s is empty", ErrBadInput, what)
	case len(v) > maxLen:
		return "", fmt.Errorf("%w: %s is longer than %d bytes", ErrBadInput, what, maxLen)
	case !utf8.ValidString(v):
		return "", fmt.Errorf("%w: %s is not UTF-8 text", ErrBadInput, what)
	}
	return v, nil
}

// checkPropText accepts a tag or keys: text as checkText (optional), and
// no control characters. The message's properties are encoded with \x01
// and \x02 as separators, unescaped: a value holding them would add other
// properties to the message.
func checkPropText(what, v string, maxLen int) (string, error) {
	v, err := checkText(what, v, maxLen, false)
	if err != nil {
		return "", err
	}
	if strings.ContainsFunc(v, unicode.IsControl) {
		return "", fmt.Errorf("%w: %s holds a control character", ErrBadInput, what)
	}
	return v, nil
}

// parseWhen reads a time from a form: a datetime-local value
// (2006-01-02T15:04[:05]) in the console's local time, or epoch millis.
func parseWhen(v string) (time.Time, error) {
	v = strings.TrimSpace(v)
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil && ms >= 0 {
		return time.UnixMilli(ms), nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04"} {
		if t, err := time.ParseInLocation(layout, v, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%w: time \"%s\": pick a date and time, or give epoch milliseconds", ErrBadInput, v)
}

// bodyView is how a message body is shown: as text when it is UTF-8,
// else as hex.
type bodyView struct {
	Text   string
	Binary bool
	Size   int
}

func viewBody(b []byte) bodyView {
	const maxShown = 64 << 10
	shown := b
	if len(shown) > maxShown {
		shown = shown[:maxShown]
	}
	if utf8.Valid(shown) {
		return bodyView{Text: string(shown), Size: len(b)}
	}
	return bodyView{Text: fmt.Sprintf("% x", shown), Binary: true, Size: len(b)}
}
