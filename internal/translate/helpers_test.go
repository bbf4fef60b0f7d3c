package translate

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

func init() {
	now = func() time.Time { return time.Unix(1700000000, 0) }
}

// jsonEqual fails unless got and want hold the same JSON value.
func jsonEqual(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want is not JSON: %v\n%s", err, want)
	}
	if !reflect.DeepEqual(g, w) {
		gi, _ := json.MarshalIndent(g, "", "  ")
		wi, _ := json.MarshalIndent(w, "", "  ")
		t.Fatalf("JSON differs\n got: %s\nwant: %s", gi, wi)
	}
}

// field reads one field of a JSON body.
func field(b []byte, path string) gjson.Result { return gjson.GetBytes(b, path) }

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
