package upstream

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/egress-go/egress/internal/sendtime"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// get sends one GET, stamped as sent at sentAt when it is not zero, and
// returns the status and Retry-After.
func get(t *testing.T, s *Server, sentAt time.Time) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.URL(), nil)
	require.NoError(t, err)
	if !sentAt.IsZero() {
		req.Header.Set(sendtime.Header, strconv.FormatInt(sentAt.UnixNano(), 10))
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

func TestLimits(t *testing.T) {
	tests := []struct {
		name        string
		giveLimit   Limit
		giveSends   int
		wantAdmit   int
		wantRefused int
	}{
		{name: "token bucket admits its burst at once", giveLimit: Limit{Rate: 1, Burst: 3}, giveSends: 5, wantAdmit: 3, wantRefused: 2},
		{name: "sliding log admits its limit at once", giveLimit: Limit{Limit: 4, Window: time.Hour}, giveSends: 6, wantAdmit: 4, wantRefused: 2},
		{name: "pause after two", giveLimit: Limit{Rate: 1, Burst: 10, PauseAfter: 2, PauseFor: time.Hour}, giveSends: 5, wantAdmit: 2, wantRefused: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New()
			defer s.Close()
			s.Reset(tt.giveLimit)
			for range tt.giveSends {
				get(t, s, time.Time{})
			}
			st := s.Stats()
			assert.Equal(t, tt.wantAdmit, st.Admitted)
			assert.Equal(t, tt.wantRefused, st.Refused)
			assert.Len(t, st.Arrivals, tt.wantAdmit)
			assert.Len(t, st.Refusals, tt.wantRefused)
		})
	}
}

func TestRetryAfterIsWholeSeconds(t *testing.T) {
	s := New()
	defer s.Close()
	s.Reset(Limit{Rate: 1, Burst: 1, PauseAfter: 1, PauseFor: 1500 * time.Millisecond})
	status, _ := get(t, s, time.Time{})
	require.Equal(t, http.StatusOK, status)
	status, retryAfter := get(t, s, time.Time{})
	assert.Equal(t, http.StatusTooManyRequests, status)
	assert.Equal(t, "2", retryAfter)
}

func TestDuringPauseCountsOnlyRequestsSentAfterThe429(t *testing.T) {
	s := New()
	defer s.Close()
	s.Reset(Limit{Rate: 1, Burst: 10, PauseAfter: 1, PauseFor: time.Hour})
	before := time.Now()
	get(t, s, time.Time{}) // admitted
	get(t, s, time.Time{}) // the 429 that starts the pause
	get(t, s, before)      // in flight before that 429 left: not counted
	get(t, s, time.Now())  // sent after it: counted
	get(t, s, time.Time{}) // unstamped: not counted
	assert.Equal(t, 1, s.Stats().DuringPause)
}
