package chat

import (
	"strings"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/jsonbody"
	"github.com/caddy-gw/caddy-gw/internal/tokens"
	"github.com/caddy-gw/caddy-gw/internal/translate"
)

// partKind is what a piece of an answer is.
type partKind int

const (
	// partText is output text.
	partText partKind = iota
	// partReasoning is reasoning text (thinking, a reasoning summary).
	partReasoning
	// partToolCall is a tool call: its name and its arguments.
	partToolCall
	// partRefusal is a refusal's text.
	partRefusal
)

// partFunc is called with each piece of an answer: its kind, a tool
// call's name, and its text (a tool call's arguments).
type partFunc func(kind partKind, name, text string)

// eachPart calls fn with every piece of an answer of format f, given its
// list (its answerList), in order, every choice included: the one reading
// of an answer's content that emptiness, the gateway's own count and the
// second opinion share.
func eachPart(f Format, list gjson.Result, fn partFunc) {
	each := f.spec().eachPart
	list.ForEach(func(_, item gjson.Result) bool {
		each(item, fn)
		return true
	})
}

// substantive reports whether an answer's list holds something a client
// can use: text, a tool call or a refusal (reasoning alone is not an
// answer).
func substantive(f Format, list gjson.Result) bool {
	found := false
	eachPart(f, list, func(kind partKind, _, text string) {
		found = found || kind == partToolCall || kind != partReasoning && text != ""
	})
	return found
}

// readAnswer reads a whole answer in format f in one pass over its top
// level: its usage, and whether it is empty. An empty answer is the same thing in
// every format: nothing in it (no text, tool call or refusal), and not
// ended by its output limit or a refusal.
func readAnswer(f Format, body []byte) (u translate.Usage, empty bool) {
	spec := f.spec()
	listKey, reasonKey := spec.answerList, spec.stopReasonKey
	// Of a repeated key the first counts, as a path lookup reads it.
	var usage, list, reason gjson.Result
	jsonbody.Parse(body).ForEach(func(k, v gjson.Result) bool {
		switch {
		case k.Str == "usage" && !usage.Exists():
			usage = v
		case k.Str == listKey && !list.Exists():
			list = v
		case k.Str == reasonKey && !reason.Exists():
			reason = v
		}
		return !usage.Exists() || !list.Exists() || reasonKey != "" && !reason.Exists()
	})
	if !usage.Exists() && spec.wrappedUsage != "" {
		usage = gjson.GetBytes(body, spec.wrappedUsage)
	}
	u = spec.usageOf(usage)
	if spec.itemStopReason != "" {
		list.ForEach(func(_, c gjson.Result) bool {
			reason = c.Get(spec.itemStopReason)
			return false
		})
	}
	return u, !spec.cutShort[reason.String()] && !substantive(f, list)
}

// answerText is the text of an answer of format f: its text and
// refusals, and its tool calls as "[tool call name arguments]".
func answerText(f Format, body []byte) string {
	var b strings.Builder
	eachPart(f, gjson.GetBytes(body, f.spec().answerList), func(kind partKind, name, text string) {
		switch kind {
		case partReasoning:
			return
		case partToolCall:
			text = "[tool call " + name + " " + text + "]"
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(text)
	})
	return b.String()
}

// outputTokens is the gateway's own count of an answer's output: every
// piece's text, reasoning and tool calls (names and arguments), with the
// o200k tokenizer.
func outputTokens(f Format, body []byte) int64 {
	var b []byte
	eachPart(f, gjson.GetBytes(body, f.spec().answerList), func(_ partKind, name, text string) {
		b = append(append(b, name...), text...)
	})
	return int64(tokens.Count(string(b)))
}

// billable is the usage an answer is billed for: what its provider
// reported (valid usage), with the gateway's own count (prompt, and output
// as delivered) in place of what is missing. A provider that reports no
// input, or no output for an answer with something in it, reported no
// usable usage: such an answer is never billed at zero. counted reports
// that the gateway's count was used (it is logged).
func billable(u translate.Usage, prompt, output func() int64) (_ translate.Usage, counted bool) {
	if u.Input == 0 {
		u.Input, counted = prompt(), true
	}
	if u.Output == 0 {
		if n := output(); n > 0 {
			u.Output, counted = n, true
		}
	}
	return u, counted
}
