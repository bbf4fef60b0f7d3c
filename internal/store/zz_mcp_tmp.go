package store

// AbilityMCPGateway placeholder until the key side lands.
const AbilityMCPGateway = "mcp_gateway"

// AllowsMCPTool placeholder.
func (k Key) AllowsMCPTool(name string) bool { return true }
