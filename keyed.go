package jobs

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ultimat3/jobs/codec"
)

// Keyed limits hold across the whole fleet per value of a key: at most N runs of a job running
// at once per customer (ConcurrencyBy), or at most N runs of it started per period per customer
// (RateBy). The engine enforces both at claim, from the job's declaration, never from what a
// worker's poll says. So the key must be something the engine can read itself, from the run it
// stores, and a caller cannot pick it: the run's tenant (ByTenant), or a field of the run's input
// (ByInput), read from the stored input. A value the engine cannot read (a sealed input, a
// missing field) is refused at enqueue rather than let through uncounted.

// Key forms of a keyed limit.
const (
	// KeyTenant counts by the run's tenant. Runs of no tenant are not limited by it, as with a
	// worker's per-tenant limits.
	KeyTenant = "tenant"
	// KeyInputPrefix starts a key that counts by a field of the input: "input.customer.id".
	KeyInputPrefix = "input."
	// MaxKeyValue bounds the length of a key's value read from an input, in bytes.
	MaxKeyValue = 256
)

// ByTenant is the key of a limit counted per tenant.
func ByTenant() string { return KeyTenant }

// ByInput is the key of a limit counted per value of a field of the input, named by a dotted
// path through its maps ("customer.id"; the input's field names are its json tags). For a run
// of a tenant the value counts within that tenant (per tenant, per value): the enqueuer wrote
// the input, so a run must not spend another tenant's slots or starts. Runs of no tenant count
// per value together.
func ByInput(path string) string { return KeyInputPrefix + path }

// KeyedLimit is a fleet-wide limit per value of Key: Limit runs running at once, or, with Per
// set, Limit runs started per Per.
type KeyedLimit struct {
	Key   string        `json:"key"`
	Limit int           `json:"limit"`
	Per   time.Duration `json:"per,omitempty"`
}

// String says the limit for people: "2 per input.customer" or "10 per tenant per 1m0s".
func (k KeyedLimit) String() string {
	if k.Per > 0 {
		return fmt.Sprintf("%d starts per %s per %s", k.Limit, k.Key, k.Per)
	}
	return fmt.Sprintf("%d running per %s", k.Limit, k.Key)
}

// ConcurrencyBy caps how many runs of the job run at once across the fleet per value of key
// (ByTenant or ByInput). The engine enforces it with slot rows in the store, like Concurrency.
// Must be ≥ 1.
func ConcurrencyBy(key string, n int) Option {
	return func(c *Config) error {
		k := KeyedLimit{Key: key, Limit: n}
		if err := k.Validate("concurrencyBy"); err != nil {
			return err
		}
		c.KeyedConcurrency = &k
		return nil
	}
}

// RateBy caps how many runs of the job start per period across the fleet per value of key
// (ByTenant or ByInput): at most n in any window of length per. A run starts at its first claim;
// a retry, or a resume after a sleep or an event, is not a new start. The engine keeps the
// count in the store, so a restart of the engine grants no fresh allowance. n ≥ 1, per > 0.
func RateBy(key string, n int, per time.Duration) Option {
	return func(c *Config) error {
		k := KeyedLimit{Key: key, Limit: n, Per: per}
		if per <= 0 {
			return Errorf(CodeJobDefinition, "rateBy: the period must be positive, got %s", per)
		}
		if err := k.Validate("rateBy"); err != nil {
			return err
		}
		c.KeyedRate = &k
		return nil
	}
}

// Validate refuses a keyed limit that cannot work: an unknown key form, an empty path or path
// segment, a limit below 1, a negative period.
func (k KeyedLimit) Validate(what string) error {
	if k.Limit < 1 {
		return Errorf(CodeJobDefinition, "%s: the limit must be at least 1, got %d", what, k.Limit)
	}
	if k.Per < 0 {
		return Errorf(CodeJobDefinition, "%s: the period must be positive, got %s", what, k.Per)
	}
	if k.Key == KeyTenant {
		return nil
	}
	path, ok := strings.CutPrefix(k.Key, KeyInputPrefix)
	if !ok {
		return Errorf(CodeJobDefinition, "%s: key %q is neither %q nor %q followed by a field path", what, k.Key, KeyTenant, KeyInputPrefix)
	}
	if err := ValidIdentifier("key", k.Key); err != nil {
		return Errorf(CodeJobDefinition, "%s: %s", what, err.(*Error).Message)
	}
	for _, seg := range strings.Split(path, ".") {
		if seg == "" {
			return Errorf(CodeJobDefinition, "%s: key %q has an empty field name", what, k.Key)
		}
	}
	return nil
}

