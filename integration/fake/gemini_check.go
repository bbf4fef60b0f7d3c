package fake

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// geminiFields are the members of the Gemini API's request objects, by
// object, in both spellings the API reads (lowerCamel and snake_case).
var geminiFields = map[string]map[string]bool{
	"GenerateContentRequest": fieldSet("model", "contents", "tools", "toolConfig", "safetySettings", "systemInstruction",
		"generationConfig", "cachedContent"),
	"generation_config": fieldSet("stopSequences", "responseMimeType", "responseSchema", "responseJsonSchema", "responseModalities",
		"candidateCount", "maxOutputTokens", "temperature", "topP", "topK", "seed", "presencePenalty", "frequencyPenalty",
		"responseLogprobs", "logprobs", "enableEnhancedCivicAnswers", "speechConfig", "thinkingConfig", "imageConfig", "mediaResolution"),
	"part": fieldSet("text", "inlineData", "fileData", "functionCall", "functionResponse", "executableCode", "codeExecutionResult",
		"thought", "thoughtSignature", "videoMetadata", "partMetadata", "mediaResolution"),
}

// geminiPartData are the members of a part of which it holds exactly one.
var geminiPartData = []string{"text", "inlineData", "fileData", "functionCall", "functionResponse", "executableCode", "codeExecutionResult"}

// fieldSet is a set of field names in both spellings.
func fieldSet(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
		m[snake(n)] = true
	}
	return m
}

// snake is a lowerCamel name in snake_case.
func snake(s string) string {
	var b strings.Builder
	for _, c := range s {
		if c >= 'A' && c <= 'Z' {
			b.WriteByte('_')
			c += 'a' - 'A'
		}
		b.WriteRune(c)
	}
	return b.String()
}

// member is m[name] in either spelling.
func member(m map[string]any, name string) any {
	if v, ok := m[name]; ok {
		return v
	}
	return m[snake(name)]
}

// unknownField is the API's answer to a member an object does not have,
// "" when every member of m is one of object's.
func unknownField(m map[string]any, object, at string) string {
	for k := range m {
		if !geminiFields[object][k] {
			if at == "" {
				return fmt.Sprintf("Invalid JSON payload received. Unknown name %q: Cannot find field.", k)
			}
			return fmt.Sprintf("Invalid JSON payload received. Unknown name %q at '%s': Cannot find field.", k, at)
		}
	}
	return ""
}

// checkGeminiRequest checks a GenerateContentRequest for model as the API
// does where a gateway bug would show; it returns the API's message, ""
// when the request passes. prefix names the request in messages.
func checkGeminiRequest(req map[string]any, model, prefix string) string {
	if msg := unknownField(req, "GenerateContentRequest", ""); msg != "" {
		return msg
	}
	gc, _ := member(req, "generationConfig").(map[string]any)
	if msg := unknownField(gc, "generation_config", "generation_config"); msg != "" {
		return msg
	}
	if schema := member(gc, "responseSchema"); schema != nil || member(gc, "responseJsonSchema") != nil {
		if mt, _ := member(gc, "responseMimeType").(string); mt != "application/json" && mt != "text/x.enum" {
			return "* " + prefix + ".generation_config.response_mime_type: a response schema needs response_mime_type application/json\n"
		}
	}
	if msg := checkGeminiContents(member(req, "contents"), model, prefix); msg != "" {
		return msg
	}
	if si := member(req, "systemInstruction"); si != nil {
		sys, _ := si.(map[string]any)
		if parts, _ := sys["parts"].([]any); len(parts) == 0 {
			return "* " + prefix + ".system_instruction.parts: contents.parts must not be empty.\n"
		}
	}
	if msg := checkGeminiTools(member(req, "tools"), prefix); msg != "" {
		return msg
	}
	tc, _ := member(req, "toolConfig").(map[string]any)
	if fc, _ := member(tc, "functionCallingConfig").(map[string]any); fc != nil {
		mode, _ := fc["mode"].(string)
		switch mode {
		case "", "AUTO", "ANY", "NONE", "VALIDATED":
		default:
			return fmt.Sprintf("Invalid value at 'tool_config.function_calling_config.mode' (type.googleapis.com/google.ai.generativelanguage.v1beta.FunctionCallingConfig.Mode), %q", mode)
		}
		if member(fc, "allowedFunctionNames") != nil && mode != "ANY" && mode != "VALIDATED" {
			return "* " + prefix + ".tool_config.function_calling_config.allowed_function_names: allowed_function_names should only be set when the Mode is ANY.\n"
		}
	}
	return ""
}

// checkGeminiContents checks a request's contents.
func checkGeminiContents(v any, model, prefix string) string {
	contents, _ := v.([]any)
	if len(contents) == 0 {
		return "* " + prefix + ".contents: contents is not specified\n"
	}
	lastUserText := -1
	for i, c := range contents {
		content, ok := c.(map[string]any)
		if !ok {
			return fmt.Sprintf("Invalid JSON payload received. contents[%d] is not an object.", i)
		}
		role, _ := content["role"].(string)
		if role != "" && role != "user" && role != "model" {
			return "Please use a valid role: user, model."
		}
		parts, _ := content["parts"].([]any)
		if len(parts) == 0 {
			return fmt.Sprintf("* %s.contents[%d].parts: contents.parts must not be empty.\n", prefix, i)
		}
		for j, p := range parts {
			part, _ := p.(map[string]any)
			if msg := checkGeminiPart(part, fmt.Sprintf("%s.contents[%d].parts[%d]", prefix, i, j), fmt.Sprintf("contents[%d].parts[%d]", i, j)); msg != "" {
				return msg
			}
			if role != "model" && part["text"] != nil {
				lastUserText = i
			}
		}
	}
	if strings.HasPrefix(model, "gemini-3") {
		return checkSignatures(contents[lastUserText+1:])
	}
	return ""
}

