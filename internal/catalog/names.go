package catalog

// Declares reports whether name is a model or service the configuration
// declared: a chat or embedding model's id, an ability's provider model,
// gw-decide when decision mode is on, or a name given to Declare. Only
// such names (and the names a server lists itself) become values of the
// metrics' model label, so a caller cannot add series by naming things.
func (c *Catalog) Declares(name string) bool {
	if c == nil {
		return false
	}
	if _, ok := c.byID[name]; ok {
		return true
	}
	if _, ok := c.embedByID[name]; ok {
		return true
	}
	if _, ok := c.declared[name]; ok {
		return true
	}
	if name == AliasDecide && c.DecideModel != "" {
		return true
	}
	for _, a := range c.Abilities {
		if a.Model == name {
			return true
		}
	}
	return false
}

// Declare adds the names of billed services that the configuration names
// outside the model rows (page reading, the search model, the model of
// verbose transcriptions) to those Declares reports. It is called while
// the catalogue is built, before it serves.
func (c *Catalog) Declare(names ...string) {
	if c.declared == nil {
		c.declared = map[string]struct{}{}
	}
	for _, n := range names {
		if n != "" {
			c.declared[n] = struct{}{}
		}
	}
}

// DeclaresProvider reports whether name is a configured provider's.
func (c *Catalog) DeclaresProvider(name string) bool {
	if c == nil {
		return false
	}
	_, ok := c.Providers[name]
	return ok
}
