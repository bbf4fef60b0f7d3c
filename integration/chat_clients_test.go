package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
	"github.com/tidwall/gjson"
)

// The three chat clients of the tests, each an official SDK on its own
// endpoint: openai-go Chat Completions, openai-go Responses and
// anthropic-sdk-go Messages. run sends one request of a common shape (a
// system prompt, one user turn, optionally two tools) and reads the answer
// into a clientResult, in the client's own vocabulary.

type clientKind int

const (
	chatClient clientKind = iota
	responsesClient
	messagesClient
)

var clientKinds = []clientKind{chatClient, responsesClient, messagesClient}

func (k clientKind) String() string {
	return [...]string{"chat", "responses", "messages"}[k]
}

// sameFormat reports whether the gateway passes k's requests to b's fake
// untranslated (the OpenAI provider of Caddyfile.example serves responses).
func (k clientKind) sameFormat(b backend) bool {
	if b.anthropic {
		return k == messagesClient
	}
	return k == chatClient || k == responsesClient
}

// ledgerEndpoint is the endpoint name the ledger records for k; "" where
// the contract leaves it open.
func (k clientKind) ledgerEndpoint() string {
	switch k {
	case chatClient:
		return "chat"
	case messagesClient:
		return "messages"
	}
	return ""
}

// The request every client sends.
const (
	systemText = "You are terse."
	userText   = "What is the weather in Paris, and which flights go from CDG to JFK?"
	maxTokens  = 300
	// extraField is an unknown top-level field: a same-format upstream
	// receives it unchanged.
	extraField = "x_gw_probe"
)

func extraValue() any {
	return map[string]any{"nested": []any{1, "two", map[string]any{"three": true}}, "n": 1.5}
}

// The two tools offered when chatReq.tools is set.
var toolDefs = []struct {
	name, description string
	schema            map[string]any
}{
	{"get_weather", "Current weather and forecast for a place.", map[string]any{
		"type": "object",
		"properties": map[string]any{
			"location": map[string]any{"type": "object", "properties": map[string]any{
				"city": map[string]any{"type": "string"}, "country": map[string]any{"type": "string"}}},
			"units": map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
			"days":  map[string]any{"type": "integer"},
		},
		"required": []any{"location"},
	}},
	{"search_flights", "Search flights between two airports.", map[string]any{
		"type": "object",
		"properties": map[string]any{
			"route": map[string]any{"type": "object", "properties": map[string]any{
				"from": map[string]any{"type": "string"}, "to": map[string]any{"type": "string"}}},
			"passengers": map[string]any{"type": "object", "properties": map[string]any{
				"adults":   map[string]any{"type": "integer"},
				"children": map[string]any{"type": "array", "items": map[string]any{"type": "object"}}}},
			"flexible": map[string]any{"type": "boolean"},
			"note":     map[string]any{"type": "string"},
		},
		"required": []any{"route", "passengers"},
	}},
}

// chatReq is one request to run.
type chatReq struct {
	model  string
	stream bool
	// tools offers toolDefs.
	tools bool
	// extra adds extraField.
	extra bool
	// onFirstText, when streaming, is called with the first text delta
	// as soon as the SDK has read it, before the stream is read further.
	onFirstText func(delta string)
	// timeout bounds the whole request (default 20s).
	timeout time.Duration
}

// toolCallResult is one tool call as a client read it.
type toolCallResult struct {
	ID, Name, Arguments string
}

// clientUsage is usage as the client's format reports it; Total is -1
// where the format has no total.
type clientUsage struct {
	Input, Cached, Output, Total int64
}

// clientResult is what a client read.
type clientResult struct {
	// sent is the request body the SDK sent.
	sent   []byte
	header http.Header
	model  string
	text   string
	calls  []toolCallResult
	// finish is the finish reason (chat), stop reason (messages) or
	// status (responses).
	finish string
	// incomplete is responses' incomplete_details.reason.
	incomplete string
	usage      clientUsage
	// streamCost is cost_usd of a stream's final usage block ("" if absent).
	streamCost string
	// textDeltas counts streamed text deltas; argDeltas the argument
	// deltas per tool call id.
	textDeltas int
	argDeltas  map[string]int
	// streamedText and streamedArgs are the deltas joined (responses: to
	// compare with the final response).
	streamedText string
	streamedArgs map[string]string
	// errorEvent is the raw data of an "error" event the SDK passed on as
	// an ordinary event (responses), if any.
	errorEvent string
	// terminal is the type of the event that ended a responses stream.
	terminal string
	// id and object are the answer's id and its object (chat, responses)
	// or type (messages) field; for a chat stream, of every chunk (all
	// must agree).
	id, object string
	// protocol lists violations of the format's stream protocol seen
	// (chunk ids that change, responses sequence numbers out of order).
	protocol []string
}