// checkGeminiPart checks one part (named at in messages, where in the
// API's "Invalid value" ones).
func checkGeminiPart(part map[string]any, at, where string) string {
	if part == nil {
		return "Invalid JSON payload received. " + where + " is not an object."
	}
	if msg := unknownField(part, "part", where); msg != "" {
		return msg
	}
	n := 0
	for _, k := range geminiPartData {
		if member(part, k) != nil {
			n++
		}
	}
	if n != 1 {
		return "* " + at + ".data: required oneof field 'data' must have one initialized field\n"
	}
	if fc, ok := member(part, "functionCall").(map[string]any); ok || member(part, "functionCall") != nil {
		if name, _ := fc["name"].(string); name == "" {
			return "* " + at + ".function_call.name: Name cannot be empty.\n"
		}
		if a, present := fc["args"]; present {
			if _, isObj := a.(map[string]any); !isObj {
				return fmt.Sprintf("Invalid value at '%s.function_call.args' (type.googleapis.com/google.protobuf.Struct), %v", where, a)
			}
		}
	}
	if fr, ok := member(part, "functionResponse").(map[string]any); ok || member(part, "functionResponse") != nil {
		if name, _ := fr["name"].(string); name == "" {
			return "* " + at + ".function_response.name: Name cannot be empty.\n"
		}
		if _, isObj := fr["response"].(map[string]any); !isObj {
			return fmt.Sprintf("Invalid value at '%s.function_response.response' (type.googleapis.com/google.protobuf.Struct), %v", where, fr["response"])
		}
	}
	if d, ok := member(part, "inlineData").(map[string]any); ok || member(part, "inlineData") != nil {
		if mt, _ := member(d, "mimeType").(string); mt == "" {
			return "* " + at + ".inline_data.mime_type: mime_type must be specified\n"
		}
		if data, _ := d["data"].(string); data == "" {
			return "* " + at + ".inline_data.data: data must be specified\n"
		}
	}
	if d, ok := member(part, "fileData").(map[string]any); ok || member(part, "fileData") != nil {
		if uri, _ := member(d, "fileUri").(string); uri == "" {
			return "* " + at + ".file_data.file_uri: file_uri must be specified\n"
		}
	}
	if sig, present := member(part, "thoughtSignature").(string); present {
		if _, err := base64.StdEncoding.DecodeString(sig); err != nil {
			if _, err := base64.URLEncoding.DecodeString(sig); err != nil {
				return fmt.Sprintf("Invalid value at '%s.thought_signature' (TYPE_BYTES), Base64 decoding failed for %q", where, sig)
			}
		}
	}
	return ""
}

// checkSignatures checks, in the turns of the current request (after the
// last user text), that the first function call of each model turn
// carries a signature the fake made or the documented skip value, as
// Gemini 3 models require.
func checkSignatures(turns []any) string {
	for _, c := range turns {
		content, _ := c.(map[string]any)
		if content["role"] != "model" {
			continue
		}
		parts, _ := content["parts"].([]any)
		for j, p := range parts {
			part, _ := p.(map[string]any)
			fc, _ := member(part, "functionCall").(map[string]any)
			if fc == nil {
				continue
			}
			sig, _ := member(part, "thoughtSignature").(string)
			if sig == "" {
				return fmt.Sprintf("Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:%v` , position %d. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.", fc["name"], j+1)
			}
			raw, _ := base64.StdEncoding.DecodeString(sig)
			if sig != SkipThoughtSignature && sig != "context_engineering_is_the_way_to_go" && !strings.HasPrefix(string(raw), geminiSignaturePrefix) {
				return "Corrupted thought signature."
			}
			break
		}
	}
	return ""
}

// checkGeminiTools checks function declarations.
func checkGeminiTools(v any, prefix string) string {
	tools, _ := v.([]any)
	for i, t := range tools {
		tool, _ := t.(map[string]any)
		decls, _ := member(tool, "functionDeclarations").([]any)
		for j, d := range decls {
			decl, _ := d.(map[string]any)
			at := fmt.Sprintf("* %s.tools[%d].function_declarations[%d]", prefix, i, j)
			if name, _ := decl["name"].(string); name == "" {
				return at + ".name: Name cannot be empty.\n"
			}
			params := decl["parameters"]
			if params != nil && member(decl, "parametersJsonSchema") != nil {
				return at + ": parameters and parameters_json_schema cannot both be set.\n"
			}
			if p, _ := params.(map[string]any); p != nil {
				props, _ := p["properties"].(map[string]any)
				if typ, _ := p["type"].(string); strings.EqualFold(typ, "object") && len(props) == 0 {
					return at + ".parameters.properties: should be non-empty for OBJECT type\n"
				}
			}
		}
	}
	return ""
}
