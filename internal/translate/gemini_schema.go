package translate

import "github.com/tidwall/gjson"

// MaxGeminiSchemaDepth is the deepest nesting of a JSON Schema that is
// converted into Gemini's Schema; a deeper one is sent whole as JSON Schema.
const MaxGeminiSchemaDepth = 32

// geminiTypes are the JSON Schema types Gemini's Schema has, by their JSON
// Schema names ("null" is said with nullable).
var geminiTypes = map[string]string{
	"string": "STRING", "number": "NUMBER", "integer": "INTEGER", "boolean": "BOOLEAN", "array": "ARRAY", "object": "OBJECT",
}

// geminiFormats are the formats Gemini accepts, by type; another format
// is refused there, so it is dropped (it only refines the type).
var geminiFormats = map[string]map[string]bool{
	"STRING":  {"enum": true, "date-time": true},
	"NUMBER":  {"float": true, "double": true},
	"INTEGER": {"int32": true, "int64": true},
}

// geminiUnsayable are the JSON Schema keywords Gemini's Schema cannot
// say: a schema using one is sent whole as JSON Schema.
var geminiUnsayable = map[string]bool{
	"$ref": true, "$defs": true, "definitions": true, "$dynamicRef": true, "$anchor": true, "allOf": true, "not": true,
	"if": true, "then": true, "else": true, "patternProperties": true, "propertyNames": true, "unevaluatedProperties": true,
	"unevaluatedItems": true, "prefixItems": true, "contains": true, "dependentRequired": true, "dependentSchemas": true,
	"dependencies": true, "additionalItems": true,
}

// geminiCounts are the keywords whose integer value Gemini's Schema keeps.
var geminiCounts = map[string]bool{
	"minItems": true, "maxItems": true, "minLength": true, "maxLength": true, "minProperties": true, "maxProperties": true,
}

// geminiSchema converts a JSON Schema into Gemini's Schema, the subset of
// OpenAPI 3.0 that function parameters and responseSchema take: types in
// capitals, "null" as nullable, oneOf as anyOf, const as a one-value enum,
// formats Gemini refuses dropped, and keywords that only annotate or
// loosen (additionalProperties true or false, $schema, strict,
// exclusiveMinimum, multipleOf, ...) dropped. ok is false when the schema
// says what the subset cannot (see geminiUnsayable; also tuples, enums
// that are not strings, maps, objects without properties, several types,
// a schema without a type): then the caller sends it whole as JSON Schema
// (parametersJsonSchema, responseJsonSchema).
func geminiSchema(s gjson.Result, depth int) (out []byte, ok bool) {
	if !s.IsObject() || depth > MaxGeminiSchemaDepth {
		return nil, false
	}
	sc := geminiSchemaConv{depth: depth, ok: true, rest: newObject()}
	s.ForEach(sc.member)
	if !sc.ok {
		return nil, false
	}
	return sc.done()
}

// geminiSchemaConv is one schema being converted: its members as read.
type geminiSchemaConv struct {
	depth    int
	ok       bool
	typ      string
	nullable bool
	format   string
	enum     []string
	props    []byte // converted properties object, nil when none
	names    map[string]bool
	required []string
	items    []byte
	anyOf    []byte
	rest     object // the members copied as they are
}

func (c *geminiSchemaConv) fail() bool { c.ok = false; return false }

// member reads one keyword; it returns false to stop at the first thing
// the subset cannot say.
func (c *geminiSchemaConv) member(k, v gjson.Result) bool {
	key := k.String()
	if geminiUnsayable[key] {
		return c.fail()
	}
	switch key {
	case "type":
		return c.readType(v)
	case "nullable":
		if v.IsBool() {
			c.nullable = c.nullable || v.Bool()
		}
	case "description", "title", "pattern":
		if v.Type == gjson.String {
			c.rest = c.rest.val(key, v.String())
		}
	case "format":
		c.format = v.String()
	case "enum":
		return c.readEnum(v)
	case "const":
		if v.Type != gjson.String {
			return c.fail()
		}
		c.enum = []string{v.String()}
	case "properties":
		return c.readProperties(v)
	case "items":
		if !v.IsObject() {
			return c.fail()
		}
		if c.items, c.ok = geminiSchema(v, c.depth+1); !c.ok {
			return false
		}
	case "anyOf", "oneOf":
		return c.readAnyOf(v)
	case "required":
		if !v.IsArray() {
			return c.fail()
		}
		c.required = []string{}
		v.ForEach(func(_, n gjson.Result) bool {
			c.required = append(c.required, n.String())
			return true
		})
	case "propertyOrdering":
		if !v.IsArray() {
			return c.fail()
		}
		c.rest = c.rest.raw(key, []byte(v.Raw))
	case "minimum", "maximum":
		if v.Type == gjson.Number {
			c.rest = c.rest.raw(key, []byte(v.Raw))
		}
	case "default", "example":
		c.rest = c.rest.raw(key, []byte(v.Raw))
	case "additionalProperties":
		if v.IsObject() {
			return c.fail() // a map: keys the subset cannot name
		}
	default:
		if geminiCounts[key] && v.Type == gjson.Number {
			c.rest = c.rest.val(key, v.Int())
		}
	}
	return true
}

