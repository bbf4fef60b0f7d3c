package console

import (
	"fmt"
	"html/template"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/admin"
	"github.com/caddy-gw/caddy-gw/internal/usage"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// Geometry of the spend chart, in SVG user units.
const (
	chartWidth  = 720
	chartHeight = 240
	chartLeft   = 80 // room for the axis labels
	chartBottom = 28 // room for the day labels
	chartTop    = 16
	chartRight  = 16 // room for the last day's label
)

// palette colours the models of a chart, in turn.
var palette = []string{"#2563eb", "#d97706", "#059669", "#dc2626", "#7c3aed", "#0891b2", "#65a30d", "#db2777"}

// chart is a stacked bar chart of spend per day by model.
type chart struct {
	Width, Height int
	Bars          []bar
	Legend        []legendItem
	// Max is the largest day's spend (the top of the axis).
	Max pricing.Money
	// AxisX, AxisTop and AxisBottom place the axis labels.
	AxisX, AxisTop, AxisBottom, AxisRight int
	Labels                                []dayLabel
}

// bar is one model's part of one day's spend.
type bar struct {
	X, Y, W, H float64
	Fill       string
	Title      string
}

type legendItem struct {
	Model string
	Fill  string
	Cost  pricing.Money
}

type dayLabel struct {
	X    float64
	Y    int
	Text string
}

// spendChart lays out rows (grouped by day and model) over days days from
// from.
func spendChart(rows []usage.Row, from time.Time, days int) chart {
	c := chart{Width: chartWidth, Height: chartHeight, AxisX: chartLeft - 6, AxisTop: chartTop + 10, AxisBottom: chartHeight - chartBottom, AxisRight: chartWidth - chartRight}
	perDay := map[string]pricing.Money{}
	perModel := map[string]pricing.Money{}
	for _, r := range rows {
		if r.Day == nil || r.Model == nil {
			continue
		}
		perDay[*r.Day] += r.Cost
		perModel[*r.Model] += r.Cost
	}
	models := make([]string, 0, len(perModel))
	for m := range perModel {
		models = append(models, m)
	}
	slices.Sort(models)
	fill := map[string]string{}
	for i, m := range models {
		fill[m] = palette[i%len(palette)]
		c.Legend = append(c.Legend, legendItem{Model: m, Fill: fill[m], Cost: perModel[m]})
	}
	for _, v := range perDay {
		c.Max = max(c.Max, v)
	}
	plotH := float64(chartHeight - chartBottom - chartTop)
	slot := float64(chartWidth-chartLeft-chartRight) / float64(days)
	index := map[string]int{}
	for i := range days {
		d := from.AddDate(0, 0, i).Format(usage.DateLayout)
		index[d] = i
		// A label each week, counted back from the last day.
		if (days-1-i)%7 == 0 {
			c.Labels = append(c.Labels, dayLabel{X: chartLeft + slot*float64(i) + slot/2, Y: chartHeight - 6, Text: d[5:]})
		}
	}
	stack := map[string]float64{}
	for _, r := range rows {
		if r.Day == nil || r.Model == nil || c.Max <= 0 {
			continue
		}
		i, ok := index[*r.Day]
		if !ok {
			continue
		}
		h := plotH * float64(r.Cost) / float64(c.Max)
		base := float64(chartHeight-chartBottom) - stack[*r.Day]
		stack[*r.Day] += h
		c.Bars = append(c.Bars, bar{
			X: chartLeft + slot*float64(i) + slot*0.1, Y: base - h, W: slot * 0.8, H: h,
			Fill:  fill[*r.Model],
			Title: fmt.Sprintf("%s %s: %s, %d calls", *r.Day, *r.Model, dollars(r.Cost), r.Requests),
		})
	}
	return c
}

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"usd": func(m any) string {
		switch v := m.(type) {
		case pricing.Money:
			return dollars(v)
		case *pricing.Money:
			if v == nil {
				return "billed afterwards"
			}
			return dollars(*v)
		}
		return ""
	},
	"deref": func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	},
	// spendOf writes a key's or an organization's spend, and its cap
	// when it has one.
	"spendOf": func(spend pricing.Money, limit *pricing.Money) string {
		if limit == nil {
			return dollars(spend)
		}
		return dollars(spend) + " of " + dollars(*limit)
	},
	"capValue":    capValue,
	"orgCapValue": orgCapValue,
	"orgValue":    orgValue,
	"toolsValue":  toolsValue,
	"when":        func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
	// keyNameMax, reasonMax, idMax and orgNameMax bound the forms'
	// fields as the admin API does.
	"keyNameMax": func() int { return admin.MaxKeyName },
	"reasonMax":  func() int { return admin.MaxReason },
	"idMax":      func() int { return admin.MaxAccountID },
	"orgNameMax": func() int { return admin.MaxOrgName },
	"num":        func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) },
	// join writes a key's models or MCP tools: "all" for nil, "none"
	// for an empty list.
	"join": func(s []string) string {
		switch {
		case s == nil:
			return "all"
		case len(s) == 0:
			return "none"
		}
		return strings.Join(s, ", ")
	},
}

// dollars writes m as "$1.25" or "-$1.25", with every decimal it has.
func dollars(m pricing.Money) string {
	if m < 0 {
		return "-$" + (-m).String()
	}
	return "$" + m.String()
}

func itoa(n int) string { return strconv.Itoa(n) }
