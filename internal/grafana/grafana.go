// Package grafana reads the PromQL of a Grafana dashboard: its panels'
// queries, its annotations' and its template variables', and the metric
// names each selects. Tests hold the shipped dashboard against what a
// live bpfperfd serves with it.
package grafana

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Query is one PromQL expression of a dashboard and where it is.
type Query struct {
	Where string // "panel TITLE", "annotation NAME" or "variable NAME"
	Expr  string
	// Variable says Expr is a template variable's query: Grafana's
	// label_values(...), not PromQL a Prometheus runs.
	Variable bool
}

// Queries is every query of the dashboard. A panel or annotation without
// one is an error: it would show nothing.
func Queries(dashboard []byte) ([]Query, error) {
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Annotations struct {
			List []struct {
				Name string `json:"name"`
				Expr string `json:"expr"`
			} `json:"list"`
		} `json:"annotations"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(dashboard, &dash); err != nil {
		return nil, err
	}
	var qs []Query
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			return nil, fmt.Errorf("panel %q has no query", p.Title)
		}
		for _, t := range p.Targets {
			qs = append(qs, Query{Where: "panel " + p.Title, Expr: t.Expr})
		}
	}
	for _, a := range dash.Annotations.List {
		if a.Expr == "" {
			return nil, fmt.Errorf("annotation %q has no query", a.Name)
		}
		qs = append(qs, Query{Where: "annotation " + a.Name, Expr: a.Expr})
	}
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue // the data source picker, constants, ...
		}
		// A string, or {"query": "..."} in newer schemas.
		var q struct {
			Query string `json:"query"`
		}
		if json.Unmarshal(v.Query, &q.Query) != nil && json.Unmarshal(v.Query, &q) != nil || q.Query == "" {
			return nil, fmt.Errorf("variable %q has no query", v.Name)
		}
		qs = append(qs, Query{Where: "variable " + v.Name, Expr: q.Query, Variable: true})
	}
	if len(qs) == 0 {
		return nil, fmt.Errorf("no queries")
	}
	return qs, nil
}

var (
	// What names no metric: strings, label matchers, ranges and offsets,
	// grouping label lists.
	quoted   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	matchers = regexp.MustCompile(`\{[^}]*\}`)
	ranges   = regexp.MustCompile(`\[[^\]]*\]`)
	grouping = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	ident    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
	// Grafana's label_values(METRIC, LABEL) and label_values(LABEL) of
	// variables: the label is no metric.
	labelValues   = regexp.MustCompile(`label_values\(\s*([^,()]*),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)`)
	labelValuesOf = regexp.MustCompile(`label_values\(\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)`)
	variable      = regexp.MustCompile(`\$\{?[a-zA-Z_][a-zA-Z0-9_]*\}?`)
	// A number's exponent (1e9) or a duration's unit (5m, offset 1h30m)
	// reads as an identifier after its digits.
	duration = regexp.MustCompile(`\b[0-9]+(ms|s|m|h|d|w|y)([0-9]+(ms|s|m|h|d|w|y))*\b`)
	number   = regexp.MustCompile(`\b[0-9][0-9.]*(e[+-]?[0-9]+)?\b`)
)

// keywords of PromQL that stand alone (not followed by "(").
var keywords = []string{"and", "or", "unless", "bool", "offset", "group_left", "group_right", "inf", "nan", "Inf", "NaN"}

// MetricNames is the metric names expr selects, sorted, each once: every
// name that is not a function, an aggregation, a keyword, a label or a
// Grafana variable ($name, ${name}).
func MetricNames(expr string) []string {
	s := quoted.ReplaceAllString(expr, " ")
	s = matchers.ReplaceAllString(s, " ")
	s = ranges.ReplaceAllString(s, " ")
	s = grouping.ReplaceAllString(s, " ")
	s = labelValues.ReplaceAllString(s, " $1 ")
	s = labelValuesOf.ReplaceAllString(s, " ")
	s = variable.ReplaceAllString(s, " ")
	s = duration.ReplaceAllString(s, " ")
	s = number.ReplaceAllString(s, " ")
	var names []string
	for _, m := range ident.FindAllString(s, -1) {
		if strings.HasSuffix(m, "(") || slices.Contains(keywords, m) {
			continue // a function or aggregation, or a keyword
		}
		if !slices.Contains(names, m) {
			names = append(names, m)
		}
	}
	slices.Sort(names)
	return names
}
