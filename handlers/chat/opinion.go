package chat

import (
	"encoding/json"
	"io"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/lanes"
	"github.com/caddy-gw/caddy-gw/internal/upstream"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// Second opinion: a gw-auto request with "second_opinion":
// true has its answer checked by a model of another lane.
const (
	// HeaderSecondOpinion carries the verdict: agree or disagree.
	HeaderSecondOpinion = "X-Gw-Second-Opinion"
	// SecondOpinionMaxBytes: a request larger than this is too large to
	// check (413).
	SecondOpinionMaxBytes = 256 << 10
	// DefaultSecondOpinionConcurrency is how many checks may run at once;
	// more answer 503 with Retry-After.
	DefaultSecondOpinionConcurrency = 4
	// SecondOpinionRetryAfter is the Retry-After of that 503, in seconds.
	SecondOpinionRetryAfter = 1
	// secondOpinionMaxTokens bounds the checker's answer.
	secondOpinionMaxTokens = 512
	// secondOpinionSuffix makes the check's ledger id from the request id.
	secondOpinionSuffix = "-so"
	// Verdicts.
	verdictAgree    = "agree"
	verdictDisagree = "disagree"
	// verdictUnavailable: no verdict could be had or read; no header then.
	verdictUnavailable = "unavailable"
)

const checkerPrompt = `You check another assistant's answer to a user's request. ` +
	`Reply with only a JSON object: {"verdict": "agree" or "disagree", "notes": "one or two sentences"}. ` +
	`Disagree when the answer is wrong, unsafe or misses the request.`

// checkerFormat is the format the checker's prompt is written in, and its
// answer read in.
const checkerFormat = ChatCompletions

// Opinions bounds the second opinions running at once.
type Opinions struct{ slots chan struct{} }

// NewOpinions allows n checks at once (n <= 0: the default).
func NewOpinions(n int) *Opinions {
	if n <= 0 {
		n = DefaultSecondOpinionConcurrency
	}
	return &Opinions{slots: make(chan struct{}, n)}
}

// admit checks a second-opinion request before anything is spent: a
// request that could not be checked, or that arrives while every slot is
// taken, is refused before its answer is paid for. The slot itself is
// taken only while the check runs (take).
func (o *Opinions) admit(req *request, requested string, bodyLen int) error {
	switch {
	case req.stream:
		return invalid("second_opinion", "second_opinion needs a non-streaming request")
	case requested != catalog.AliasAuto:
		return invalid("second_opinion", "second_opinion is available on %s only", catalog.AliasAuto)
	case bodyLen > SecondOpinionMaxBytes:
		return gwerr.New(gwerr.TooLarge, "the request is too large for a second opinion (more than %d bytes)", SecondOpinionMaxBytes).WithParam("second_opinion")
	}
	if o == nil {
		return gwerr.New(gwerr.Unavailable, "second opinions are not configured on this gateway")
	}
	if len(o.slots) == cap(o.slots) {
		return busy()
	}
	return nil
}

func busy() error {
	return &gwerr.Error{Kind: gwerr.Unavailable, Message: "too many second opinions are running; retry shortly", RetryAfter: SecondOpinionRetryAfter}
}

// take holds a slot while a check runs; release gives it back.
func (o *Opinions) take() (release func(), err error) {
	select {
	case o.slots <- struct{}{}:
		return func() { <-o.slots }, nil
	default:
		return nil, busy()
	}
}

// opinion is the body field second_opinion.
type opinion struct {
	Model   string `json:"model"`
	Verdict string `json:"verdict"`
	Notes   string `json:"notes"`
}

// checkerLane is the lane whose model checks an answer from lane.
func checkerLane(lane string) string {
	if lane == catalog.LaneReasoning {
		return catalog.LaneStandard
	}
	return catalog.LaneReasoning
}

// secondOpinion asks a model of another lane about answer (the client's
// body, in the client's format), bills the check, and returns the opinion
// and its cost. A check that cannot be made returns an error; nothing of
// it is billed then.
func (cl *call) secondOpinion(answer []byte) (*opinion, pricing.Money, error) {
	release, err := cl.h.Opinions.take()
	if err != nil {
		return nil, 0, err // every slot filled up since the request came in
	}
	defer release()
	rt, err := cl.h.Picker.Pick(catalog.LaneAlias(checkerLane(cl.route.Lane)), lanes.Needs{PromptTokens: cl.req.needs.PromptTokens})
	if err != nil {
		return nil, 0, err
	}
	m := rt.Candidates[0]
	p := cl.Gateway.Catalog.Providers[m.Provider]
	prompt, _ := json.Marshal(map[string]any{
		"model": m.ID, "max_tokens": secondOpinionMaxTokens, "temperature": 0,
		"messages": []map[string]string{
			{"role": "system", "content": checkerPrompt},
			{"role": "user", "content": "Request:\n" + cl.req.needs.Text + "\n\nAnswer:\n" + answerText(cl.format, answer)},
		},
	})
	rc := reachOf(p, m.ID)
	up := rc.format
	body, path, err := rc.requestFor(prompt, checkerFormat, p, m.ID, false)
	if err != nil {
		return nil, 0, err
	}
	est := pricing.Cost(cl.Account.PAYG, lanes.EstimateLines(m, lanes.Needs{PromptTokens: len(body) / charsPerToken, PromptBound: len(body), MaxTokens: secondOpinionMaxTokens})...)
	if err := cl.Reserve(est); err != nil {
		return nil, 0, err
	}
	resp, err := cl.h.Upstream.Do(cl.R.Context(), upstream.Request{Provider: p, Path: path, Body: body})
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponse))
	if err == nil {
		b, err = rc.answerOf(b, m.ID)
	}
	if err != nil {
		upstream.Broke(resp.Body)
		return nil, 0, gwerr.New(gwerr.Upstream, "the second opinion broke off")
	}
	reported, _ := readAnswer(up, b)
	if !reported.Valid() {
		upstream.Broke(resp.Body)
		return nil, 0, gwerr.New(gwerr.Upstream, "the second opinion reported usage that cannot be right")
	}
	u := cl.billableAs(cl.RequestID+secondOpinionSuffix, m, reported, func() int64 { return int64(promptTokens(checkerFormat, prompt)) },
		func() int64 { return outputTokens(up, b) })
	if b, err = responseFor(b, up, checkerFormat, m.ID); err != nil {
		upstream.Broke(resp.Body)
		return nil, 0, gwerr.New(gwerr.Upstream, "the second opinion could not be read")
	}
	cost, err := cl.Charge(cl.bill(m, u, pricing.Cost(cl.Account.PAYG, usageLines(m, u)...), cl.RequestID+secondOpinionSuffix))
	if err != nil {
		return nil, 0, err
	}
	return readVerdict(m.ID, gjson.GetBytes(b, "choices.0.message.content").String()), cost, nil
}

// readVerdict reads the checker's reply: the JSON object it was asked for,
// or failing that the words it used.
func readVerdict(model, reply string) *opinion {
	op := &opinion{Model: model, Verdict: verdictUnavailable, Notes: strings.TrimSpace(reply)}
	if i, j := strings.Index(reply, "{"), strings.LastIndex(reply, "}"); i >= 0 && j > i {
		obj := gjson.Parse(reply[i : j+1])
		if v := obj.Get("verdict").String(); v == verdictAgree || v == verdictDisagree {
			op.Verdict, op.Notes = v, obj.Get("notes").String()
			return op
		}
	}
	switch lower := strings.ToLower(reply); {
	case strings.Contains(lower, verdictDisagree):
		op.Verdict = verdictDisagree
	case strings.Contains(lower, verdictAgree):
		op.Verdict = verdictAgree
	}
	return op
}
