package fake_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"
	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/integration/fake"
	"github.com/caddy-gw/caddy-gw/internal/awssig"
	"github.com/caddy-gw/caddy-gw/internal/awsstream"
	"github.com/caddy-gw/caddy-gw/internal/sse"
	"github.com/caddy-gw/caddy-gw/internal/translate"
)

const bedrockModel = "anthropic.claude-3-5-haiku-20241022-v1:0"

// bedrockClient is the official client pointed at u, signing with the
// fake's key and secret (secret, when set, replaces the secret) and a
// session token, and never retrying.
func bedrockClient(u *fake.Upstream, region, secret string) *bedrockruntime.Client {
	if secret == "" {
		secret = fake.BedrockSecretAccessKey
	}
	return bedrockruntime.New(bedrockruntime.Options{
		Region:       region,
		BaseEndpoint: aws.String(u.URL),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: fake.BedrockAccessKeyID, SecretAccessKey: secret, SessionToken: "session-token-1"}, nil
		}),
		Retryer: aws.NopRetryer{},
	})
}

func converseInput() *bedrockruntime.ConverseInput {
	return &bedrockruntime.ConverseInput{
		ModelId: aws.String(bedrockModel),
		System:  []types.SystemContentBlock{&types.SystemContentBlockMemberText{Value: "be brief"}},
		Messages: []types.Message{{Role: types.ConversationRoleUser, Content: []types.ContentBlock{
			&types.ContentBlockMemberText{Value: "What is the weather in Paris?"}}}},
		InferenceConfig: &types.InferenceConfiguration{MaxTokens: aws.Int32(256)},
		ToolConfig: &types.ToolConfiguration{Tools: []types.Tool{&types.ToolMemberToolSpec{Value: types.ToolSpecification{
			Name: aws.String("get_weather"), InputSchema: &types.ToolInputSchemaMemberJson{Value: document.NewLazyDocument(map[string]any{"type": "object"})},
		}}}},
	}
}

func TestBedrockConverse(t *testing.T) {
	up := fake.NewBedrock()
	defer up.Close()
	up.Push(fake.Script{Text: "Sunny.", ToolCalls: twoTools, Usage: fake.Usage{Input: 25, Output: 87, CachedInput: 100, CacheWrite: 10}})
	out, err := bedrockClient(up, fake.BedrockRegion, "").Converse(t.Context(), converseInput())
	if err != nil {
		t.Fatal(err)
	}
	msg := out.Output.(*types.ConverseOutputMemberMessage).Value
	if len(msg.Content) != 3 || msg.Role != types.ConversationRoleAssistant {
		t.Fatalf("message %+v", msg)
	}
	if text := msg.Content[0].(*types.ContentBlockMemberText).Value; text != "Sunny." {
		t.Fatalf("text %q", text)
	}
	for i, want := range twoTools {
		use := msg.Content[i+1].(*types.ContentBlockMemberToolUse).Value
		var input map[string]any
		if err := use.Input.UnmarshalSmithyDocument(&input); err != nil {
			t.Fatal(err)
		}
		if *use.ToolUseId != want.ID || *use.Name != want.Name || mustMarshal(t, input) != mustMarshal(t, mustUnmarshal(t, want.Arguments)) {
			t.Fatalf("tool use %d: %s %s %v", i, *use.ToolUseId, *use.Name, input)
		}
	}
	u := out.Usage
	if out.StopReason != types.StopReasonToolUse || *u.InputTokens != 25 || *u.OutputTokens != 87 || *u.CacheReadInputTokens != 100 ||
		*u.CacheWriteInputTokens != 10 || *u.TotalTokens != 222 {
		t.Fatalf("stop %s, usage %+v", out.StopReason, u)
	}

	reqs := up.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.Path != "/model/"+bedrockModel+"/converse" || r.Header.Get("X-Amz-Security-Token") != "session-token-1" ||
		!strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential="+fake.BedrockAccessKeyID+"/") ||
		!strings.Contains(r.Header.Get("Authorization"), "/us-east-1/bedrock/aws4_request, SignedHeaders=") {
		t.Fatalf("request %s %v", r.Path, r.Header)
	}
	if got := gjson.GetBytes(r.Body, "inferenceConfig.maxTokens").Int(); got != 256 {
		t.Fatalf("body %s", r.Body)
	}
}

