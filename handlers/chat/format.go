package chat

import (
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/caddy-gw/caddy-gw/internal/answercache"
	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/sse"
	"github.com/caddy-gw/caddy-gw/internal/translate"
)

// Format is a chat wire format, of a client or of an upstream: a row of
// formats. Its number also keys the answer cache, so a format keeps it.
type Format int

const (
	// ChatCompletions is POST /v1/chat/completions.
	ChatCompletions Format = iota
	// Responses is POST /v1/responses.
	Responses
	// Messages is POST {alt}/v1/messages.
	Messages
)

// formats are the formats' specs, by Format: every difference between the
// formats is a field of these rows, as the error families' differences are
// rows of gwerr's tables.
var formats = [...]*formatSpec{
	ChatCompletions: &chatCompletionsSpec,
	Responses:       &responsesSpec,
	Messages:        &messagesSpec,
}

// spec is f's row of formats.
func (f Format) spec() *formatSpec { return formats[f] }

// cacheSpace keeps the format's answers apart in the answer cache: its
// own number, below answercache.Embeddings.
func (f Format) cacheSpace() answercache.Space { return answercache.Space(f) }

// formatSpec is everything the handler knows of one wire format: how it
// reads a client's request in it, sends one upstream, reads an answer and
// writes the gateway's own events. The handler reads these fields and
// never asks which format it holds; a new format is one spec (a file of
// its own) and its rows in formats, reaches and translators.
type formatSpec struct {
	// path is the format's endpoint at a provider, after its base URL.
	path string
	// servedBy reports a provider of another format that serves this one
	// as well: a client of this format is sent to it untranslated (nil:
	// none does).
	servedBy func(p *catalog.Provider) bool
	// betas: the call's betas are forwarded to the format's providers (and
	// priced); other providers get none.
	betas bool
	// counts: the format's providers count a prompt for free
	// (upstream.PathCountTokens); others' prompts are counted locally.
	counts bool
	// outputLimit are the members that take the most output tokens; the
	// first is the one the gateway sets.
	outputLimit []string
	// streamUsage: a stream reports its usage only when asked to
	// (stream_options.include_usage), which the gateway always does.
	streamUsage bool
	// unstored: a provider keeps an answer unless sent store false, which
	// the gateway always sends.
	unstored bool

	// readPrompt checks and reads what is the format's own in a request
	// (its prompt and output limits) into req, the body being size bytes.
	// It takes the members by value: a pointer given to a function value
	// would move them to the heap on every call.
	readPrompt func(req *request, top members, size int) error
	// promptTokens counts a request's prompt locally.
	promptTokens func(root gjson.Result) int

	// pricedTools are the tool types the gateway can price: their cost is
	// the tokens the provider reports. Hosted tools (web search, file
	// search, code interpreter, image generation, MCP connectors, ...) are
	// billed by the provider per call, which the gateway cannot price, so
	// they are refused.
	pricedTools map[string]bool
	// clientToolPrefixes begin the types of further tools the client
	// executes (priced as tokens), as opposed to the provider's server
	// tools.
	clientToolPrefixes []string
	// serviceTiers are the service tiers priced at list price; others
	// (priority, scale) cost more than the catalogue says and are refused.
	serviceTiers map[string]bool
	// unpricedFields are top-level fields that buy something the gateway
	// does not price (or would run unbilled in the background).
	unpricedFields []string
	// pricedValues are top-level fields whose other values change the
	// price in a way the gateway does not bill: only the values listed
	// pass (absent or null passes too).
	pricedValues map[string][]string
	// billing is the format's table of its requests' top-level members:
	// how the provider bills each. The worst case (bytes), the tightened
	// count (tokens), the local count and what goes to a provider's count
	// endpoint all read it. A member it does not list is counted as
	// prompt.
	billing memberTable

	// answerList is the member of a whole answer that holds its pieces.
	answerList string
	// stopReasonKey is the member of a whole answer that says why it
	// ended ("" when its pieces say it).
	stopReasonKey string
	// itemStopReason is the member of the first piece that says why the
	// answer ended, when its pieces say it ("": the answer says it).
	itemStopReason string
	// cutShort are the stop reasons of an answer its output limit ended (a
	// reasoning model can spend the whole limit thinking: that answer is
	// billed, not retried) or that a refusal ended.
	cutShort map[string]bool
	// wrappedUsage is where an answer's usage is found when it has none at
	// its top ("": nowhere else).
	wrappedUsage string
	// usageOf reads a usage object of the format.
	usageOf func(gjson.Result) translate.Usage
	// eachPart calls fn with each piece of one item of an answer's list.
	eachPart func(item gjson.Result, fn partFunc)

	// endsWithDone: a stream ends with data: [DONE], which the gateway
	// sends when the upstream did not, and after an error event of its own.
	endsWithDone bool
	// sequenced: a stream's events are numbered (sequence_number), and an
	// event the gateway adds continues the numbering.
	sequenced bool
	// appendDelta appends the generated text a stream event carries (text,
	// reasoning, refusal and tool-call deltas) to b; data is the event's
	// data, read in place.
	appendDelta func(b []byte, data string, ev sse.Event) []byte
	// isError reports a stream's error event.
	isError func(ev sse.Event) bool
	// errorEvent is the gateway's own stream error, numbered seq where
	// the format numbers its events.
	errorEvent func(msg string, seq int64) sse.Event
	// finalUsage finds the stream event that carries the final usage, and
	// the JSON path of its usage object.
	finalUsage func(ev sse.Event) (path string, ok bool)
	// usageLacking finds the stream's final event when it carries no usage,
	// and where a usage object goes in it ("": a usage chunk of its own
	// goes before it).
	usageLacking func(ev sse.Event) (at string, ok bool)
	// usageBlock is a usage object for u.
	usageBlock func(u translate.Usage) []byte
	// watch reads the usage of a stream relayed as it is into u, and
	// reports its terminal event.
	watch func(ev sse.Event, u *translate.Usage) (done bool)
}

