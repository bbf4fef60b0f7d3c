package fake

import (
	"encoding/json"
	"testing"

	"github.com/caddy-gw/caddy-gw/internal/translate"
)

// FuzzGeminiTranslationAccepted holds the gateway's chat → Gemini
// translation to the fake's checks of the API: any chat request it
// translates, the fake (for a Gemini 3 model, the strictest) accepts.
func FuzzGeminiTranslationAccepted(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}},{"id":"c2","type":"function","function":{"name":"g","arguments":"x"}}]},{"role":"tool","tool_call_id":"c1","content":"{\"ok\":true}"},{"role":"tool","tool_call_id":"c2","content":"plain"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"integer"}}}}},{"type":"function","function":{"name":"g","parameters":{"type":"object","properties":{}}}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`,
		`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,"}},{"type":"file","file":{"file_data":"data:,x"}},{"type":"input_audio","input_audio":{"data":"AA=="}}]}]}`,
		`{"messages":[{"role":"user","content":"q"}],"response_format":{"type":"json_schema","json_schema":{"schema":{"type":"object","properties":{"o":{"type":"object","properties":{"p":{"type":"string"}},"required":["p","q"]}}}}},"stop":["a",""],"max_tokens":3}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, chat []byte) {
		body, err := translate.ChatToGeminiRequest(chat, "gemini-3-pro-preview")
		if err != nil {
			return
		}
		var req map[string]any
		if err := json.Unmarshal(body, &req); err != nil {
			t.Fatalf("not a JSON object: %s", body)
		}
		if msg := checkGeminiRequest(req, "gemini-3-pro-preview", "GenerateContentRequest"); msg != "" {
			t.Fatalf("the fake refuses %s\nmade of %s:\n%s", body, chat, msg)
		}
	})
}
