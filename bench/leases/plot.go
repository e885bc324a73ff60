package main

import (
	"fmt"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// plotShares draws each process's admitted rate per step over the swap
// run to leases/shares.png.
func plotShares(share [][]int, step time.Duration) error {
	p := plot.New()
	p.Title.Text = "swap: admitted per second by each process (250 ms steps)"
	p.X.Label.Text = "seconds since start"
	p.Y.Label.Text = "admitted/s"
	p.Y.Min, p.Y.Max = 0, 1.2*rate
	for i, s := range share {
		pts := make(plotter.XYs, len(s))
		for j, n := range s {
			pts[j] = plotter.XY{X: (time.Duration(j) * step).Seconds(), Y: float64(n) / step.Seconds()}
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color = plotutil.Color(i)
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("process %d", i+1), l)
	}
	p.Legend.Top = true
	return p.Save(10*vg.Inch, 4*vg.Inch, "leases/shares.png")
}