// tokenCount is one token count of a usage object: its JSON path and value.
type tokenCount struct {
	path string
	n    int64
}

// usageObject is a JSON object of token counts, written in order.
func usageObject(counts ...tokenCount) []byte {
	b := []byte(`{}`)
	for _, c := range counts {
		b, _ = sjson.SetBytes(b, c.path, c.n)
	}
	return b
}

// billedAs is how a provider bills a top-level member of a request.
type billedAs uint8

const (
	// asPrompt: read as prompt and billed as its tokens. Counted wherever
	// the prompt is: its bytes in the worst case, its tokens in the
	// tightened count and the local count, and it is sent to a provider's
	// count endpoint that takes it.
	asPrompt billedAs = iota
	// asOutput: counted as prompt, and its tokens may be billed as output
	// beyond the output limit (a predicted output the answer does not
	// use is billed at output rates): reserved as output too.
	asOutput
	// unbilled: no tokens are billed for the member itself (its rule says
	// why).
	unbilled
)

// memberRule is a format's rule for one top-level member of its requests.
type memberRule struct {
	billed billedAs
	// why says why an unbilled member is not billed.
	why string
	// countable: the format's count endpoint takes the member, and it is
	// sent there with the prompt (a member the endpoint does not take is
	// refused by it).
	countable bool
}

// memberTable is a format's rules by member name.
type memberTable map[string]memberRule

// rule is the rule of the member named k: asPrompt when the table does
// not list it.
func (t memberTable) rule(k string) memberRule { return t[k] }

// counted reports a member whose tokens are billed (as prompt, or as
// prompt and output).
func (t memberTable) counted(k string) bool { return t[k].billed != unbilled }

// prompt is the rule of a member billed as prompt; countable when the
// format's count endpoint takes it.
func prompt(countable bool) memberRule { return memberRule{billed: asPrompt, countable: countable} }

// notBilled is the rule of a member billed no tokens, for the reason why.
func notBilled(why string) memberRule { return memberRule{billed: unbilled, why: why} }

// Why members are not billed as tokens, shared by the formats' tables.
const (
	whyModel       = "names the model"
	whySampling    = "a sampling or stopping setting"
	whyOutputLimit = "the output limit: reserved as output"
	whyAnswers     = "how many answers: each reserved as output"
	whyLogprobs    = "log-probabilities of the output, part of the answer"
	whyDelivery    = "how the answer is delivered"
	whyLabel       = "a label kept with the call (user, metadata, identifiers)"
	whyCache       = "steers the provider's prompt cache; the tokens it reads or writes are the prompt's, reserved at the dearer of the input and cache-write prices"
	whyStore       = "keeps the answer at the provider, which bills no tokens for it"
	whyTier        = "a service tier, refused unless priced at list price"
	whyToolUse     = "how tools are called; their definitions are counted"
	whyEffort      = "how much the model thinks or writes: output, bounded by the output limit"
	whyModeration  = "runs the provider's moderation, which bills no tokens"
	whyRefused     = "refused: it buys what the gateway does not price"
	whyBetaRefused = "needs a beta the gateway refuses (it buys what the gateway does not price)"
	whyOwn         = "the gateway's own member, never sent to the provider"
	whyTruncation  = "drops input to fit the context: bills less, never more"
)
