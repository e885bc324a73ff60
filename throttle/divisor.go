package throttle

// divisor divides by one w many times. Multiplying by w's reciprocal in
// float64, then correcting the rounding once, is several times cheaper
// than a 64-bit integer division on common CPUs.
type divisor struct {
	w    int64
	inv  float64 // 1/w
	fast int64   // ceil takes the float64 path below this
}

func newDivisor(w int64) divisor {
	fast := int64(1 << 62)
	if w < 1<<12 {
		fast = w << 50
	}
	return divisor{w: w, inv: 1 / float64(w), fast: fast}
}

// ceil returns ⌈a/w⌉ for a >= 0.
//
// Below fast the quotient is under 2⁵⁰, so the float64 one, with its
// three roundings of at most 2⁻⁵³ each, is within 0.375 of it: truncated,
// it is off by at most one either way. fast also keeps q×w from
// overflowing.
func (d divisor) ceil(a int64) int64 {
	if a >= d.fast {
		return (a-1)/d.w + 1
	}
	q := int64(float64(a) * d.inv)
	r := a - q*d.w
	switch {
	case r < 0:
		q, r = q-1, r+d.w
	case r >= d.w:
		q, r = q+1, r-d.w
	}
	if r > 0 {
		q++
	}
	return q
}
