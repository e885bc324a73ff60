package egress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/egress-go/egress/throttle"
)

// Snapshot answers "where is my request?": a [Transport]'s counters and,
// for each key asked about, what its limiter holds at one instant. Take
// one with [Transport.Snapshot], or serve them with [SnapshotHandler].
//
// Its JSON form is flat and in base units; "breaker" and "stated" are
// left out when there is nothing to report:
//
//	{"in_flight":1,"waiting":0,"sent":12,"retries":1,"refused":0,"pauses":1,
//	 "breaker":"closed",
//	 "keys":[{"key":"api.example.com","remaining":0,"next_seconds":0.25,
//	          "ahead":2,"paused_seconds":0.5,
//	          "stated":[{"name":"requests","unit":"requests","limit":100,
//	                     "remaining":0,"reset_seconds":12,"window_seconds":60}]}]}
type Snapshot struct {
	// Stats are the Transport's counters.
	Stats Stats
	// Breaker is the state of the limiter's circuit breaker when the
	// Transport's limiter is a [Breaker]: "closed" while its store
	// answers, "open" while it does not. It is "" for other limiters.
	Breaker string
	// Keys holds one entry per key asked about, in the order asked.
	Keys []throttle.KeyState
	// Stated holds, for the keys asked about, what the upstream last
	// stated, when the Transport keeps a record of it ([WithUpstream], or
	// its own; see [WithLimiter]): one
	// [throttle.Statement] per quota, as [throttle.Upstream.Stated]
	// reports it, its Reset measured from now. A key nothing was stated
	// for has no entry; Stated is nil when the Transport keeps no record.
	Stated map[string][]throttle.Statement
}

// Breaker is implemented by limiters whose state lives in a store that
// can fail behind a circuit breaker, as the limiters of package
// redislimit do. [Transport.Snapshot] reports its state.
type Breaker interface {
	// Available reports whether the store answers now: false while the
	// circuit breaker is open. It must be cheap and take no lock that
	// a call to the store holds.
	Available() bool
}

// Breaker states, the values of [Snapshot.Breaker].
const (
	BreakerClosed = "closed"
	BreakerOpen   = "open"
)

// ErrNoInspector reports that keys were asked about and the Transport's
// limiter cannot report them: it is not a [throttle.Inspector], or a part
// of it is not. Errors that say so match it with errors.Is.
var ErrNoInspector = errors.New("egress: the Transport's limiter does not report its keys (it is not a throttle.Inspector)")

// MaxSnapshotKeys bounds how many keys one request to a [SnapshotHandler]
// may ask about, so that a debug endpoint stays cheap.
const MaxSnapshotKeys = 100

// Snapshot returns t's counters, the state of its limiter's circuit
// breaker (when the limiter is a [Breaker]) and, for each of keys, the
// limiter's state ([throttle.Inspector.Inspect]): units that could be
// taken now, how long until the next unit is free, units booked ahead,
// and the pause in force; with a record of what the upstream states
// ([WithUpstream], or the Transport's own), also what it last stated for
// the key. It takes no lock of its own and books
// nothing: each key is read by one Inspect call, which the limiter keeps
// cheap. The keys are read one by one, so they are not one atomic
// picture of the limiter.
//
// The breaker is that of the limiter given to [WithLimiter], also when
// the record of what the upstream states is booked beside it.
//
// Asking about keys fails with [ErrNoInspector] when t has no limiter or
// its limiter is not a throttle.Inspector; a limiter that fails on a key
// fails the Snapshot, with an error that wraps the limiter's.
func (t *Transport) Snapshot(ctx context.Context, keys ...string) (Snapshot, error) {
	s := Snapshot{Stats: t.Stats()}
	if b := t.breaker; b != nil {
		s.Breaker = BreakerOpen
		if b.Available() {
			s.Breaker = BreakerClosed
		}
	}
	if len(keys) == 0 {
		return s, nil
	}
	in, ok := t.limiter.(throttle.Inspector)
	if !ok {
		return s, ErrNoInspector
	}
	s.Keys = make([]throttle.KeyState, 0, len(keys))
	for _, key := range keys {
		st, err := in.Inspect(ctx, key)
		if err != nil {
			return s, fmt.Errorf("egress: inspecting key %q: %w", key, err)
		}
		st.Key = key
		s.Keys = append(s.Keys, st)
		if t.upstream == nil {
			continue
		}
		if stated := t.upstream.Stated(key); len(stated) > 0 {
			if s.Stated == nil {
				s.Stated = make(map[string][]throttle.Statement)
			}
			s.Stated[key] = stated
		}
	}
	return s, nil
}

