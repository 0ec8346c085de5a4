package jobs

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
	"time"
)

// Kinds of declaration the engine knows. Other kinds are accepted and shown as they are.
const (
	// DeclareJob is a job definition with its resolved configuration (JobDeclaration).
	DeclareJob = "job"
	// DeclareBackfill is a backfill a job declares through Declarer.
	DeclareBackfill = "backfill"
	// DeclareSchedule is a schedule added with Registry.Declare.
	DeclareSchedule = "schedule"
)

// Declaration is one thing a worker declares it hosts, in its manifest: the engine persists it
// with the workers that declared it and serves it (jobs manifest, GET /v1/manifest), and
// enforces the rules of jobs from it. Kind says what it is ("job", "backfill", "schedule", …),
// Name names it within its kind, Data is its configuration as JSON, and Checksum is a digest of
// Data, so two workers that declare the same name differently are told apart.
type Declaration struct {
	Kind     string          `json:"kind" msgpack:"kind"`
	Name     string          `json:"name" msgpack:"name"`
	Checksum string          `json:"checksum" msgpack:"checksum"`
	Data     json.RawMessage `json:"data,omitempty" msgpack:"data,omitempty"`
}

// NewDeclaration builds a declaration of data (encoded as JSON), with its checksum.
func NewDeclaration(kind, name string, data any) (Declaration, error) {
	b, err := json.Marshal(data)
	if err != nil {
		return Declaration{}, Wrap(CodeJobDefinition, err, "declaration %s %q", kind, name)
	}
	d := Declaration{Kind: kind, Name: name, Data: b, Checksum: Checksum(b)}
	return d, d.Validate()
}

// Checksum is the digest of a declaration's data: hex SHA-256, truncated to 16 bytes.
func Checksum(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:16])
}

// Validate refuses a declaration no store can hold or the engine could not read: an empty or
// invalid kind or name, data that is not JSON, a checksum that does not match the data.
func (d Declaration) Validate() error {
	switch {
	case d.Kind == "" || d.Name == "":
		return Errorf(CodeJobDefinition, "a declaration needs a kind and a name (got %q, %q)", d.Kind, d.Name)
	case len(d.Kind) > 64:
		return Errorf(CodeJobDefinition, "declaration kind %q is over 64 bytes", d.Kind[:64])
	}
	for field, v := range map[string]string{"declaration kind": d.Kind, "declaration name": d.Name, "checksum": d.Checksum} {
		if err := ValidIdentifier(field, v); err != nil {
			return Errorf(CodeJobDefinition, "%s", err.(*Error).Message)
		}
	}
	if len(d.Data) > 0 && (!json.Valid(d.Data) || ValidJSONText(d.Data) != nil) {
		return Errorf(CodeJobDefinition, "declaration %s %q: data is not valid JSON", d.Kind, d.Name)
	}
	if len(d.Data) > 64<<10 {
		return Errorf(CodeJobDefinition, "declaration %s %q: data is %d bytes; the limit is 65536", d.Kind, d.Name, len(d.Data))
	}
	if d.Checksum != Checksum(d.Data) {
		return Errorf(CodeJobDefinition, "declaration %s %q: checksum %q does not match its data", d.Kind, d.Name, d.Checksum)
	}
	if d.Kind == DeclareSchedule || d.Kind == DeclareBackfill {
		// The engine reads these by the name in their data (the schedule it fires, the backfill
		// it shows), and the manifest files them by the entry's: an entry whose data named another
		// would stand in for that one, or, beside it, make the scheduler refuse both as declared
		// twice.
		var named struct {
			Name *string `json:"name"`
		}
		if json.Unmarshal(d.Data, &named) != nil || named.Name == nil || *named.Name != d.Name {
			return Errorf(CodeJobDefinition, "declaration %s %q: its data does not name it (a %s's data holds its name)", d.Kind, d.Name, d.Kind)
		}
	}
	return nil
}

// Declarer is implemented by a Definition that declares more than its job: a backfill is a job
// that also declares a "backfill" entry. Its declarations join the worker's manifest beside the
// job's own.
type Declarer interface {
	Declarations() []Declaration
}

