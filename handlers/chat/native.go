package chat

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/caddy-gw/caddy-gw/internal/awsstream"
	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/sse"
	"github.com/caddy-gw/caddy-gw/internal/translate"
)

// reach is how a call reaches a provider's model: the format the handler
// speaks to it, and for a provider of a cloud's own API (Gemini, Vertex
// AI, Bedrock) the native adapter between that format and the API. The
// handler does all it does (checks, limits, usage, translation to the
// client's format) in reach.format; the adapter only carries bodies and
// streams across at the edge.
type reach struct {
	format Format
	native *native
}

// native is a cloud API seen through one of the handler's formats: where
// a call goes, its body in the API's shape, and the API's answers and
// streams back in the format's.
type native struct {
	// path is where a call of model goes, after the provider's base URL.
	path func(p *catalog.Provider, model string, stream bool) string
	// request turns a body of the reach's format into the API's.
	request func(body []byte, model string) ([]byte, error)
	// answer turns a whole answer of the API into the reach's format (nil:
	// it is one already).
	answer func(body []byte, model string) ([]byte, error)
	// events reads the API's stream as events (nil: server-sent events);
	// stream turns them into the reach's format (nil: they are its
	// already).
	events func(r io.Reader) eventSource
	stream func(model string) translate.Stream
	// count is the API's own count of a prompt (nil: it has none the
	// gateway asks; the prompt is counted locally).
	count *nativeCount
}

// nativeCount is a cloud API's count of a prompt: where it is asked, its
// body made from a call's body in the API's shape, and how its answer
// says the number.
type nativeCount struct {
	path func(p *catalog.Provider, model string) string
	body func(request []byte, model string) ([]byte, error)
	read func(answer []byte) (int64, error)
}

// eventSource is a stream read event by event (sse.Reader is one).
type eventSource interface {
	Next() (sse.Event, error)
}

// reaches are how each catalogue format's providers are reached, by the
// model called.
var reaches = map[string]func(model string) reach{
	catalog.FormatOpenAI:    func(string) reach { return reach{format: ChatCompletions} },
	catalog.FormatAnthropic: func(string) reach { return reach{format: Messages} },
	catalog.FormatGemini:    func(string) reach { return reach{format: ChatCompletions, native: &geminiAPI} },
	catalog.FormatBedrock:   func(string) reach { return reach{format: ChatCompletions, native: &bedrockConverse} },
	catalog.FormatVertex: func(model string) reach {
		if vertexPublisher(model) == vertexAnthropic {
			return reach{format: Messages, native: &vertexClaude}
		}
		return reach{format: ChatCompletions, native: &vertexGemini}
	},
}

// reachOf is the reach of a call to model at p. A provider of a format
// not listed (only a catalogue made by hand: catalog.New refuses one) is
// spoken to in chat completions.
func reachOf(p *catalog.Provider, model string) reach {
	if r, ok := reaches[p.Format]; ok {
		return r(model)
	}
	return reach{format: ChatCompletions}
}

// counts reports whether the reach's provider counts a prompt for free:
// the format's count endpoint, or the native API's own count.
func (r reach) counts() bool {
	if r.native != nil {
		return r.native.count != nil
	}
	return r.format.spec().counts
}

// betas reports whether the reach's provider takes the call's betas.
func (r reach) betas() bool { return r.native == nil && r.format.spec().betas }

// requestFor is requestFor for the reach: a client body of format from
// made the body and path of a call of model to p.
func (r reach) requestFor(body []byte, from Format, p *catalog.Provider, model string, stream bool) ([]byte, string, error) {
	body, path, err := requestFor(body, from, r.format, model, stream)
	if err != nil || r.native == nil {
		return body, path, err
	}
	if body, err = r.native.request(body, model); err != nil {
		return nil, "", err
	}
	return body, r.native.path(p, model, stream), nil
}

