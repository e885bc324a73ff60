package throttle

import (
	"fmt"
	"testing"
	"time"
)

func TestSimExplore(t *testing.T) {
	for _, h := range []int{10, 100, 1000} {
		for seed := uint64(1); seed <= 6; seed++ {
			res := simulate(simConfig{hidden: h, burst: max(h/10, 1), callers: 32, way: 4 * time.Millisecond, back: 2 * time.Millisecond, run: 15 * time.Second, seed: seed, ceiling: PerSecond(10000)})
			adm, thr, lo, hi := res.after(5 * time.Second)
			fmt.Printf("h=%4d seed=%d util=%.3f thr=%.4f rate=[%.1f %.1f]\n", h, seed, float64(adm)/(float64(h)*10), float64(thr)/float64(adm+thr), lo, hi)
		}
	}
}
