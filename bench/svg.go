package main

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// bar is one value of a chart: the median and, when lo < hi, the spread.
type bar struct {
	med, lo, hi float64
	label       string // printed at the end of the bar; the median when empty
}

// chart is a horizontal grouped bar chart: one block of bars per group, one
// bar per series in each block.
type chart struct {
	title    string
	unit     string // axis caption
	log      bool   // logarithmic axis
	groups   []string
	series   []string
	vals     [][]bar // [group][series]; a bar with med <= 0 is left out
	ref      float64 // draw a dashed line here when > 0
	refLabel string
}

// colours keep one colour per system across the charts.
var colours = []struct{ prefix, colour string }{
	{"floor", "#6b7280"},
	{"bsm/redislock 1ms", "#60a5fa"},
	{"bsm/redislock", "#1d4ed8"},
	{"redsync", "#dc2626"},
	{"dlock lease", "#65a30d"},
	{"dlock fair", "#0d9488"},
	{"dlock notify off", "#86efac"},
	{"dlock", "#16a34a"},
}

func colourOf(series string) string {
	for _, c := range colours {
		if strings.HasPrefix(series, c.prefix) {
			return c.colour
		}
	}
	return "#7c3aed"
}

const (
	svgW     = 900
	labelW   = 190
	rightPad = 260
	barH     = 14
	barGap   = 4
	groupGap = 12
	headH    = 18
	topPad   = 40
	axisH    = 40
)

// svg renders the chart as a self-contained SVG document.
func (c chart) svg() string {
	plotW := float64(svgW - labelW - rightPad)
	lo, hi := c.domain()
	x := func(v float64) float64 {
		if c.log {
			v = math.Max(v, lo)
			return labelW + plotW*(math.Log10(v)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))
		}
		return labelW + plotW*(v-lo)/(hi-lo)
	}
	rows := 0
	for gi := range c.groups {
		rows += len(c.rowsOf(gi))
	}
	h := topPad + len(c.groups)*(headH+groupGap) + rows*(barH+barGap) + axisH
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", svgW, h, svgW, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#fff"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", 10, esc(c.title))
	plotTop, plotBot := float64(topPad), float64(h-axisH)
	// Grid and ticks.
	for _, t := range c.ticks(lo, hi) {
		xx := x(t)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e5e7eb"/>`+"\n", xx, plotTop, xx, plotBot)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#374151">%s</text>`+"\n", xx, plotBot+14, esc(num(t)))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#374151">%s</text>`+"\n", labelW+plotW/2, h-8, esc(c.unit))
	if c.ref > 0 && c.ref >= lo && c.ref <= hi {
		xx := x(c.ref)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#111827" stroke-dasharray="4 3"/>`+"\n", xx, plotTop-4, xx, plotBot)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="10" fill="#111827">%s</text>`+"\n", xx, plotTop-7, esc(c.refLabel))
	}
	y := plotTop
	for gi, g := range c.groups {
		y += groupGap
		fmt.Fprintf(&b, `<text x="10" y="%.1f" font-weight="bold">%s</text>`+"\n", y+12, esc(g))
		y += headH
		for _, si := range c.rowsOf(gi) {
			v := c.vals[gi][si]
			col := colourOf(c.series[si])
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" fill="#111827">%s</text>`+"\n", labelW-6, y+barH-3, esc(c.series[si]))
			x0 := x(lo)
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%d" fill="%s"/>`+"\n", x0, y, math.Max(1, x(v.med)-x0), barH, col)
			end := x(v.med)
			if v.hi > v.lo && v.lo > 0 {
				l, r := x(v.lo), x(v.hi)
				m := y + barH/2
				fmt.Fprintf(&b, `<path d="M%.1f %.1fH%.1fM%.1f %.1fV%.1fM%.1f %.1fV%.1f" stroke="#111827" fill="none"/>`+"\n",
					l, m, r, l, m-4, m+4, r, m-4, m+4)
				end = math.Max(end, r)
			}
			label := v.label
			if label == "" {
				label = num(v.med)
			}
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="#374151">%s</text>`+"\n", end+4, y+barH-3, esc(label))
			y += barH + barGap
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func (c chart) rowsOf(gi int) []int {
	var r []int
	for si := range c.series {
		if si < len(c.vals[gi]) && c.vals[gi][si].med > 0 {
			r = append(r, si)
		}
	}
	return r
}

func (c chart) domain() (lo, hi float64) {
	mn, mx := math.Inf(1), 0.0
	for _, g := range c.vals {
		for _, v := range g {
			if v.med <= 0 {
				continue
			}
			mx = math.Max(mx, math.Max(v.med, v.hi))
			mn = math.Min(mn, v.med)
			if v.lo > 0 {
				mn = math.Min(mn, v.lo)
			}
		}
	}
	if c.ref > 0 {
		mx, mn = math.Max(mx, c.ref), math.Min(mn, c.ref)
	}
	if mx == 0 {
		mx, mn = 1, 1
	}
	if c.log {
		return math.Pow(10, math.Floor(math.Log10(mn))), math.Pow(10, math.Ceil(math.Log10(mx*1.0001)))
	}
	step := niceCeil(mx * 1.05 / 6)
	return 0, math.Ceil(mx*1.05/step) * step
}

func (c chart) ticks(lo, hi float64) []float64 {
	var t []float64
	if c.log {
		for v := lo; v <= hi*1.0001; v *= 10 {
			t = append(t, v)
		}
		return t
	}
	step := niceCeil(hi / 6)
	for i := 0; float64(i)*step <= hi*1.0001; i++ {
		t = append(t, float64(i)*step)
	}
	return t
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v*0.9999 {
			return m * p
		}
	}
	return 10 * p
}

// num formats a value with three significant digits at most.
func num(v float64) string {
	switch a := math.Abs(v); {
	case a == 0:
		return "0"
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', 3, 64) + "M"
	case a >= 1e4:
		return strconv.FormatFloat(v/1e3, 'g', 3, 64) + "k"
	case a >= 100:
		return strconv.FormatFloat(math.Round(v), 'f', -1, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'g', 2, 64)
	}
}

func esc(s string) string { return html.EscapeString(s) }
