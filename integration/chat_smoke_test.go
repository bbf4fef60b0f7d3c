package integration

import (
	"testing"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// chatGateway starts fake upstreams of both formats and a gateway pointed
// at them (on ../Caddyfile.example), with a bootstrap key.
func chatGateway(t *testing.T) (*gateway, *fake.Upstream, *fake.Upstream, string) {
	t.Helper()
	return chatGatewayWith(t, "")
}

// chatGatewayWith is chatGateway on the Caddyfile text caddyfile (empty:
// ../Caddyfile.example).
func chatGatewayWith(t *testing.T, caddyfile string) (*gateway, *fake.Upstream, *fake.Upstream, string) {
	t.Helper()
	oa, an := fake.NewOpenAI(), fake.NewAnthropic()
	t.Cleanup(oa.Close)
	t.Cleanup(an.Close)
	const key = "sk-chat-bootstrap-0123456789abcdefghijklmn"
	g := startGateway(t, gwOptions{BootstrapKey: key, Caddyfile: caddyfile, Env: map[string]string{
		"GW_OPENAI_BASE_URL": oa.URL, "GW_ANTHROPIC_BASE_URL": an.URL,
	}})
	return g, oa, an, key
}