// readType reads "type": one name, or a list of one name and "null".
func (c *geminiSchemaConv) readType(v gjson.Result) bool {
	var names []string
	switch {
	case v.Type == gjson.String:
		names = []string{v.String()}
	case v.IsArray():
		v.ForEach(func(_, n gjson.Result) bool {
			names = append(names, n.String())
			return true
		})
	default:
		return c.fail()
	}
	for _, n := range names {
		if n == "null" {
			c.nullable = true
			continue
		}
		t, known := geminiTypes[n]
		if !known || c.typ != "" {
			return c.fail() // an unknown type, or several
		}
		c.typ = t
	}
	return true
}

// readEnum reads an enum of strings (a null member makes it nullable).
func (c *geminiSchemaConv) readEnum(v gjson.Result) bool {
	if !v.IsArray() {
		return c.fail()
	}
	c.enum = []string{}
	v.ForEach(func(_, e gjson.Result) bool {
		switch e.Type {
		case gjson.String:
			c.enum = append(c.enum, e.String())
		case gjson.Null:
			c.nullable = true
		default:
			c.ok = false
		}
		return c.ok
	})
	if len(c.enum) == 0 {
		return c.fail()
	}
	return c.ok
}

func (c *geminiSchemaConv) readProperties(v gjson.Result) bool {
	if !v.IsObject() {
		return c.fail()
	}
	props := newObject()
	c.names = map[string]bool{}
	v.ForEach(func(name, p gjson.Result) bool {
		var conv []byte
		if conv, c.ok = geminiSchema(p, c.depth+1); c.ok && !c.names[name.String()] {
			props = props.raw(name.String(), conv)
			c.names[name.String()] = true
		}
		return c.ok
	})
	c.props = props.done()
	return c.ok
}

func (c *geminiSchemaConv) readAnyOf(v gjson.Result) bool {
	if !v.IsArray() || c.anyOf != nil {
		return c.fail()
	}
	var subs [][]byte
	v.ForEach(func(_, s gjson.Result) bool {
		// {"type":"null"} among the choices is said with nullable.
		if t := s.Get("type"); t.String() == "null" && len(s.Map()) == 1 {
			c.nullable = true
			return true
		}
		var conv []byte
		if conv, c.ok = geminiSchema(s, c.depth+1); c.ok {
			subs = append(subs, conv)
		}
		return c.ok
	})
	if !c.ok || len(subs) == 0 {
		return c.fail()
	}
	c.anyOf = rawArray(subs)
	return true
}

// done writes the converted schema.
func (c *geminiSchemaConv) done() ([]byte, bool) {
	if c.typ == "" {
		switch {
		case c.anyOf != nil:
		case c.props != nil:
			c.typ = "OBJECT"
		case c.items != nil:
			c.typ = "ARRAY"
		case c.enum != nil:
			c.typ = "STRING"
		default:
			return nil, false // any value: the subset has no such type
		}
	}
	if c.typ == "OBJECT" && len(c.names) == 0 {
		return nil, false // an object of any members
	}
	if c.enum != nil && c.typ != "STRING" {
		return nil, false // Gemini's enums are strings
	}
	o := newObject()
	if c.typ != "" {
		o = o.val("type", c.typ)
	}
	if geminiFormats[c.typ][c.format] {
		o = o.val("format", c.format)
	}
	if c.nullable {
		o = o.val("nullable", true)
	}
	if c.enum != nil {
		o = o.val("enum", c.enum)
	}
	if c.props != nil && c.typ == "OBJECT" {
		o = o.raw("properties", c.props)
	}
	if c.items != nil && c.typ == "ARRAY" {
		o = o.raw("items", c.items)
	}
	if c.anyOf != nil {
		o = o.raw("anyOf", c.anyOf)
	}
	// Gemini refuses a required name that is not a property.
	var required []string
	for _, n := range c.required {
		if c.names[n] {
			required = append(required, n)
		}
	}
	if len(required) > 0 {
		o = o.val("required", required)
	}
	if len(c.rest) > 1 {
		if len(o) > 1 {
			o = append(o, ',')
		}
		o = append(o, c.rest[1:]...)
	}
	return o.done(), true
}

// geminiParameters is how a chat tool's parameters go to Gemini: the key
// ("parameters" for Gemini's Schema, "parametersJsonSchema" for a schema
// it cannot say) and the value; key is "" for a function without
// parameters (none declared, or an object without properties).
func geminiParameters(schema gjson.Result) (key string, value []byte) {
	if !schema.IsObject() {
		return "", nil
	}
	t := schema.Get("type")
	props := schema.Get("properties")
	open := schema.Get("additionalProperties")
	if (!t.Exists() || t.String() == "object") && (!props.IsObject() || len(props.Map()) == 0) &&
		open.Type != gjson.True && !open.IsObject() && !hasUnsayable(schema) {
		return "", nil
	}
	if conv, ok := geminiSchema(schema, 0); ok {
		return "parameters", conv
	}
	return "parametersJsonSchema", []byte(schema.Raw)
}

// hasUnsayable reports a top-level keyword of geminiUnsayable (a
// reference or a combination that may add members).
func hasUnsayable(schema gjson.Result) bool {
	found := false
	schema.ForEach(func(k, _ gjson.Result) bool {
		key := k.String()
		found = geminiUnsayable[key] || key == "anyOf" || key == "oneOf"
		return !found
	})
	return found
}