// JobDeclaration is the Data of a "job" declaration: the job's resolved configuration, as the
// engine enforces it.
type JobDeclaration struct {
	Queue       string        `json:"queue"`
	Attempts    int           `json:"attempts"`
	Backoff     Backoff       `json:"backoff"`
	Delay       time.Duration `json:"delay"`
	MaxDelay    time.Duration `json:"maxDelay,omitempty"`
	Jitter      bool          `json:"jitter,omitempty"`
	Timeout     time.Duration `json:"timeout,omitempty"`
	StepTimeout time.Duration `json:"stepTimeout,omitempty"`
	EventPoll   time.Duration `json:"eventPoll"`
	Concurrency int           `json:"concurrency,omitempty"`
	// KeyedConcurrency and KeyedRate: see keyed.go.
	KeyedConcurrency *KeyedLimit `json:"keyedConcurrency,omitempty"`
	KeyedRate        *KeyedLimit `json:"keyedRate,omitempty"`
	// NoTenant is true for a job declared NoTenant: the engine refuses at enqueue a run of it that
	// names a tenant, when every current declaration of the job says so. Left out when false, so
	// that a tenant-scoped job's declaration, and its checksum, read as they did before the field.
	NoTenant bool `json:"noTenant,omitempty"`
}

// DeclareConfig is the JobDeclaration of a job's configuration.
func DeclareConfig(c Config) JobDeclaration {
	r := c.Retry.withDefaults()
	return JobDeclaration{Queue: c.Queue, Attempts: r.Attempts, Backoff: r.Backoff, Delay: r.Delay, MaxDelay: r.MaxDelay,
		Jitter: r.Jitter, Timeout: c.Timeout, StepTimeout: c.StepTimeout, EventPoll: c.EventPoll, Concurrency: c.Concurrency,
		KeyedConcurrency: c.KeyedConcurrency, KeyedRate: c.KeyedRate}
}

// Declare adds a free-standing declaration to the registry's manifest (a schedule, say). A
// declaration of the same kind and name replaces the earlier one; kind "job" is the registry's
// own and is refused.
func (r *Registry) Declare(d Declaration) error {
	if d.Checksum == "" {
		d.Checksum = Checksum(d.Data)
	}
	if err := d.Validate(); err != nil {
		return err
	}
	if d.Kind == DeclareJob {
		return Errorf(CodeJobDefinition, "declaration %q: kind %q is declared by Register, not Declare", d.Name, DeclareJob)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.extra == nil {
		r.extra = map[[2]string]Declaration{}
	}
	r.extra[[2]string{d.Kind, d.Name}] = d
	return nil
}

// Manifest returns every declaration of the registry, sorted by kind and name: each job (kind
// "job", its JobDeclaration), what its definition declares through Declarer, and what Declare
// added.
func (r *Registry) Manifest() ([]Declaration, error) {
	seen := map[[2]string]bool{}
	var out []Declaration
	add := func(d Declaration) error {
		if d.Checksum == "" {
			d.Checksum = Checksum(d.Data)
		}
		if err := d.Validate(); err != nil {
			return err
		}
		k := [2]string{d.Kind, d.Name}
		if seen[k] {
			return Errorf(CodeJobDefinition, "%s %q is declared twice", d.Kind, d.Name)
		}
		seen[k] = true
		out = append(out, d)
		return nil
	}
	for _, def := range r.All() {
		jd := DeclareConfig(def.Config())
		if t, ok := def.(interface{ declaresNoTenant() bool }); ok {
			jd.NoTenant = t.declaresNoTenant()
		}
		d, err := NewDeclaration(DeclareJob, def.Name(), jd)
		if err != nil {
			return nil, err
		}
		if err := add(d); err != nil {
			return nil, err
		}
		if dd, ok := def.(Declarer); ok {
			for _, x := range dd.Declarations() {
				if x.Kind == DeclareJob {
					return nil, Errorf(CodeJobDefinition, "job %q declares a %q entry; its own is declared for it", def.Name(), DeclareJob)
				}
				if err := add(x); err != nil {
					return nil, err
				}
			}
		}
	}
	r.mu.RLock()
	extra := make([]Declaration, 0, len(r.extra))
	for _, d := range r.extra {
		extra = append(extra, d)
	}
	r.mu.RUnlock()
	for _, d := range extra {
		if err := add(d); err != nil {
			return nil, err
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}