// snapshotJSON is Snapshot's JSON form.
type snapshotJSON struct {
	InFlight int       `json:"in_flight"`
	Waiting  int       `json:"waiting"`
	Sent     uint64    `json:"sent"`
	Retries  uint64    `json:"retries"`
	Refused  uint64    `json:"refused"`
	Pauses   uint64    `json:"pauses"`
	Breaker  string    `json:"breaker,omitempty"`
	Keys     []keyJSON `json:"keys"`
}

type keyJSON struct {
	Key           string       `json:"key"`
	Remaining     int          `json:"remaining"`
	NextSeconds   float64      `json:"next_seconds"`
	Ahead         int          `json:"ahead"`
	PausedSeconds float64      `json:"paused_seconds"`
	Stated        []statedJSON `json:"stated,omitempty"`
}

type statedJSON struct {
	Name          string  `json:"name"`
	Unit          string  `json:"unit"`
	Limit         int     `json:"limit"`
	Remaining     int     `json:"remaining"`
	ResetSeconds  float64 `json:"reset_seconds"`
	WindowSeconds float64 `json:"window_seconds,omitempty"`
}

// MarshalJSON writes s in the flat form shown on [Snapshot], with
// durations in seconds and each key's stated quotas in its entry; a
// Limit or Remaining the upstream did not state is -1.
func (s Snapshot) MarshalJSON() ([]byte, error) {
	out := snapshotJSON{
		InFlight: s.Stats.InFlight,
		Waiting:  s.Stats.Waiting,
		Sent:     s.Stats.Sent,
		Retries:  s.Stats.Retries,
		Refused:  s.Stats.Refused,
		Pauses:   s.Stats.Pauses,
		Breaker:  s.Breaker,
		Keys:     make([]keyJSON, len(s.Keys)),
	}
	for i, k := range s.Keys {
		out.Keys[i] = keyJSON{
			Key:           k.Key,
			Remaining:     k.Remaining,
			NextSeconds:   seconds(k.Next),
			Ahead:         k.Ahead,
			PausedSeconds: seconds(k.Paused),
		}
		for _, st := range s.Stated[k.Key] {
			out.Keys[i].Stated = append(out.Keys[i].Stated, statedJSON{
				Name: st.Name, Unit: st.Unit, Limit: st.Limit, Remaining: st.Remaining,
				ResetSeconds: seconds(st.Reset), WindowSeconds: seconds(st.Window),
			})
		}
	}
	return json.Marshal(out)
}

func seconds(d time.Duration) float64 { return max(d, 0).Seconds() }

// SnapshotHandler returns an [http.Handler] for a debug endpoint that
// answers GET with t's [Snapshot] as JSON, for keys and for every "key"
// query parameter (…/debug/egress?key=api.example.com&key=other), at most
// [MaxSnapshotKeys] in all. It answers 400 to too many keys, 405 to other
// methods, 501 when keys are asked about and t's limiter cannot report
// them, and 500 when the limiter fails.
//
// Keys and counters tell how busy an API is and, unless keys are hashed
// ([KeyByHeader]), may name customers: mount the handler where only
// operators can reach it. It panics if t is nil.
func SnapshotHandler(t *Transport, keys ...string) http.Handler {
	if t == nil {
		panic("egress: SnapshotHandler given a nil *Transport")
	}
	fixed := append([]string(nil), keys...)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "egress: snapshot answers GET only", http.StatusMethodNotAllowed)
			return
		}
		asked := r.URL.Query()["key"]
		if len(fixed)+len(asked) > MaxSnapshotKeys {
			http.Error(w, fmt.Sprintf("egress: snapshot asked for %d keys, more than MaxSnapshotKeys (%d)", len(fixed)+len(asked), MaxSnapshotKeys), http.StatusBadRequest)
			return
		}
		s, err := t.Snapshot(r.Context(), append(fixed[:len(fixed):len(fixed)], asked...)...)
		switch {
		case errors.Is(err, ErrNoInspector):
			http.Error(w, err.Error(), http.StatusNotImplemented)
			return
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		body, err := json.Marshal(s)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(append(body, '\n'))
	})
}