// TestBedrockConverseStream reads the fake's event stream with the
// official client: every event, in order, with the usage at the end.
func TestBedrockConverseStream(t *testing.T) {
	up := fake.NewBedrock()
	defer up.Close()
	up.Push(fake.Script{Text: "Checking both cities.", ToolCalls: twoTools, Chunks: 4, Usage: fake.Usage{Input: 25, Output: 87, CachedInput: 100}})
	in := converseInput()
	out, err := bedrockClient(up, fake.BedrockRegion, "").ConverseStream(t.Context(), &bedrockruntime.ConverseStreamInput{
		ModelId: in.ModelId, System: in.System, Messages: in.Messages, InferenceConfig: in.InferenceConfig, ToolConfig: in.ToolConfig,
	})
	if err != nil {
		t.Fatal(err)
	}
	stream := out.GetStream()
	defer stream.Close()
	var text string
	args := map[int32]string{}
	var names []string
	var stop types.StopReason
	var usage *types.TokenUsage
	var kinds []string
	for ev := range stream.Events() {
		switch v := ev.(type) {
		case *types.ConverseStreamOutputMemberMessageStart:
			kinds = append(kinds, "start:"+string(v.Value.Role))
		case *types.ConverseStreamOutputMemberContentBlockStart:
			use := v.Value.Start.(*types.ContentBlockStartMemberToolUse).Value
			names = append(names, *use.ToolUseId+" "+*use.Name)
		case *types.ConverseStreamOutputMemberContentBlockDelta:
			switch d := v.Value.Delta.(type) {
			case *types.ContentBlockDeltaMemberText:
				text += d.Value
			case *types.ContentBlockDeltaMemberToolUse:
				args[*v.Value.ContentBlockIndex] += *d.Value.Input
			}
		case *types.ConverseStreamOutputMemberContentBlockStop:
			kinds = append(kinds, "stop")
		case *types.ConverseStreamOutputMemberMessageStop:
			stop = v.Value.StopReason
		case *types.ConverseStreamOutputMemberMetadata:
			usage = v.Value.Usage
		default:
			t.Fatalf("event %T", ev)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text != "Checking both cities." || stop != types.StopReasonToolUse || strings.Join(kinds, ",") != "start:assistant,stop,stop,stop" {
		t.Fatalf("text %q, stop %s, kinds %v", text, stop, kinds)
	}
	if strings.Join(names, ",") != twoTools[0].ID+" "+twoTools[0].Name+","+twoTools[1].ID+" "+twoTools[1].Name ||
		args[1] != twoTools[0].Arguments || args[2] != twoTools[1].Arguments {
		t.Fatalf("tools %v %q", names, args)
	}
	if usage == nil || *usage.InputTokens != 25 || *usage.OutputTokens != 87 || *usage.CacheReadInputTokens != 100 || usage.CacheWriteInputTokens != nil {
		t.Fatalf("usage %+v", usage)
	}
	if p := up.Requests()[0].Path; p != "/model/"+bedrockModel+"/converse-stream" {
		t.Fatalf("path %s", p)
	}
}

// TestBedrockErrors reads the fake's error answers with the official
// client, which decodes them into Bedrock's modeled exceptions.
func TestBedrockErrors(t *testing.T) {
	up := fake.NewBedrock()
	defer up.Close()
	client := bedrockClient(up, fake.BedrockRegion, "")

	up.Push(fake.Script{Status: 429})
	_, err := client.Converse(t.Context(), converseInput())
	var throttled *types.ThrottlingException
	if !errors.As(err, &throttled) || throttled.ErrorMessage() != "Too many requests, please wait before trying again." {
		t.Fatalf("429: %v", err)
	}
	up.Push(fake.Script{Status: 400, ErrorType: "ServiceQuotaExceededException", ErrorMessage: "Too many tokens per day."})
	_, err = client.Converse(t.Context(), converseInput())
	var quota *types.ServiceQuotaExceededException
	if !errors.As(err, &quota) || quota.ErrorMessage() != "Too many tokens per day." {
		t.Fatalf("quota: %v", err)
	}

	for _, tc := range []struct {
		script fake.Script
		check  func(error) bool
	}{
		{fake.Script{Text: "Hello there", MidStreamError: true}, func(err error) bool {
			var e *types.ModelStreamErrorException
			return errors.As(err, &e) && e.ErrorMessage() == "The model stream was interrupted."
		}},
		{fake.Script{Text: "Hello there", MidStreamError: true, ErrorType: "ThrottlingException", ErrorMessage: "slow down"}, func(err error) bool {
			var e *types.ThrottlingException
			return errors.As(err, &e) && e.ErrorMessage() == "slow down"
		}},
	} {
		up.Push(tc.script)
		out, err := client.ConverseStream(t.Context(), &bedrockruntime.ConverseStreamInput{ModelId: aws.String(bedrockModel), Messages: converseInput().Messages})
		if err != nil {
			t.Fatal(err)
		}
		stream := out.GetStream()
		var text string
		for ev := range stream.Events() {
			if d, ok := ev.(*types.ConverseStreamOutputMemberContentBlockDelta); ok {
				text += d.Value.Delta.(*types.ContentBlockDeltaMemberText).Value
			}
		}
		if err := stream.Err(); !tc.check(err) || text != "Hell" { // the first of three pieces
			t.Fatalf("%+v: text %q, err %v", tc.script, text, err)
		}
		stream.Close()
	}
	if up.Pending() != 0 {
		t.Fatalf("%d scripts left", up.Pending())
	}
}

// TestBedrockRefusesUnsigned answers 403 in Bedrock's shape to requests
// that are not signed as it wants, and takes no script for them.
func TestBedrockRefusesUnsigned(t *testing.T) {
	up := fake.NewBedrock()
	defer up.Close()
	up.Push(fake.Script{Text: "kept"})

	resp, body := post(t, up.URL+"/model/m/converse", nil, `{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`)
	if resp.StatusCode != 403 || resp.Header.Get("X-Amzn-Errortype") != "MissingAuthenticationTokenException:http://internal.amazon.com/coral/com.amazon.bedrock/" ||
		string(body) != `{"message":"Missing Authentication Token"}` {
		t.Fatalf("unsigned: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	for _, tc := range []struct {
		region, secret, code, message string
	}{
		{fake.BedrockRegion, "another secret", "InvalidSignatureException", "The request signature we calculated does not match the signature you provided."},
		{"eu-west-3", "", "InvalidSignatureException", "Credential should be scoped to a valid region."},
	} {
		_, err := bedrockClient(up, tc.region, tc.secret).Converse(t.Context(), converseInput())
		var api smithy.APIError
		var re interface{ HTTPStatusCode() int }
		if !errors.As(err, &api) || api.ErrorCode() != tc.code || !strings.HasPrefix(api.ErrorMessage(), tc.message) || !errors.As(err, &re) || re.HTTPStatusCode() != 403 {
			t.Fatalf("%s/%s: %v", tc.region, tc.secret, err)
		}
	}
	if up.Pending() != 1 || len(up.Requests()) != 3 {
		t.Fatalf("pending %d, requests %d", up.Pending(), len(up.Requests()))
	}
}

// TestBedrockChecksConversation refuses what Converse refuses in a
// translation: a conversation that does not start with the user or does
// not alternate, blank text, tool blocks without tools.
func TestBedrockChecksConversation(t *testing.T) {
	up := fake.NewBedrock()
	defer up.Close()
	for body, want := range map[string]string{
		`{"messages":[{"role":"assistant","content":[{"text":"hi"}]}]}`:                                    "A conversation must start with a user message. Try again with a conversation that starts with a user message.",
		`{"messages":[{"role":"user","content":[{"text":"a"}]},{"role":"user","content":[{"text":"b"}]}]}`: "A conversation must alternate between user and assistant roles. Make sure the conversation alternates between user and assistant roles and try again.",
		`{"messages":[{"role":"user","content":[{"text":" "}]}]}`:                                          "The text field in the ContentBlock object at messages.0.content.0 is blank. Add text to the text field, and try again.",
		`{"messages":[{"role":"user","content":[]}]}`:                                                      "The content field in the Message object at messages.0 is empty. Add a ContentBlock object to the content field and try again.",
		`{"messages":[{"role":"user","content":[{"toolResult":{"toolUseId":"t","content":[]}}]}]}`:         "The toolConfig field must be defined when using toolUse and toolResult content blocks.",
		`{"messages":[{"role":"system","content":[{"text":"a"}]}]}`:                                        "1 validation error detected: Value 'system' at 'messages.1.member.role' failed to satisfy constraint: Member must satisfy enum value set: [user, assistant]",
		`{"messages":[{"role":"user","content":[{"text":"a"}]}],"inferenceConfig":{"maxTokens":0}}`:        "1 validation error detected: Value '0' at 'inferenceConfig.maxTokens' failed to satisfy constraint: Member must have value greater than or equal to 1",
	} {
		resp, got := signedPost(t, up.URL+translate.ConversePath("m", false), body)
		if resp.StatusCode != 400 || !strings.HasPrefix(resp.Header.Get("X-Amzn-Errortype"), "ValidationException:") || gjson.GetBytes(got, "message").String() != want {
			t.Errorf("%s: %d %s", body, resp.StatusCode, got)
		}
	}
	resp, got := signedPost(t, up.URL+"/model/m/invoke", `{}`)
	if resp.StatusCode != 404 || !strings.HasPrefix(resp.Header.Get("X-Amzn-Errortype"), "UnknownOperationException:") {
		t.Fatalf("unknown operation: %d %s", resp.StatusCode, got)
	}
}

// signedPost posts body to url signed by the gateway's own signer with
// the fake's key.
func signedPost(t *testing.T, url, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	s := awssig.Signer{Key: awssig.Key{AccessKeyID: fake.BedrockAccessKeyID, SecretAccessKey: fake.BedrockSecretAccessKey}, Region: fake.BedrockRegion}
	if err := s.Sign(t.Context(), req, []byte(body), time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// TestBedrockThroughTheGatewaysPieces carries a chat request the way the
// gateway will: translated (translate.ChatToConverseRequest), signed
// (awssig), its event stream read (awsstream) and translated back to chat
// chunks (translate.NewConverseToChat).
func TestBedrockThroughTheGatewaysPieces(t *testing.T) {
	up := fake.NewBedrock()
	defer up.Close()
	up.Push(fake.Script{Text: "Checking.", ToolCalls: twoTools[:1], Usage: fake.Usage{Input: 30, Output: 12, CachedInput: 4, CacheWrite: 6}})
	body, err := translate.ChatToConverseRequest([]byte(`{"model":"gw","stream":true,"max_tokens":50,
		"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"weather?"}],
		"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]}`), bedrockModel)
	if err != nil {
		t.Fatal(err)
	}
	resp, raw := signedPost(t, up.URL+translate.ConversePath(bedrockModel, true), string(body))
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != awsstream.ContentType {
		t.Fatalf("%d %s", resp.StatusCode, raw)
	}
	tr := translate.NewConverseToChat("gw")
	rd := awsstream.NewReader(strings.NewReader(string(raw)))
	var out []sse.Event
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		evs, err := tr.Event(ev)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, evs...)
	}
	if !tr.Done() || !sse.IsDone(out[len(out)-1]) {
		t.Fatalf("not done: %q", out)
	}
	var text, args string
	for _, ev := range out[:len(out)-1] {
		text += gjson.GetBytes(ev.Data, "choices.0.delta.content").String()
		args += gjson.GetBytes(ev.Data, "choices.0.delta.tool_calls.0.function.arguments").String()
	}
	if text != "Checking." || args != twoTools[0].Arguments ||
		tr.Usage() != (translate.Usage{Input: 40, Output: 12, CachedInput: 4, CacheWrite: 6}) {
		t.Fatalf("text %q, args %q, usage %+v", text, args, tr.Usage())
	}
	if got := gjson.GetBytes(out[len(out)-3].Data, "choices.0.finish_reason").String(); got != "tool_calls" {
		t.Fatalf("finish %q", got)
	}
}

func mustUnmarshal(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestBedrockScriptOptions covers a Gate (the stream waits after its
// first piece), NoUsage, CapOutput and Finish.
func TestBedrockScriptOptions(t *testing.T) {
	up := fake.NewBedrock()
	defer up.Close()
	client := bedrockClient(up, fake.BedrockRegion, "")

	gate := make(chan struct{})
	up.Push(fake.Script{Text: "abc", Gate: gate, NoUsage: true})
	out, err := client.ConverseStream(t.Context(), &bedrockruntime.ConverseStreamInput{ModelId: aws.String(bedrockModel), Messages: converseInput().Messages})
	if err != nil {
		t.Fatal(err)
	}
	stream := out.GetStream()
	defer stream.Close()
	var text string
	var metadata *types.ConverseStreamMetadataEvent
	for ev := range stream.Events() {
		switch v := ev.(type) {
		case *types.ConverseStreamOutputMemberContentBlockDelta:
			if text += v.Value.Delta.(*types.ContentBlockDeltaMemberText).Value; text == "a" {
				close(gate) // lets the stream go on past its first piece
			}
		case *types.ConverseStreamOutputMemberMetadata:
			metadata = &v.Value
		}
	}
	if err := stream.Err(); err != nil || text != "abc" || metadata == nil || metadata.Usage != nil {
		t.Fatalf("text %q, metadata %+v, %v", text, metadata, err)
	}

	up.Push(fake.Script{Text: "long", Usage: fake.Usage{Input: 5, Output: 900}, CapOutput: true, Finish: "max_tokens"})
	answer, err := client.Converse(t.Context(), converseInput())
	if err != nil {
		t.Fatal(err)
	}
	if answer.StopReason != types.StopReasonMaxTokens || *answer.Usage.OutputTokens != 256 || *answer.Usage.TotalTokens != 261 {
		t.Fatalf("stop %s, usage %+v", answer.StopReason, answer.Usage)
	}
}