// KeyValue reads the value of key for a run of the given tenant and stored (msgpack) input.
// counted is false for a tenant key and a run of no tenant, which no tenant limit counts. An
// input key whose field is missing, is named twice on its path, is not a string, number or bool,
// is longer than MaxKeyValue, or lies in an input sealed by a codec is X_FLOW_KEY.
func KeyValue(key, tenant string, noTenant bool, input []byte) (value string, counted bool, err error) {
	if key == KeyTenant {
		if noTenant || tenant == "" {
			return "", false, nil
		}
		return tenant, true, nil
	}
	path, ok := strings.CutPrefix(key, KeyInputPrefix)
	if !ok {
		return "", false, Errorf(CodeFlowKey, "key %q is neither %q nor an input field", key, KeyTenant)
	}
	if what, sealed := codec.Describe(input); sealed {
		// The engine never holds a codec's key: it cannot read a field of a sealed input, and
		// counting such runs under one shared value would throttle every customer as one.
		return "", false, Errorf(CodeFlowKey, "the input is %s, so the engine cannot read field %q that the job's keyed limit counts by: key the limit by tenant (jobs.ByTenant) for sealed inputs", what, path)
	}
	v, err := inputField(input, strings.Split(path, "."))
	if err != nil {
		return "", false, err
	}
	if len(v) > MaxKeyValue {
		return "", false, Errorf(CodeFlowKey, "input field %q is %d bytes long; a key's value is at most %d", path, len(v), MaxKeyValue)
	}
	return v, true, nil
}

// inputField walks the input's maps along path and renders the scalar it ends on.
//
// Each map on the path is read to its end, and a field of the path named twice in one map is
// refused: msgpack allows it, and a Go decoder keeps the last copy, so a walk that stopped at the
// first would count the run under a value its body never sees. Every run of one customer could
// then name a decoy of its own first and run past the customer's cap or rate.
func inputField(input []byte, path []string) (string, error) {
	r := bytes.NewReader(input)
	dec := msgpack.NewDecoder(r)
	for i, seg := range path {
		n, err := dec.DecodeMapLen()
		if err != nil || n < 0 {
			return "", Errorf(CodeFlowKey, "the input has no field %q: %s is not an object", strings.Join(path, "."), describeAt(path[:i]))
		}
		at := -1 // where the field's value starts in input
		for range n {
			k, err := dec.DecodeInterface()
			if err != nil {
				return "", Wrap(CodeFlowKey, err, "the input does not decode")
			}
			if s, ok := k.(string); ok && s == seg {
				if at >= 0 {
					return "", Errorf(CodeFlowKey, "the input names field %q twice; a keyed limit counts by one value", strings.Join(path[:i+1], "."))
				}
				at = len(input) - r.Len() // the decoder reads r directly (it is an io.ByteScanner)
			}
			if err := dec.Skip(); err != nil {
				return "", Wrap(CodeFlowKey, err, "the input does not decode")
			}
		}
		if at < 0 {
			return "", Errorf(CodeFlowKey, "the input has no field %q, which the job's keyed limit counts by", strings.Join(path, "."))
		}
		input = input[at:]
		r.Reset(input)
		dec.Reset(r)
	}
	v, err := dec.DecodeInterface()
	if err != nil {
		return "", Wrap(CodeFlowKey, err, "the input does not decode")
	}
	switch x := v.(type) {
	case string:
		if x == "" {
			return "", Errorf(CodeFlowKey, "input field %q is empty; a keyed limit needs a value to count by", strings.Join(path, "."))
		}
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case int8, int16, int32, int64, uint8, uint16, uint32, uint64:
		return fmt.Sprint(x), nil
	case float32, float64:
		return fmt.Sprint(x), nil
	}
	return "", Errorf(CodeFlowKey, "input field %q holds %T; a keyed limit counts by a string, number or bool", strings.Join(path, "."), v)
}

func describeAt(path []string) string {
	if len(path) == 0 {
		return "the input"
	}
	return fmt.Sprintf("field %q", strings.Join(path, "."))
}