func (e *chatEnv) openaiClient(key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(e.BaseURL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

func (e *chatEnv) anthropicClient(key string) anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL(e.BaseURL+"/alt"), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
}

// run sends r with client k and key. The error is the SDK's: of the
// request, or of the stream.
func (e *chatEnv) run(t testing.TB, k clientKind, key string, r chatReq) (clientResult, error) {
	t.Helper()
	d := r.timeout
	if d == 0 {
		d = 20 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	switch k {
	case chatClient:
		return runChat(ctx, e.openaiClient(key), r)
	case responsesClient:
		return runResponses(ctx, e.openaiClient(key), r)
	default:
		return runMessages(ctx, e.anthropicClient(key), r)
	}
}

func runChat(ctx context.Context, c openai.Client, r chatReq) (clientResult, error) {
	res := clientResult{argDeltas: map[string]int{}, streamedArgs: map[string]string{}}
	var hr *http.Response
	opts := []option.RequestOption{option.WithMiddleware(captureBody(&res.sent)), option.WithResponseInto(&hr)}
	if r.extra {
		opts = append(opts, option.WithJSONSet(extraField, extraValue()))
	}
	p := openai.ChatCompletionNewParams{
		Model:               r.model,
		Messages:            []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(systemText), openai.UserMessage(userText)},
		MaxCompletionTokens: openai.Int(maxTokens),
	}
	if r.tools {
		for _, td := range toolDefs {
			p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
				Name: td.name, Description: openai.String(td.description), Parameters: td.schema,
			}))
		}
	}
	if !r.stream {
		out, err := c.Chat.Completions.New(ctx, p, opts...)
		if hr != nil {
			res.header = hr.Header
		}
		if err != nil {
			return res, err
		}
		res.model, res.id, res.object = out.Model, out.ID, string(out.Object)
		if len(out.Choices) != 1 {
			return res, fmt.Errorf("%d choices, want 1: %s", len(out.Choices), out.RawJSON())
		}
		ch := out.Choices[0]
		res.text = ch.Message.Content
		for _, tc := range ch.Message.ToolCalls {
			res.calls = append(res.calls, toolCallResult{tc.ID, tc.Function.Name, tc.Function.Arguments})
		}
		res.finish = ch.FinishReason
		u := out.Usage
		res.usage = clientUsage{u.PromptTokens, u.PromptTokensDetails.CachedTokens, u.CompletionTokens, u.TotalTokens}
		return res, nil
	}
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	st := c.Chat.Completions.NewStreaming(ctx, p, opts...)
	defer st.Close()
	acc := openai.ChatCompletionAccumulator{}
	ids := map[int64]string{}
	for st.Next() {
		ch := st.Current()
		acc.AddChunk(ch)
		if res.id == "" {
			res.id, res.object = ch.ID, string(ch.Object)
		} else if ch.ID != res.id || string(ch.Object) != res.object {
			res.protocol = append(res.protocol, fmt.Sprintf("chunk %s %s after %s %s", ch.ID, ch.Object, res.id, res.object))
		}
		for _, choice := range ch.Choices {
			if d := choice.Delta.Content; d != "" {
				res.textDeltas++
				res.streamedText += d
				if res.textDeltas == 1 && r.onFirstText != nil {
					r.onFirstText(d)
				}
			}
			for _, tc := range choice.Delta.ToolCalls {
				if tc.ID != "" {
					ids[tc.Index] = tc.ID
				}
				if tc.Function.Arguments != "" {
					res.argDeltas[ids[tc.Index]]++
					res.streamedArgs[ids[tc.Index]] += tc.Function.Arguments
				}
			}
		}
		if c := gjson.Get(ch.RawJSON(), "usage.cost_usd"); c.Exists() {
			res.streamCost = c.String()
		}
	}
	if hr != nil {
		res.header = hr.Header
	}
	res.model = acc.Model
	if len(acc.Choices) > 0 {
		ch := acc.Choices[0]
		res.text = ch.Message.Content
		for _, tc := range ch.Message.ToolCalls {
			res.calls = append(res.calls, toolCallResult{tc.ID, tc.Function.Name, tc.Function.Arguments})
		}
		res.finish = ch.FinishReason
	}
	u := acc.Usage
	res.usage = clientUsage{u.PromptTokens, u.PromptTokensDetails.CachedTokens, u.CompletionTokens, u.TotalTokens}
	return res, st.Err()
}

