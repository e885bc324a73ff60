package throttle

// divisor divides by one w many times. Multiplying by w's reciprocal in
// float64, then correcting the rounding once, is several times cheaper
// than a 64-bit integer division on common CPUs.
type divisor struct {
	w   int64
	inv float64 // 1/w
}

func newDivisor(w int64) divisor { return divisor{w: w, inv: 1 / float64(w)} }

// ceil returns ⌈a/w⌉ for a >= 0. Below 2⁵⁰ the float64 quotient is
// within a quarter of the true one, so truncating it is off by at most
// one, either way.
func (d divisor) ceil(a int64) int64 {
	if a >= 1<<50 {
		return (a-1)/d.w + 1
	}
	q := int64(float64(a) * d.inv)
	switch r := a - q*d.w; {
	case r < 0:
		q--
	case r >= d.w:
		q++
	}
	if q*d.w < a {
		q++
	}
	return q
}