// answerOf is a whole answer of the reach's provider in the reach's
// format.
func (r reach) answerOf(body []byte, model string) ([]byte, error) {
	if r.native == nil || r.native.answer == nil {
		return body, nil
	}
	return r.native.answer(body, model)
}

// streamOf is a stream of the reach's provider as server-sent events of
// the reach's format.
func (r reach) streamOf(rd io.Reader, model string) io.Reader {
	if r.native == nil || (r.native.events == nil && r.native.stream == nil) {
		return rd
	}
	var src eventSource
	if r.native.events != nil {
		src = r.native.events(rd)
	} else {
		src = sse.NewReader(rd)
	}
	var tr translate.Stream
	if r.native.stream != nil {
		tr = r.native.stream(model)
	}
	return &nativeStream{src: src, tr: tr}
}

// nativeStream reads a native stream event by event and serves it as
// server-sent events of the reach's format, each translated as it comes.
type nativeStream struct {
	src    eventSource
	tr     translate.Stream // nil: the events as they are
	buf    []byte
	off    int
	closed bool
	err    error
}

func (s *nativeStream) Read(p []byte) (int, error) {
	for s.off == len(s.buf) {
		if s.err != nil {
			return 0, s.err
		}
		s.buf, s.off = s.buf[:0], 0
		ev, err := s.src.Next()
		switch {
		case err == io.EOF:
			if s.tr != nil && !s.closed {
				s.closed = true
				s.append(s.tr.Close())
			}
			s.err = io.EOF
		case err != nil:
			s.err = err
		case s.tr == nil:
			s.append([]sse.Event{ev})
		default:
			out, err := s.tr.Event(ev)
			if err != nil {
				s.err = err
				break
			}
			s.append(out)
		}
	}
	n := copy(p, s.buf[s.off:])
	s.off += n
	return n, nil
}

// append writes evs to the buffer as server-sent events.
func (s *nativeStream) append(evs []sse.Event) {
	for _, ev := range evs {
		s.buf = sse.Append(s.buf, ev)
	}
}

// Vertex AI serves each model by its publisher.
const (
	vertexGoogle    = "google"
	vertexAnthropic = "anthropic"
	// vertexAnthropicVersion is the version a Claude model on Vertex AI
	// reads from the body, in place of the header.
	vertexAnthropicVersion = "vertex-2023-10-16"
	// vertexCountModel is the model a Claude prompt is counted at on
	// Vertex AI (by rawPredict, the counted model named in the body).
	vertexCountModel = "count-tokens"
	// vertexRawPredict and vertexStreamRawPredict are the verbs of a
	// Claude model's whole and streamed calls (and of its count).
	vertexRawPredict       = "rawPredict"
	vertexStreamRawPredict = "streamRawPredict"
)

// vertexPublisher is the publisher of a Vertex AI model: Anthropic's for
// the Claude models, Google's for the rest.
func vertexPublisher(model string) string {
	if strings.HasPrefix(model, "claude") {
		return vertexAnthropic
	}
	return vertexGoogle
}

// vertexPath is where a call of model goes on Vertex AI, by the verb of
// its publisher's API.
func vertexPath(p *catalog.Provider, model, verb string) string {
	return publisherPath(p, vertexPublisher(model), model, verb)
}

// publisherPath is where a call of a publisher's model goes on Vertex AI.
func publisherPath(p *catalog.Provider, publisher, model, verb string) string {
	return fmt.Sprintf("/v1/projects/%s/locations/%s/publishers/%s/models/%s:%s", url.PathEscape(p.Project), url.PathEscape(p.Location),
		publisher, url.PathEscape(model), verb)
}

