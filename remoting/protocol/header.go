// Package protocol holds the typed request and response headers and the JSON
// bodies that RocketMQ's servers and clients exchange, shared by our
// nameserver, broker and SDK.
//
// A header is a struct whose fields carry an `ext` tag naming the extFields
// key, as RocketMQ's CommandCustomHeader classes do:
//
//	type GetRouteInfoRequestHeader struct {
//		Topic string `ext:"topic,required"`
//	}
//
// EncodeHeader renders every field as text (RocketMQ sends all values as
// strings); DecodeHeader parses them back and names the key of any missing
// required field or unparsable value.
package protocol

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// ErrBadHeader means a header field that is missing or does not parse; the
// error text names the key.
var ErrBadHeader = errors.New("protocol: bad header field")

type fieldPlan struct {
	index     int
	key       string
	required  bool
	omitEmpty bool
	kind      reflect.Kind
}

var plans sync.Map // reflect.Type -> []fieldPlan

func planFor(t reflect.Type) []fieldPlan {
	if p, ok := plans.Load(t); ok {
		return p.([]fieldPlan)
	}
	var fields []fieldPlan
	for i := range t.NumField() {
		f := t.Field(i)
		tag, ok := f.Tag.Lookup("ext")
		if !ok || tag == "-" {
			continue
		}
		parts := strings.Split(tag, ",")
		fp := fieldPlan{index: i, key: parts[0], kind: f.Type.Kind()}
		for _, opt := range parts[1:] {
			switch opt {
			case "required":
				fp.required = true
			case "omitempty":
				fp.omitEmpty = true
			}
		}
		switch fp.kind {
		case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		default:
			panic(fmt.Sprintf("protocol: header field %s.%s has unsupported kind %s", t.Name(), f.Name, fp.kind))
		}
		fields = append(fields, fp)
	}
	plans.Store(t, fields)
	return fields
}

// EncodeHeader writes the tagged fields of the struct h points to into ext
// (created when nil) and returns it.
func EncodeHeader(h any, ext map[string]string) map[string]string {
	v := reflect.ValueOf(h).Elem()
	plan := planFor(v.Type())
	if ext == nil {
		ext = make(map[string]string, len(plan))
	}
	for _, fp := range plan {
		f := v.Field(fp.index)
		if fp.omitEmpty && f.IsZero() {
			continue
		}
		switch fp.kind {
		case reflect.String:
			ext[fp.key] = f.String()
		case reflect.Bool:
			ext[fp.key] = strconv.FormatBool(f.Bool())
		default:
			ext[fp.key] = strconv.FormatInt(f.Int(), 10)
		}
	}
	return ext
}

// DecodeHeader fills the struct h points to from ext. A missing required key,
// or a value that does not parse as the field's type, is an error wrapping
// ErrBadHeader that names the key. Booleans follow Java's Boolean.parseBoolean:
// "true" in any case is true, anything else false.
func DecodeHeader(ext map[string]string, h any) error {
	v := reflect.ValueOf(h).Elem()
	for _, fp := range planFor(v.Type()) {
		s, ok := ext[fp.key]
		if !ok {
			if fp.required {
				return fmt.Errorf("%w: the custom field <%s> is null", ErrBadHeader, fp.key)
			}
			continue
		}
		f := v.Field(fp.index)
		switch fp.kind {
		case reflect.String:
			f.SetString(s)
		case reflect.Bool:
			f.SetBool(strings.EqualFold(s, "true"))
		default:
			n, err := strconv.ParseInt(strings.TrimSpace(s), 10, f.Type().Bits())
			if err != nil {
				if s == "" && !fp.required {
					continue
				}
				return fmt.Errorf("%w: <%s> = %q is not a %d-bit integer", ErrBadHeader, fp.key, s, f.Type().Bits())
			}
			f.SetInt(n)
		}
	}
	return nil
}
