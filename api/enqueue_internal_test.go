package api

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// Every field of EnqueueBody reaches the jobs.EnqueueRequest it converts to (request), the one
// conversion POST /v1/runs and POST /v1/runs/bulk share: a field added to the body but not to
// the conversion fails here, not silently on one of the two routes.
func TestEnqueueBodyConvertsEveryField(t *testing.T) {
	t.Parallel()
	var body EnqueueBody
	bv := reflect.ValueOf(&body).Elem()
	for i := range bv.NumField() {
		f := bv.Field(i)
		switch {
		case bv.Type().Field(i).Name == "Input":
			f.Set(reflect.ValueOf(json.RawMessage(`{"a":1}`)))
		case f.Kind() == reflect.String:
			f.SetString("x")
		case f.Kind() == reflect.Bool:
			f.SetBool(true)
		case f.CanInt():
			f.SetInt(7)
		default:
			t.Fatalf("EnqueueBody.%s: a %s; teach this test to set it", bv.Type().Field(i).Name, f.Type())
		}
	}
	req, err := body.request()
	if err != nil {
		t.Fatal(err)
	}
	rv := reflect.ValueOf(req)
	byJSON := map[string]reflect.Value{"input": rv.FieldByName("Input")} // json:"-": sent as JSON, kept as msgpack
	for i := range rv.NumField() {
		if name, _, _ := strings.Cut(rv.Type().Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			byJSON[name] = rv.Field(i)
		}
	}
	for i := range bv.NumField() {
		name, _, _ := strings.Cut(bv.Type().Field(i).Tag.Get("json"), ",")
		got, ok := byJSON[name]
		if !ok {
			t.Errorf("EnqueueBody's %q has no field in jobs.EnqueueRequest", name)
			continue
		}
		if got.IsZero() {
			t.Errorf("EnqueueBody's %q is set, but request() leaves the enqueue's zero", name)
		}
	}
}
