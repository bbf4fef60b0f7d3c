// Package audio serves the gateway's three audio routes: transcription (POST
// /v1/audio/transcriptions, a bounded multipart upload whose format and
// length are read from the file's own bytes, billed per second of audio),
// speech (POST /v1/audio/speech, the provider's audio relayed chunk by
// chunk and billed when its first byte arrives) and the voice list (GET
// /v1/audio/voices, the catalogue declared per speech model in the
// config). Both ability routes call the chat-completions-style provider's
// own endpoints.
package audio

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/upstream"
)

// Ability aliases of the audio routes (defaults: gw-voice, gw-voice-speak).
const (
	AliasVoice         = "gw-voice"
	AliasVoiceFast     = "gw-voice-fast"
	AliasVoiceAccurate = "gw-voice-accurate"
	AliasSpeak         = "gw-voice-speak"
	AliasSpeakHD       = "gw-voice-speak-hd"
)

// HDVoices are the only voices gw-voice-speak-hd may take (its voices
// option narrows them): a subset of the gw-voice-speak voices.
var HDVoices = []string{"alloy", "ash", "coral", "echo", "fable", "nova", "onyx", "sage", "shimmer"}

// Defaults of Config.
const (
	// DefaultAccurateUpTo is the clip length up to which gw-voice picks
	// gw-voice-accurate; longer clips go to gw-voice-fast, which keeps
	// them inside the 60 seconds of processing.
	DefaultAccurateUpTo = 5 * time.Minute
	// DefaultVerboseModel is the provider model that answers verbose_json:
	// the provider's newer transcription models answer only json and text,
	// whisper-1 gives segments and word timestamps.
	DefaultVerboseModel = "whisper-1"
)

// Config is the configurable part of the audio routes.
type Config struct {
	// AccurateUpTo is gw-voice's threshold (DefaultAccurateUpTo when 0).
	AccurateUpTo time.Duration
	// VerboseModel answers verbose_json (DefaultVerboseModel when "").
	VerboseModel string
	// TranscriptionTimeout, FirstAudioTimeout and GapTimeout replace the
	// default 60, 30 and 30 seconds when positive (tests use short ones).
	TranscriptionTimeout, FirstAudioTimeout, GapTimeout time.Duration
}

// Handler serves the audio routes.
type Handler struct {
	// Upstream is the provider client.
	Upstream *upstream.Client
	cfg      Config
	// voices are the rows of the voice list, sorted by model then id.
	voices []VoiceRow
	// allowed maps each speech alias to the voice ids it accepts.
	allowed map[string]map[string]bool
}

// New builds the audio handler over the catalogue's speech aliases and
// their voices: gw-voice-speak-hd has no voice rows of its own and takes
// a subset of gw-voice-speak's (its VoiceSubset, by
// default HDVoices), each of which must be a gw-voice-speak voice and in
// HDVoices.
func New(up *upstream.Client, cat *catalog.Catalog, cfg Config) (*Handler, error) {
	if cfg.AccurateUpTo <= 0 {
		cfg.AccurateUpTo = DefaultAccurateUpTo
	}
	if cfg.VerboseModel == "" {
		cfg.VerboseModel = DefaultVerboseModel
	}
	h := &Handler{Upstream: up, cfg: cfg, voices: []VoiceRow{}, allowed: map[string]map[string]bool{}}
	for _, aa := range catalog.AbilityAliases {
		a := cat.Abilities[aa.ID]
		if a == nil || aa.Capability != catalog.CapSpeech {
			if a != nil && (len(a.Voices) > 0 || len(a.VoiceSubset) > 0) {
				return nil, fmt.Errorf("ability %s: only speech aliases have voices", a.Alias)
			}
			continue
		}
		if a.Alias == AliasSpeakHD {
			if len(a.Voices) > 0 {
				return nil, fmt.Errorf("ability %s: it has no voices of its own; list the %s voices it takes with voices", a.Alias, AliasSpeak)
			}
			continue
		}
		if len(a.VoiceSubset) > 0 {
			return nil, fmt.Errorf("ability %s: voices (a subset) is for %s; declare voice rows instead", a.Alias, AliasSpeakHD)
		}
		set := map[string]bool{}
		for _, v := range a.Voices {
			if v.ID == "" {
				return nil, fmt.Errorf("ability %s: a voice without an id", a.Alias)
			}
			if set[v.ID] {
				return nil, fmt.Errorf("ability %s: voice %s declared twice", a.Alias, v.ID)
			}
			set[v.ID] = true
			row := VoiceRow{ID: v.ID, Model: a.Alias, Name: v.Name, Gender: v.Gender, Description: v.Description, Languages: v.Languages}
			if row.Name == "" {
				row.Name = v.ID
			}
			if row.Languages == nil {
				row.Languages = []string{}
			}
			h.voices = append(h.voices, row)
		}
		h.allowed[a.Alias] = set
	}
	if hd := cat.Abilities[AliasSpeakHD]; hd != nil {
		speak := h.allowed[AliasSpeak]
		set := map[string]bool{}
		if len(hd.VoiceSubset) == 0 {
			for _, id := range HDVoices {
				if speak[id] {
					set[id] = true
				}
			}
		}
		for _, id := range hd.VoiceSubset {
			if !slices.Contains(HDVoices, id) {
				return nil, fmt.Errorf("ability %s: voice %s is not one tts-1-hd speaks (%v)", AliasSpeakHD, id, HDVoices)
			}
			if !speak[id] {
				return nil, fmt.Errorf("ability %s: voice %s is not a %s voice", AliasSpeakHD, id, AliasSpeak)
			}
			set[id] = true
		}
		h.allowed[AliasSpeakHD] = set
	}
	sort.Slice(h.voices, func(i, j int) bool {
		if h.voices[i].Model != h.voices[j].Model {
			return h.voices[i].Model < h.voices[j].Model
		}
		return h.voices[i].ID < h.voices[j].ID
	})
	return h, nil
}

func (h *Handler) timeout(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