// responsesBody is what the tests read of a response object.
type responsesBody struct {
	ID                string `json:"id"`
	Object            string `json:"object"`
	Model             string `json:"model"`
	Status            string `json:"status"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Output []struct {
		Type    string `json:"type"`
		ID      string `json:"id"`
		Status  string `json:"status"`
		Role    string `json:"role"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"output"`
	Usage struct {
		InputTokens        int64 `json:"input_tokens"`
		InputTokensDetails struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		OutputTokens int64 `json:"output_tokens"`
		TotalTokens  int64 `json:"total_tokens"`
	} `json:"usage"`
}

// fill reads a response object into res: the text of its message items,
// its function calls, status and usage. It refuses items of other kinds.
func (res *clientResult) fillResponses(raw string) error {
	var b responsesBody
	if err := json.Unmarshal([]byte(raw), &b); err != nil {
		return fmt.Errorf("response object %q: %v", raw, err)
	}
	res.model, res.id, res.object = b.Model, b.ID, b.Object
	res.finish = b.Status
	if b.IncompleteDetails != nil {
		res.incomplete = b.IncompleteDetails.Reason
	}
	for _, it := range b.Output {
		switch it.Type {
		case "message":
			if it.Role != "assistant" {
				return fmt.Errorf("message item with role %q", it.Role)
			}
			for _, c := range it.Content {
				if c.Type != "output_text" {
					return fmt.Errorf("message content of type %q", c.Type)
				}
				res.text += c.Text
			}
		case "function_call":
			if it.ID == "" || it.Status != "completed" {
				return fmt.Errorf("function_call item id %q status %q, want an id and completed", it.ID, it.Status)
			}
			res.calls = append(res.calls, toolCallResult{it.CallID, it.Name, it.Arguments})
		default:
			return fmt.Errorf("unexpected output item of type %q", it.Type)
		}
	}
	u := b.Usage
	res.usage = clientUsage{u.InputTokens, u.InputTokensDetails.CachedTokens, u.OutputTokens, u.TotalTokens}
	return nil
}

func runResponses(ctx context.Context, c openai.Client, r chatReq) (clientResult, error) {
	res := clientResult{argDeltas: map[string]int{}, streamedArgs: map[string]string{}}
	var hr *http.Response
	opts := []option.RequestOption{option.WithMiddleware(captureBody(&res.sent)), option.WithResponseInto(&hr)}
	if r.extra {
		opts = append(opts, option.WithJSONSet(extraField, extraValue()))
	}
	p := responses.ResponseNewParams{
		Model:           r.model,
		Instructions:    openai.String(systemText),
		Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String(userText)},
		MaxOutputTokens: openai.Int(maxTokens),
	}
	if r.tools {
		for _, td := range toolDefs {
			tool := responses.ToolParamOfFunction(td.name, td.schema, false)
			tool.OfFunction.Description = openai.String(td.description)
			p.Tools = append(p.Tools, tool)
		}
	}
	if !r.stream {
		out, err := c.Responses.New(ctx, p, opts...)
		if hr != nil {
			res.header = hr.Header
		}
		if err != nil {
			return res, err
		}
		if err := res.fillResponses(out.RawJSON()); err != nil {
			return res, err
		}
		if sdk := out.OutputText(); sdk != res.text {
			return res, fmt.Errorf("openai-go OutputText() %q, output items say %q", sdk, res.text)
		}
		return res, nil
	}
	st := c.Responses.NewStreaming(ctx, p, opts...)
	defer st.Close()
	callIDs := map[string]string{} // item id → call id
	var final string
	var seq int64
	for st.Next() {
		ev := st.Current()
		if ev.Type != "error" && ev.SequenceNumber != seq {
			res.protocol = append(res.protocol, fmt.Sprintf("%s has sequence_number %d, want %d", ev.Type, ev.SequenceNumber, seq))
		}
		seq++
		switch ev.Type {
		case "response.output_text.delta":
			res.textDeltas++
			res.streamedText += ev.Delta
			if res.textDeltas == 1 && r.onFirstText != nil {
				r.onFirstText(ev.Delta)
			}
		case "response.output_item.added":
			if ev.Item.Type == "function_call" {
				callIDs[ev.Item.ID] = ev.Item.CallID
			}
		case "response.function_call_arguments.delta":
			res.argDeltas[callIDs[ev.ItemID]]++
			res.streamedArgs[callIDs[ev.ItemID]] += ev.Delta
		case "response.completed", "response.incomplete", "response.failed":
			res.terminal = ev.Type
			final = ev.Response.RawJSON()
			if c := gjson.Get(ev.RawJSON(), "response.usage.cost_usd"); c.Exists() {
				res.streamCost = c.String()
			}
		case "error":
			res.errorEvent = ev.RawJSON()
		}
	}
	if hr != nil {
		res.header = hr.Header
	}
	if final != "" {
		if err := res.fillResponses(final); err != nil {
			return res, err
		}
	} else {
		res.text = res.streamedText
	}
	return res, st.Err()
}

func runMessages(ctx context.Context, c anthropic.Client, r chatReq) (clientResult, error) {
	res := clientResult{argDeltas: map[string]int{}, streamedArgs: map[string]string{}, usage: clientUsage{Total: -1}}
	var hr *http.Response
	opts := []aoption.RequestOption{aoption.WithMiddleware(captureBody(&res.sent)), aoption.WithResponseInto(&hr)}
	if r.extra {
		opts = append(opts, aoption.WithJSONSet(extraField, extraValue()))
	}
	p := anthropic.MessageNewParams{
		Model:     r.model,
		MaxTokens: maxTokens,
		System:    []anthropic.TextBlockParam{{Text: systemText}},
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(userText))},
	}
	if r.tools {
		for _, td := range toolDefs {
			p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
				Name: td.name, Description: anthropic.String(td.description),
				InputSchema: anthropic.ToolInputSchemaParam{Properties: td.schema["properties"], Required: toolDefsRequired(td.schema)},
			}})
		}
	}
	read := func(m *anthropic.Message) {
		res.model, res.id, res.object = m.Model, m.ID, string(m.Type)
		if m.Role != "assistant" {
			res.protocol = append(res.protocol, fmt.Sprintf("message role %q", m.Role))
		}
		for _, b := range m.Content {
			switch b.Type {
			case "text":
				res.text += b.Text
			case "tool_use":
				res.calls = append(res.calls, toolCallResult{b.ID, b.Name, string(b.Input)})
			}
		}
		res.finish = string(m.StopReason)
		res.usage = clientUsage{m.Usage.InputTokens, m.Usage.CacheReadInputTokens, m.Usage.OutputTokens, -1}
	}
	if !r.stream {
		out, err := c.Messages.New(ctx, p, opts...)
		if hr != nil {
			res.header = hr.Header
		}
		if err != nil {
			return res, err
		}
		read(out)
		return res, nil
	}
	st := c.Messages.NewStreaming(ctx, p, opts...)
	defer st.Close()
	acc := anthropic.Message{}
	var accErr error
	for st.Next() {
		ev := st.Current()
		if err := acc.Accumulate(ev); err != nil && accErr == nil {
			accErr = err
		}
		switch ev.Type {
		case "content_block_delta":
			switch ev.Delta.Type {
			case "text_delta":
				res.textDeltas++
				res.streamedText += ev.Delta.Text
				if res.textDeltas == 1 && r.onFirstText != nil {
					r.onFirstText(ev.Delta.Text)
				}
			case "input_json_delta":
				if int(ev.Index) < len(acc.Content) {
					id := acc.Content[ev.Index].ID
					res.argDeltas[id]++
					res.streamedArgs[id] += ev.Delta.PartialJSON
				}
			}
		case "message_delta":
			if c := gjson.Get(ev.RawJSON(), "usage.cost_usd"); c.Exists() {
				res.streamCost = c.String()
			}
		}
	}
	if hr != nil {
		res.header = hr.Header
	}
	read(&acc)
	if err := st.Err(); err != nil {
		return res, err
	}
	return res, accErr
}

// toolDefsRequired is a schema's "required" list as strings.
func toolDefsRequired(schema map[string]any) []string {
	var out []string
	for _, v := range schema["required"].([]any) {
		out = append(out, v.(string))
	}
	return out
}
