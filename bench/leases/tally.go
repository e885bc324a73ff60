package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// A worker streams what it leased and admitted to the parent, one line
// per event, on its fd 3, written at once (no buffer), so that what a
// worker killed with SIGKILL leased and used is measured, not inferred:
//
//	L k   a lease call's reply booked k units for this process
//	G     a give-back was taken back by Redis
//	R     one unit was handed to a caller, who now waits for its slot
//	A     one request was admitted (after Reservation.Wait)
//
// Units leased to a process and never used are then leased − admitted −
// given back: leased − reserved of them were still in the lease, and
// reserved − admitted in the hands of callers waiting for their slots
// (which a limiter without leases loses as well). What it cannot see: a lease booked in Redis whose reply the
// process was killed before reading (lost, and not counted here).

// tally is what the parent read from one worker's stream.
type tally struct {
	leased, leases, maxLease, givebacks, reserved, admitted int64
}

func (t *tally) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "A":
			t.admitted++
		case "R":
			t.reserved++
		case "G":
			t.givebacks++
		case "L":
			if len(f) == 2 {
				k, _ := strconv.ParseInt(f[1], 10, 64)
				if k > 0 {
					t.leased += k
					t.leases++
					t.maxLease = max(t.maxLease, k)
				}
			}
		}
	}
}

// streamer writes a worker's events to fd 3, if the parent gave it one.
type streamer struct {
	mu sync.Mutex
	f  *os.File // nil: no stream
}

func newStreamer() *streamer {
	f := os.NewFile(3, "tally")
	if f == nil {
		return &streamer{}
	}
	if _, err := f.Stat(); err != nil {
		return &streamer{}
	}
	return &streamer{f: f}
}

func (s *streamer) write(line string) {
	if s.f == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = s.f.WriteString(line)
}

func (s *streamer) admitted() { s.write("A\n") }

func (s *streamer) reserved() { s.write("R\n") }

// reply streams what a script call of the lease mode booked or gave
// back: the lease script's op is its first ARGV.
func (s *streamer) reply(cmd redis.Cmder) {
	if s.f == nil || cmd.Err() != nil {
		return
	}
	name := strings.ToLower(cmd.Name())
	if name != "evalsha" && name != "eval" {
		return
	}
	args := cmd.Args()
	if len(args) < 3 {
		return
	}
	nkeys, err := strconv.Atoi(fmt.Sprint(args[2]))
	if err != nil || len(args) <= 3+nkeys {
		return
	}
	c, ok := cmd.(*redis.Cmd)
	if !ok {
		return
	}
	switch fmt.Sprint(args[3+nkeys]) {
	case "lease":
		if a, ok := c.Val().([]any); ok && len(a) > 0 {
			if k, ok := a[0].(int64); ok && k > 0 {
				s.write("L " + strconv.FormatInt(k, 10) + "\n")
			}
		}
	case "giveback":
		if n, ok := c.Val().(int64); ok && n == 1 {
			s.write("G\n")
		}
	}
}
