package pipeline_test

import (
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/money"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// modelLabels are the distinct model label values of metric name in reg.
func modelLabels(t *testing.T, reg *prometheus.Registry, name string) []string {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "model" {
					out = append(out, l.GetValue())
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// A bill's model is its own label only when the catalogue declares it or
// a server listed it; every other name, however many, is one label
// "other".
func TestModelLabels(t *testing.T) {
	price := pricing.USD(1)
	f := newFixture(t, store.Account{Plan: store.PlanPaid, Cleared: true, Balance: &price})
	cat, err := catalog.New([]catalog.Provider{{Name: "p", Format: catalog.FormatOpenAI, BaseURL: "http://127.0.0.1:1/v1"}},
		[]catalog.Model{{ID: "declared-model", Provider: "p", Lane: catalog.LaneFast}}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	cat.Declare("a-service")
	m := pipeline.NewMetrics()
	reg := prometheus.NewRegistry()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	m.Admit("app", []string{"app/listed_tool"})
	f.gw.Catalog, f.gw.Metrics = cat, m
	chat := money.Chat
	var model string
	f.ep = &pipeline.Endpoint{Name: "test", Family: f.ep.Family, Billing: &chat, Handler: func(c *pipeline.Call) error {
		if err := c.Reserve(pricing.Micro(1)); err != nil {
			return err
		}
		_, err := c.Charge(pipeline.Bill{Units: 1, Unit: pricing.UnitToken, Model: model, Cost: pricing.Micro(1), Tokens: pipeline.Tokens{Input: 1}})
		return err
	}}
	names := []string{"declared-model", "a-service", "app/listed_tool", "app/unlisted_tool", "\x1b[31mred"}
	for i := range 50 {
		names = append(names, fmt.Sprintf("unknown-%d", i))
	}
	for _, model = range names {
		if w := f.call(); w.Code != http.StatusOK {
			t.Fatalf("%q: %d %s", model, w.Code, w.Body)
		}
	}
	want := []string{"a-service", "app/listed_tool", "declared-model", pipeline.LabelOther}
	for _, metric := range []string{"gw_cost_usd_total", "gw_tokens_total"} {
		if got := modelLabels(t, reg, metric); !slices.Equal(got, want) {
			t.Errorf("%s models %q, want %q", metric, got, want)
		}
	}
}

// An MCP gateway server's tool is a label of its own only when the server
// listed it, and at most MaxListedLabels of one server's are; every other
// name a caller sends is "other".
func TestMCPToolLabels(t *testing.T) {
	m := pipeline.NewMetrics()
	reg := prometheus.NewRegistry()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	var listed []string
	for i := range pipeline.MaxListedLabels + 5 {
		listed = append(listed, fmt.Sprintf("srv/t%03d", i))
	}
	m.Admit("srv", listed)
	for i := range pipeline.MaxListedLabels + 5 {
		m.MCPToolCall("srv", fmt.Sprintf("t%03d", i), "ok")
	}
	m.MCPToolCall("srv", "never-listed", "refused")
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "gw_mcp_tool_calls_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			var tool string
			for _, l := range s.GetLabel() {
				if l.GetName() == "tool" {
					tool = l.GetValue()
				}
			}
			counts[tool] += s.GetCounter().GetValue()
		}
	}
	if len(counts) != pipeline.MaxListedLabels+1 || counts["t000"] != 1 || counts[fmt.Sprintf("t%03d", pipeline.MaxListedLabels-1)] != 1 ||
		counts[pipeline.LabelOther] != 6 {
		t.Fatalf("%d tool labels; other %v", len(counts), counts[pipeline.LabelOther])
	}
}
