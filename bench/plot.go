package main

import (
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// bin is the width of one bar of the timelines.
const bin = 100 * time.Millisecond

// latenessPlot is the file name of the wake-up lateness histogram.
const latenessPlot = "lateness.png"

func plotFile(sc scenario) string { return "scenario" + sc.id + ".png" }

// plot draws a scenario's timeline, one panel per contender on a shared
// time axis: requests admitted per 100 ms against the limit line, or, for
// a windowed limit, requests that reached the upstream in the trailing
// window against the limit. The axis ends at twice the theoretical
// minimum; a contender still running then is cut off, as its row says.
func (h *harness) plot(sc scenario, rows []row) error {
	if sc.plot == plotNone {
		return nil
	}
	if err := h.plotLearned(sc, rows); err != nil {
		return err
	}
	var ran []row
	for _, r := range rows {
		if r.skipped == "" {
			ran = append(ran, r)
		}
	}
	if len(ran) == 0 {
		return nil
	}
	end := 2 * sc.minimum().Seconds()
	limit, ylabel := float64(sc.limit.Rate)*bin.Seconds(), "admitted per 100 ms"
	if sc.plot == plotTrailingWindow {
		limit, ylabel = float64(sc.limit.Limit), "sent in trailing "+sc.limit.Window.String()
	}
	plots := make([][]*plot.Plot, len(ran))
	for i, r := range ran {
		p := plot.New()
		if i == 0 {
			p.Title.Text = "Scenario " + sc.id + ": " + ylabel + " (dashed: the limit)"
		}
		if i == len(ran)-1 {
			p.X.Label.Text = "seconds since start"
		}
		p.Y.Label.Text = wrapLabel(r.contender, 24)
		p.X.Min, p.X.Max = 0, end
		p.Y.Min = 0
		var pts plotter.XYs
		if sc.plot == plotTrailingWindow {
			pts = trailing(r.allArrivals, r.start, sc.limit.Window)
		} else {
			pts = perBin(r.arrivals, r.start)
		}
		pts = slices.DeleteFunc(pts, func(xy plotter.XY) bool { return xy.X > end })
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color = plotutil.Color(i)
		lim, err := plotter.NewLine(plotter.XYs{{X: 0, Y: limit}, {X: end, Y: limit}})
		if err != nil {
			return err
		}
		lim.Color = color.Black
		lim.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
		p.Add(l, lim)
		p.Y.Max = max(p.Y.Max, 1.3*limit)
		plots[i] = []*plot.Plot{p}
	}
	img := vgimg.New(10*vg.Inch, vg.Length(1.6*float64(len(ran))+0.6)*vg.Inch)
	dc := draw.New(img)
	canvases := plot.Align(plots, draw.Tiles{Rows: len(ran), Cols: 1, PadX: vg.Millimeter, PadY: 2 * vg.Millimeter,
		PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(8)}, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	f, err := os.Create(filepath.Join(h.out, plotFile(sc)))
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// wrapLabel breaks s into lines of at most width bytes at spaces, so that
// a long contender name fits beside its panel: drawn in one line, it was
// taller than a lone panel, and the plot squashed to a sliver (6d).
func wrapLabel(s string, width int) string {
	var b strings.Builder
	line := 0
	for i, w := range strings.Fields(s) {
		if i > 0 && line+1+len(w) > width {
			b.WriteByte('\n')
			line = 0
		} else if i > 0 {
			b.WriteByte(' ')
			line++
		}
		b.WriteString(w)
		line += len(w)
	}
	return b.String()
}

// perBin counts arrivals per 100 ms since start.
func perBin(arrivals []time.Time, start time.Time) plotter.XYs {
	var counts []float64
	for _, a := range arrivals {
		i := int(a.Sub(start) / bin)
		if i < 0 {
			i = 0
		}
		for len(counts) <= i {
			counts = append(counts, 0)
		}
		counts[i]++
	}
	pts := make(plotter.XYs, len(counts))
	for i, c := range counts {
		pts[i] = plotter.XY{X: (time.Duration(i) * bin).Seconds(), Y: c}
	}
	return pts
}

// trailing samples, every 10 ms, how many of the sorted arrivals fall in
// the window that ends then.
func trailing(arrivals []time.Time, start time.Time, window time.Duration) plotter.XYs {
	if len(arrivals) == 0 {
		return nil
	}
	var pts plotter.XYs
	lo, hi := 0, 0
	last := arrivals[len(arrivals)-1].Add(window)
	for t := start; !t.After(last); t = t.Add(10 * time.Millisecond) {
		for hi < len(arrivals) && !arrivals[hi].After(t) {
			hi++
		}
		for lo < hi && t.Sub(arrivals[lo]) >= window {
			lo++
		}
		pts = append(pts, plotter.XY{X: t.Sub(start).Seconds(), Y: float64(hi - lo)})
	}
	return pts
}

// plotLateness draws histograms of wake-up lateness for egress and for a
// bare time.Sleep, on the same bins. The last bin also holds everything
// beyond the 99.9th percentile.
func plotLateness(dir string, a accuracy) error {
	if len(a.late) == 0 {
		return nil
	}
	p := plot.New()
	p.Title.Text = "Wake-up lateness, 64 callers queued on one key"
	p.X.Label.Text = "lateness (ms); the last bin holds everything beyond the 99.9th percentile"
	p.Y.Label.Text = "wake-ups"
	p.Legend.Top = true
	const bins = 50
	colors := [2]color.NRGBA{{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, {R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}} // egress, time.Sleep
	top := max(quantile(a.late, 0.999), quantile(a.sleepLate, 0.999)).Seconds() * 1e3
	width := top / bins
	for i, s := range []struct {
		name string
		ds   []time.Duration
	}{{"egress Reservation.Wait (vs reserved slot)", a.late}, {"bare time.Sleep (vs asked delay)", a.sleepLate}} {
		h := &plotter.Histogram{Width: width, LineStyle: plotter.DefaultLineStyle}
		h.Bins = make([]plotter.HistogramBin, bins)
		for j := range h.Bins {
			h.Bins[j].Min, h.Bins[j].Max = float64(j)*width, float64(j+1)*width
		}
		for _, d := range s.ds {
			j := min(max(int(d.Seconds()*1e3/width), 0), bins-1)
			h.Bins[j].Weight++
		}
		c := colors[i]
		h.LineStyle.Color = c
		c.A = 90
		h.FillColor = c
		p.Add(h)
		p.Legend.Add(s.name, h)
	}
	return p.Save(10*vg.Inch, 5*vg.Inch, filepath.Join(dir, latenessPlot))
}

// learnedPlotFile is the file of a scenario's learned-rate plot.
func learnedPlotFile(sc scenario) string { return "scenario" + sc.id + "-learned.png" }

// learnedRows returns the rows of contenders that reported a learned rate.
func learnedRows(rows []row) []row {
	var out []row
	for _, r := range rows {
		if r.skipped == "" && len(r.learned) > 0 {
			out = append(out, r)
		}
	}
	return out
}

// plotLearned draws, for the contenders that learn the limit, the rate
// they held every 100 ms against the hidden limit (dashed) and the ±10%
// band (dotted). It draws nothing when no contender learned.
func (h *harness) plotLearned(sc scenario, rows []row) error {
	ran := learnedRows(rows)
	if len(ran) == 0 {
		return nil
	}
	p := plot.New()
	p.Title.Text = "Scenario " + sc.id + ": learned rate per second (dashed: the hidden limit; dotted: ±10%)"
	p.X.Label.Text = "seconds since start"
	p.Y.Label.Text = "rate, per second"
	limit := float64(sc.limit.Rate)
	end := 0.0
	for i, r := range ran {
		pts := make(plotter.XYs, len(r.learned))
		for j, v := range r.learned {
			pts[j] = plotter.XY{X: (time.Duration(j) * bin).Seconds(), Y: v}
		}
		end = max(end, pts[len(pts)-1].X)
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color = plotutil.Color(i)
		p.Add(l)
		p.Legend.Add(r.contender, l)
	}
	for _, f := range []float64{1, 0.9, 1.1} {
		lim, err := plotter.NewLine(plotter.XYs{{X: 0, Y: f * limit}, {X: end, Y: f * limit}})
		if err != nil {
			return err
		}
		lim.Color = color.Black
		lim.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
		if f != 1 {
			lim.Dashes = []vg.Length{vg.Points(1), vg.Points(3)}
		}
		p.Add(lim)
	}
	p.Y.Min, p.Y.Max = 0, 2*limit
	p.Legend.Top = true
	return p.Save(10*vg.Inch, 3*vg.Inch, filepath.Join(h.out, learnedPlotFile(sc)))
}
