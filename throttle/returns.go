package throttle

import (
	"context"
	"time"
)

// Returns reports how long from now until key can take more units than it
// can now: when the oldest unit its log counts leaves the window. It is 0
// when the key can take its whole limit now. This is the IETF RateLimit
// field's t for a sliding log ("until additional quota is made
// available"), which the middleware package states.
func (w *SlidingWindow) Returns(ctx context.Context, key string) (time.Duration, error) {
	return w.e.returns(ctx, key)
}

// returns is [SlidingWindow.Returns] for any algorithm: how long from now
// until one unit more than is left now fits, or 0 when every unit fits.
func (k *engine[S, A]) returns(ctx context.Context, key string) (time.Duration, error) {
	if err := checkRequest(ctx, key, 1); err != nil {
		return 0, err
	}
	k.mu.RLock()
	e := k.keys[key]
	if e == nil {
		k.mu.RUnlock()
		return 0, nil // a key not tracked has its whole limit
	}
	e.mu.Lock()
	k.mu.RUnlock()
	defer e.mu.Unlock()
	now := e.tick()
	left := k.alg.left(&e.s, now)
	if left >= k.maxN {
		return 0, nil
	}
	return time.Duration(k.alg.earliest(&e.s, now, max(e.pause.until, now), left+1) - now), nil
}
