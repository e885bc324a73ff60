package throttle

import (
	"math/rand/v2"
	"testing"
)

func TestDivisorCeil(t *testing.T) {
	check := func(a, b int64) {
		t.Helper()
		want := (a + b - 1) / b
		if a > 1<<62 {
			want = (a-1)/b + 1
		}
		if a == 0 {
			want = 0
		}
		if got := newDivisor(b).ceil(a); got != want {
			t.Fatalf("⌈%d/%d⌉ = %d, want %d", a, b, got, want)
		}
	}
	for _, c := range [][2]int64{{0, 1}, {1, 1}, {1, 2}, {2, 2}, {3, 2}, {1<<50 - 1, 3}, {1 << 50, 3}, {1<<50 + 1, 7}, {1<<53 - 1, 3}, {1<<50 - 1, 1<<50 - 1}, {1<<50 - 1, 1 << 62}, {1<<62 - 1, 1 << 12}, {1 << 62, 1 << 12}, {1<<62 - 1, 1<<12 - 1}, {(1<<12 - 1) << 50, 1<<12 - 1}, {(1<<12-1)<<50 - 1, 1<<12 - 1}, {1<<62 + 5, 1<<31 - 1}, {999_999_999 * 999_999_999, 1_000_000_000}} {
		check(c[0], c[1])
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200_000 {
		b := rng.Int64N(1<<(1+rng.IntN(60))) + 1
		q := rng.Int64N(1 << (1 + rng.IntN(30)))
		a := q*b + rng.Int64N(b) - rng.Int64N(2) // around a multiple of b
		if a < 0 || a/b != q && a/b != q-1 {
			continue // overflowed
		}
		check(a, b)
	}
	for range 400_000 { // the float64 path: quotients below 2⁵⁰, a near a multiple of b
		b := rng.Int64N(1<<(1+rng.IntN(62))) + 1
		q := rng.Int64N(1 << (1 + rng.IntN(50)))
		if q > (1<<62)/b {
			q = (1 << 62) / b
		}
		a := q*b + rng.Int64N(3) - 1
		check(max(a, 0), b)
	}
}