// vertexClaude is a Claude model on Vertex AI: the messages format with
// the model in the path and the version in the body.
var vertexClaude = native{
	path: func(p *catalog.Provider, model string, stream bool) string {
		if stream {
			return vertexPath(p, model, vertexStreamRawPredict)
		}
		return vertexPath(p, model, vertexRawPredict)
	},
	request: func(body []byte, _ string) ([]byte, error) {
		body, err := sjson.DeleteBytes(body, "model")
		if err != nil {
			return nil, err
		}
		return sjson.SetBytes(body, "anthropic_version", vertexAnthropicVersion)
	},
	// Vertex AI counts a Claude prompt at the publisher's count-tokens
	// model: the members the messages format counts, and the model named
	// in the body.
	count: &nativeCount{
		path: func(p *catalog.Provider, _ string) string {
			return publisherPath(p, vertexAnthropic, vertexCountModel, vertexRawPredict)
		},
		body: func(request []byte, model string) ([]byte, error) {
			out := []byte(`{}`)
			var err error
			table := Messages.spec().billing
			gjson.ParseBytes(request).ForEach(func(k, v gjson.Result) bool {
				if table.rule(k.Str).countable {
					out, err = setRaw(out, k.Str, v.Raw)
				}
				return err == nil
			})
			if err != nil {
				return nil, err
			}
			return sjson.SetBytes(out, "model", model)
		},
		read: func(answer []byte) (int64, error) {
			if n := gjson.GetBytes(answer, "input_tokens"); n.Type == gjson.Number {
				return n.Int(), nil
			}
			return 0, errNoCount
		},
	},
}

// errNoCount is an answer of a count that holds no count.
var errNoCount = errors.New("the answer holds no token count")

// geminiMethod is the Gemini API's method of a call, whole or streamed.
func geminiMethod(stream bool) string {
	if stream {
		return translate.GeminiStreamMethod
	}
	return translate.GeminiGenerateMethod
}

// geminiAPI is Google's Gemini API: its generateContent bodies, answers
// and server-sent events.
var geminiAPI = native{
	path: func(_ *catalog.Provider, model string, stream bool) string {
		return translate.GeminiPath(model, geminiMethod(stream))
	},
	request: translate.ChatToGeminiRequest,
	answer:  translate.GeminiToChatResponse,
	stream:  translate.NewGeminiToChat,
	count: &nativeCount{
		path: func(_ *catalog.Provider, model string) string {
			return translate.GeminiPath(model, translate.GeminiCountMethod)
		},
		body: translate.GeminiCountRequest,
		read: translate.GeminiCountTokens,
	},
}

// vertexGemini is a Gemini model on Vertex AI: the Gemini API at Vertex
// AI's paths.
var vertexGemini = native{
	path: func(p *catalog.Provider, model string, stream bool) string {
		return vertexPath(p, model, strings.TrimPrefix(geminiMethod(stream), ":"))
	},
	request: translate.ChatToGeminiRequest,
	answer:  translate.GeminiToChatResponse,
	stream:  translate.NewGeminiToChat,
	// Vertex AI's countTokens takes some of a generateContent body's
	// members as they are.
	count: &nativeCount{
		path: func(p *catalog.Provider, model string) string {
			return vertexPath(p, model, strings.TrimPrefix(translate.GeminiCountMethod, ":"))
		},
		body: translate.VertexCountRequest,
		read: translate.GeminiCountTokens,
	},
}

// bedrockConverse is Amazon Bedrock Runtime's Converse API: its bodies,
// and its stream in AWS's event-stream framing.
var bedrockConverse = native{
	path: func(_ *catalog.Provider, model string, stream bool) string {
		return translate.ConversePath(model, stream)
	},
	request: translate.ChatToConverseRequest,
	answer:  translate.ConverseToChatResponse,
	events:  func(r io.Reader) eventSource { return awsstream.NewReader(r) },
	stream:  translate.NewConverseToChat,
	count: &nativeCount{
		path: func(_ *catalog.Provider, model string) string { return translate.ConverseCountPath(model) },
		body: translate.ConverseCountRequest,
		read: translate.ConverseCountTokens,
	},
}
