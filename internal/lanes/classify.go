package lanes

import (
	"regexp"
	"strings"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
)

// Kind is a kind of task, as gw-auto sees it.
type Kind string

// The kinds gw-auto tells apart.
const (
	KindChat      Kind = "chat"
	KindCode      Kind = "code"
	KindReasoning Kind = "reasoning"
	KindLong      Kind = "long_context"
	KindVision    Kind = "vision"
	KindTools     Kind = "tools"
)

// laneOf is the lane each kind of task goes to.
var laneOf = map[Kind]string{
	KindChat:      catalog.LaneFast,
	KindCode:      catalog.LaneStandard,
	KindReasoning: catalog.LaneReasoning,
	KindLong:      catalog.LaneStandard,
	KindVision:    catalog.LaneStandard,
	KindTools:     catalog.LaneStandard,
}

// LongContextTokens is the prompt size from which a task is long context.
const LongContextTokens = 24_000

var (
	codeRe = regexp.MustCompile("```|\\b(func|def|class|import|return|const|let|var|public|static|SELECT|INSERT|#include)\\b|Traceback \\(most recent call last\\)|\\bpanic:|\\berror\\[E\\d+\\]|\\w+\\(\\)\\s*\\{|=>|;\\s*$")
	mathRe = regexp.MustCompile(`(?i)\b(prove|proof|theorem|lemma|derive|integral|derivative|equation|solve for|step by step|how many|probability|optimi[sz]e|puzzle|riddle|logic)\b|[∫∑√≤≥≠π]|\d+\s*[\^*/]\s*\d+|\b[xyz]\s*[=<>]`)
)

// Classify names the kind of task of a request: an image makes it vision,
// offered tools make it tool use, a long prompt long context; otherwise the
// last user message's text decides between code, reasoning and maths, and
// short chat.
func Classify(n Needs) Kind {
	switch {
	case n.Vision:
		return KindVision
	case n.Tools:
		return KindTools
	case n.PromptTokens >= LongContextTokens:
		return KindLong
	}
	text := n.Text
	if mathRe.MatchString(text) {
		return KindReasoning
	}
	for _, line := range strings.Split(text, "\n") {
		if codeRe.MatchString(line) {
			return KindCode
		}
	}
	return KindChat
}
