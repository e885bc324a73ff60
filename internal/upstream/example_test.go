package upstream_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/egress-go/egress/internal/upstream"
)

// An API that allows two requests a day and says so in X-RateLimit-*
// headers: the third request is refused with 429.
func Example() {
	api := upstream.New(upstream.Config{Rate: 100, Burst: 100, Quota: 2, Day: time.Hour})
	defer api.Close()
	client := &http.Client{Transport: upstream.Stamp(nil)}
	defer client.CloseIdleConnections()
	for range 3 {
		resp, err := client.Get(api.URL())
		if err != nil {
			fmt.Println(err)
			return
		}
		_ = resp.Body.Close()
		fmt.Printf("%s, remaining %s, Retry-After %q\n", resp.Status, resp.Header.Get("X-RateLimit-Remaining"), resp.Header.Get("Retry-After"))
	}
	st := api.Stats()
	fmt.Println("admitted", st.Admitted, "refused", st.Refused)
	// Output:
	// 200 OK, remaining 1, Retry-After ""
	// 200 OK, remaining 0, Retry-After ""
	// 429 Too Many Requests, remaining 0, Retry-After "3600"
	// admitted 2 refused 1
}
