// Package conf holds the servers' configuration structs with every default in
// code, and loads them from RocketMQ properties-style files (key=value, '#'
// comments) or YAML, through viper. Keys keep RocketMQ's spelling
// (listenPort, kvConfigPath, brokerClusterName...).
//
// A config struct is a flat struct whose fields carry `mapstructure:"key"`
// tags; Load, Set, Get and Format work on any such struct, so each server's
// config file only declares fields, defaults and Validate. Groups of keys
// both servers share (TLSConfig) are embedded with `mapstructure:",squash"`
// and read as if declared in place. A field tagged `secret:"true"` (a key
// password) is never printed by Format.
package conf

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/sirupsen/logrus"
	"github.com/spf13/viper"
)

// Errors from the loader.
var (
	// ErrUnknownKey means a key that names no field of the config struct.
	ErrUnknownKey = errors.New("conf: unknown key")
	// ErrBadValue means a value that does not parse as its key's type, or
	// fails validation; the message names the key and the value.
	ErrBadValue = errors.New("conf: bad value")
	// ErrRead means the file could not be read or parsed.
	ErrRead = errors.New("conf: cannot read config file")
)

// Validator is implemented by config structs that check themselves after loading.
type Validator interface {
	Validate() error
}

// Load reads the file at path into cfg, a pointer to a config struct that
// already holds its defaults. Files ending in .yaml, .yml or .json are read as
// such; anything else (namesrv.conf, broker.properties...) as a Java
// properties file. Keys match the struct's tags case-insensitively. Unknown
// keys are logged as warnings and skipped (real broker.conf files carry dead
// keys); a value that does not parse is an error naming the key and value.
// Finally cfg.Validate runs, if cfg has it.
func Load(path string, cfg any, log logrus.FieldLogger) error {
	v := viper.NewWithOptions(viper.WithCodecRegistry(codecRegistry()))
	v.SetConfigFile(path)
	v.SetConfigType(formatOf(path))
	if err := v.ReadInConfig(); err != nil {
		return fmt.Errorf("%w %s: %w", ErrRead, path, err)
	}
	keys := v.AllKeys()
	sort.Strings(keys)
	for _, k := range keys {
		err := Set(cfg, k, valueText(v.Get(k)))
		if errors.Is(err, ErrUnknownKey) {
			if log != nil {
				log.WithFields(logrus.Fields{"file": path, "key": k}).Warn("ignoring unknown config key")
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	if tf, ok := cfg.(tlsFileHolder); ok {
		if err := loadTLSFile(tf.tlsFile(), cfg, log); err != nil {
			return err
		}
	}
	if val, ok := cfg.(Validator); ok {
		if err := val.Validate(); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return nil
}

// loadOrDefault returns def with the file at path loaded over it (Load), or
// def validated when path is "": what each Load*Config does for its type.
func loadOrDefault[C any, P interface {
	*C
	Validator
}](def C, path string, log logrus.FieldLogger) (C, error) {
	if path == "" {
		return def, P(&def).Validate()
	}
	err := Load(path, P(&def), log)
	return def, err
}

func formatOf(path string) string {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml":
		return "yaml"
	case ".json":
		return "json"
	}
	return "properties"
}

// valueText turns what viper decoded (strings from properties, typed scalars
// from YAML) back into text, so one parser handles both.
func valueText(x any) string {
	switch t := x.(type) {
	case nil:
		return ""
	case string:
		return t
	case []any:
		parts := make([]string, len(t))
		for i, e := range t {
			parts[i] = valueText(e)
		}
		return strings.Join(parts, ";")
	}
	return fmt.Sprint(x)
}

func codecRegistry() *viper.DefaultCodecRegistry {
	r := viper.NewCodecRegistry()
	_ = r.RegisterCodec("properties", propertiesCodec{})
	return r
}

type field struct {
	key    string
	index  []int // reflect.Value.FieldByIndex: through embedded groups
	secret bool
}

// fieldsOf lists the tagged fields of the struct cfg points to, in
// declaration order, those of squashed embedded structs in their place.
func fieldsOf(cfg any) (reflect.Value, []field, error) {
	rv := reflect.ValueOf(cfg)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return reflect.Value{}, nil, fmt.Errorf("conf: want a pointer to a config struct, got %T", cfg)
	}
	sv := rv.Elem()
	return sv, appendFields(nil, sv.Type(), nil), nil
}

func appendFields(fs []field, st reflect.Type, prefix []int) []field {
	for i := range st.NumField() {
		sf := st.Field(i)
		tag := sf.Tag.Get("mapstructure")
		name, opts, _ := strings.Cut(tag, ",")
		if !sf.IsExported() || name == "-" {
			continue
		}
		index := append(append([]int(nil), prefix...), i)
		if name == "" && opts == "squash" && sf.Anonymous && sf.Type.Kind() == reflect.Struct {
			fs = appendFields(fs, sf.Type, index)
			continue
		}
		if name == "" {
			continue
		}
		fs = append(fs, field{key: name, index: index, secret: sf.Tag.Get("secret") == "true"})
	}
	return fs
}

func lookup(cfg any, key string) (reflect.Value, string, error) {
	sv, fs, err := fieldsOf(cfg)
	if err != nil {
		return reflect.Value{}, "", err
	}
	for _, f := range fs {
		if strings.EqualFold(f.key, key) {
			return sv.FieldByIndex(f.index), f.key, nil
		}
	}
	return reflect.Value{}, "", fmt.Errorf("%w %q", ErrUnknownKey, key)
}

// Set assigns one key from its text form, as a properties file line would.
// The key matches case-insensitively; the text is trimmed.
func Set(cfg any, key, value string) error {
	f, name, err := lookup(cfg, key)
	if err != nil {
		return err
	}
	value = strings.TrimSpace(value)
	bad := func(want string) error {
		return fmt.Errorf("%w: %s=%q is not %s", ErrBadValue, name, value, want)
	}
	switch f.Kind() {
	case reflect.String:
		f.SetString(value)
	case reflect.Bool:
		b, err := strconv.ParseBool(value)
		if err != nil {
			return bad("true or false")
		}
		f.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(value, 10, f.Type().Bits())
		if err != nil {
			return bad(fmt.Sprintf("a %d-bit integer", f.Type().Bits()))
		}
		f.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(value, 10, f.Type().Bits())
		if err != nil {
			return bad(fmt.Sprintf("an unsigned %d-bit integer", f.Type().Bits()))
		}
		f.SetUint(n)
	case reflect.Float32, reflect.Float64:
		n, err := strconv.ParseFloat(value, f.Type().Bits())
		if err != nil {
			return bad("a number")
		}
		f.SetFloat(n)
	default:
		return fmt.Errorf("conf: key %s has unsupported type %s", name, f.Type())
	}
	return nil
}

// Get returns the text form of one key, and false when cfg has no such key.
func Get(cfg any, key string) (string, bool) {
	f, _, err := lookup(cfg, key)
	if err != nil {
		return "", false
	}
	return fmt.Sprint(f.Interface()), true
}

// Keys returns cfg's keys in declaration order, spelled as their tags.
func Keys(cfg any) []string {
	_, fs, err := fieldsOf(cfg)
	if err != nil {
		return nil
	}
	keys := make([]string, len(fs))
	for i, f := range fs {
		keys[i] = f.key
	}
	return keys
}

// CanonicalKey returns key spelled as cfg's tag, and false when cfg has no
// such key.
func CanonicalKey(cfg any, key string) (string, bool) {
	_, name, err := lookup(cfg, key)
	return name, err == nil
}

// Redacted is what Format prints for a set secret.
const Redacted = "******"

// Format renders cfg as a properties file, one key=value line per key in
// declaration order: what `-p` prints and GET_*_CONFIG returns. A secret
// that is set prints as Redacted: GET_BROKER_CONFIG answers anyone the ACL
// lets through.
func Format(cfg any) string {
	sv, fs, err := fieldsOf(cfg)
	if err != nil {
		return ""
	}
	var b strings.Builder
	for _, f := range fs {
		v := fmt.Sprint(sv.FieldByIndex(f.index).Interface())
		if f.secret && v != "" {
			v = "******"
		}
		b.WriteString(f.key)
		b.WriteByte('=')
		b.WriteString(escapePropertyValue(v))
		b.WriteByte('\n')
	}
	return b.String()
}
