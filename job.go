package jobs

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// DefaultQueue is the queue of a job that names none.
const DefaultQueue = "default"

// DefaultEventPoll bounds how long a run waiting for an event parks in a worker before the wait
// is looked at again.
const DefaultEventPoll = 30 * time.Second

// Tenant says which tenant a run of a job acts under: a function of the input (TenantFrom) or
// explicitly none (NoTenant). Define takes one as a required argument, so leaving it out does
// not compile; its zero value is refused with X_JOB_TENANT_REQUIRED.
type Tenant[In any] struct {
	from func(In) string
	none bool
}

// TenantFrom derives the run's tenant from its input; ctx.Actor().Tenant is that tenant.
func TenantFrom[In any](from func(In) string) Tenant[In] { return Tenant[In]{from: from} }

// NoTenant declares that the job belongs to no tenant: its runs carry none.
func NoTenant[In any]() Tenant[In] { return Tenant[In]{none: true} }

// Config is a job's resolved declaration.
type Config struct {
	Queue       string        `json:"queue"`
	Retry       RetryPolicy   `json:"retry"`
	Timeout     time.Duration `json:"timeout,omitempty"`
	StepTimeout time.Duration `json:"stepTimeout,omitempty"`
	EventPoll   time.Duration `json:"eventPoll"`
	// Concurrency is the fleet-wide cap on running runs of the job; 0 means none declared.
	Concurrency int `json:"concurrency,omitempty"`
	// KeyedConcurrency and KeyedRate are fleet-wide limits per value of a key (keyed.go).
	KeyedConcurrency *KeyedLimit `json:"keyedConcurrency,omitempty"`
	KeyedRate        *KeyedLimit `json:"keyedRate,omitempty"`
}

// Option sets one optional field of a job's declaration.
//
// Options are functions rather than a Config struct literal because the engine must refuse an
// explicit zero (Concurrency(0), StepTimeout(0)), and a struct field cannot tell "set to 0" from
// "left out".
type Option func(*Config) error

// Queue puts the job's runs on a named queue. Optional: default "default".
func Queue(name string) Option {
	return func(c *Config) error {
		if name == "" {
			return Errorf(CodeJobDefinition, "queue name is empty")
		}
		if err := ValidIdentifier("queue name", name); err != nil {
			return Errorf(CodeJobDefinition, "%s", err.(*Error).Message)
		}
		c.Queue = name
		return nil
	}
}

// Retry sets the retry policy. Optional: default DefaultRetryPolicy.
func Retry(p RetryPolicy) Option {
	return func(c *Config) error {
		if err := p.validate(); err != nil {
			return err
		}
		c.Retry = p.withDefaults()
		return nil
	}
}

// Timeout bounds each attempt: at the deadline the run's context is cancelled, then the attempt
// fails with X_TIMEOUT. Optional: default no deadline. Must be > 0.
func Timeout(d time.Duration) Option {
	return positive("timeout", d, func(c *Config) { c.Timeout = d })
}

// StepTimeout bounds each Step: at the deadline the step's context is cancelled, then the step
// fails with X_STEP_TIMEOUT. Optional: default none. Must be > 0.
func StepTimeout(d time.Duration) Option {
	return positive("stepTimeout", d, func(c *Config) { c.StepTimeout = d })
}

// EventPoll bounds how long a run waiting for an event parks between looks at its wait.
// Optional: default 30s. Must be > 0.
func EventPoll(d time.Duration) Option {
	return positive("eventPoll", d, func(c *Config) { c.EventPoll = d })
}

// Concurrency caps how many runs of the job run at once across the whole fleet, enforced by
// lease rows in the store. Optional: default no cap. Must be ≥ 1.
func Concurrency(n int) Option {
	return func(c *Config) error {
		if n < 1 {
			return Errorf(CodeJobDefinition, "concurrency must be at least 1, got %d", n)
		}
		c.Concurrency = n
		return nil
	}
}

func positive(field string, d time.Duration, set func(*Config)) Option {
	return func(c *Config) error {
		if d <= 0 {
			// A zero would read as "no ceiling", the opposite of what the author wrote.
			return Errorf(CodeJobDefinition, "%s must be positive, got %s", field, d)
		}
		set(c)
		return nil
	}
}

// Definition is a job as the worker and the engine see it: untyped, over encoded values.
type Definition interface {
	Name() string
	Config() Config
	// Identity derives the idempotency key and tenant from an encoded input.
	Identity(input []byte) (Identity, error)
	// Execute decodes the input, runs the body and encodes its result.
	Execute(ctx *Ctx, input []byte) ([]byte, error)
}

// Identity is what an enqueue must name besides the input.
type Identity struct {
	Key      string
	Tenant   string
	NoTenant bool
}

// Job is a typed job definition: input In, result Out.
type Job[In, Out any] struct {
	name   string
	key    func(In) string
	tenant Tenant[In]
	body   func(*Ctx, In) (Out, error)
	cfg    Config
}

// Define declares a job. The idempotency key and the tenant are required arguments: there is no
// way to define a job that cannot be deduped or that silently runs as nobody.
//
//	var Onboard = jobs.MustDefine("onboard-org",
//		func(in OnboardInput) string { return "onboard:" + in.OrgID },
//		jobs.TenantFrom(func(in OnboardInput) string { return in.OrgID }),
//		onboard,
//		jobs.Retry(jobs.RetryPolicy{Attempts: 5, Backoff: jobs.Exponential}),
//	)
func Define[In, Out any](name string, key func(In) string, tenant Tenant[In], body func(*Ctx, In) (Out, error), opts ...Option) (*Job[In, Out], error) {
	if name == "" {
		return nil, Errorf(CodeJobDefinition, "job name is empty")
	}
	// Refused here, at start-up, rather than by the store at the first enqueue, or never: a
	// worker would otherwise poll for a name nothing can enqueue.
	if err := ValidIdentifier("job name", name); err != nil {
		return nil, Errorf(CodeJobDefinition, "%s", err.(*Error).Message)
	}
	if key == nil {
		return nil, Errorf(CodeJobIdempotencyRequired, "job %q has no idempotency key function", name)
	}
	if tenant.from == nil && !tenant.none {
		return nil, Errorf(CodeJobTenantRequired, "job %q declares no tenant: use jobs.TenantFrom(...) or jobs.NoTenant", name)
	}
	if body == nil {
		return nil, Errorf(CodeJobDefinition, "job %q has no body", name)
	}
	// A type msgpack cannot encode (a channel, a function, a struct holding one) would fail only
	// at run time: its input at the first enqueue, its result after the body and its side
	// effects ran, terminally. Its zero value tells at start-up. (A value of an interface type,
	// or behind a nil pointer, is only known at run time.)
	if _, err := Encode(*new(In)); err != nil {
		return nil, Errorf(CodeJobDefinition, "job %q: its input type %T cannot be encoded: %v", name, *new(In), err)
	}
	if _, err := Encode(*new(Out)); err != nil {
		return nil, Errorf(CodeJobDefinition, "job %q: its result type %T cannot be encoded: %v", name, *new(Out), err)
	}
	cfg := Config{Queue: DefaultQueue, Retry: DefaultRetryPolicy, EventPoll: DefaultEventPoll}
	for i, o := range opts {
		if o == nil {
			return nil, Errorf(CodeJobDefinition, "job %q: option %d is nil", name, i)
		}
		if err := o(&cfg); err != nil {
			var e *Error
			if ok := asError(err, &e); ok {
				e.Message = fmt.Sprintf("job %q: %s", name, e.Message)
			}
			return nil, err
		}
	}
	return &Job[In, Out]{name: name, key: key, tenant: tenant, body: body, cfg: cfg}, nil
}

// MustDefine is Define for package-level declarations: it panics on a refused definition, so a
// bad declaration fails at start-up, not on the fourth attempt.
func MustDefine[In, Out any](name string, key func(In) string, tenant Tenant[In], body func(*Ctx, In) (Out, error), opts ...Option) *Job[In, Out] {
	j, err := Define(name, key, tenant, body, opts...)
	if err != nil {
		panic(err)
	}
	return j
}

func (j *Job[In, Out]) Name() string   { return j.name }
func (j *Job[In, Out]) Config() Config { return j.cfg }

func (j *Job[In, Out]) identity(in In) (Identity, error) {
	id := Identity{Key: j.key(in), NoTenant: j.tenant.none}
	if id.Key == "" {
		return id, Errorf(CodeJobIdempotencyRequired, "job %q: the idempotency key of this input is empty", j.name)
	}
	if !j.tenant.none {
		id.Tenant = j.tenant.from(in)
		if id.Tenant == "" {
			return id, Errorf(CodeJobTenantRequired, "job %q: the tenant of this input is empty", j.name)
		}
	}
	return id, nil
}

// Identity implements Definition.
func (j *Job[In, Out]) Identity(input []byte) (Identity, error) {
	var in In
	if err := Decode(input, &in); err != nil {
		return Identity{}, err
	}
	return j.identity(in)
}

// declaresNoTenant reports whether the job was declared NoTenant, for its manifest entry. A
// Definition that wraps a Job without embedding it declares a tenant-scoped job, which the engine
// never refuses at enqueue; its worker still refuses a run with a tenant (Execute).
func (j *Job[In, Out]) declaresNoTenant() bool { return j.tenant.none }

// Execute implements Definition. A run whose tenant is not the one the job derives from its
// input is refused before the body runs (X_JOB_TENANT_MISMATCH): an untyped enqueue names the
// tenant beside the input, and a caller scoped to one tenant could otherwise have the body act
// on another tenant's input (an org id in it) under its own tenant's name. A run carrying a
// tenant for a job declared NoTenant is refused the same way: such a job is fleet-wide work (an
// all-tenants backfill, a purge), and a caller scoped to one tenant, which must name its tenant
// on every enqueue, could otherwise have it run over every tenant. No path of the library
// gives a tenant to such a run (a typed enqueue, a child, the outbox, a schedule built from the
// job and a backfill pass all take the job's own tenancy); only an untyped enqueue naming one
// can (the API, the CLI, a bulk item, a schedule declared by hand).
func (j *Job[In, Out]) Execute(ctx *Ctx, input []byte) ([]byte, error) {
	var in In
	if err := Decode(input, &in); err != nil {
		return nil, err
	}
	if j.tenant.none {
		if got := ctx.Actor().Tenant; got != "" {
			return nil, Errorf(CodeJobTenantMismatch, "run %s of %q carries tenant %q, but the job is declared for no tenant (jobs.NoTenant); the body did not run",
				ctx.Run().RunID, j.name, got)
		}
	} else if want, got := j.tenant.from(in), ctx.Actor().Tenant; want != got {
		return nil, Errorf(CodeJobTenantMismatch, "run %s of %q carries tenant %q, but the job derives tenant %q from its input; the body did not run",
			ctx.Run().RunID, j.name, got, want)
	}
	out, err := j.body(ctx, in)
	if err != nil {
		return nil, err
	}
	return Encode(out)
}

// Request builds the enqueue request for an input.
func (j *Job[In, Out]) Request(in In) (EnqueueRequest, error) {
	id, err := j.identity(in)
	if err != nil {
		return EnqueueRequest{}, err
	}
	input, err := Encode(in)
	if err != nil {
		return EnqueueRequest{}, err
	}
	return EnqueueRequest{Job: j.name, Queue: j.cfg.Queue, Input: input, Key: id.Key, Tenant: id.Tenant, NoTenant: id.NoTenant}, nil
}

// Enqueue starts a run of the job, or returns the live run holding the same idempotency key.
func (j *Job[In, Out]) Enqueue(ctx context.Context, c Enqueuer, in In) (EnqueueResult, error) {
	req, err := j.Request(in)
	if err != nil {
		return EnqueueResult{}, err
	}
	return c.Enqueue(ctx, req)
}

// Result decodes a completed run's result.
func (j *Job[In, Out]) Result(result []byte) (Out, error) {
	var out Out
	err := Decode(result, &out)
	return out, err
}

// EnqueueRequest is an untyped enqueue: the engine's API, the CLI and the HTTP client send it.
type EnqueueRequest struct {
	Job        string        `json:"job" msgpack:"job"`
	Queue      string        `json:"queue,omitempty" msgpack:"queue,omitempty"`
	Input      []byte        `json:"-" msgpack:"input"`
	Key        string        `json:"key" msgpack:"key"`
	Tenant     string        `json:"tenant,omitempty" msgpack:"tenant,omitempty"`
	NoTenant   bool          `json:"noTenant,omitempty" msgpack:"no_tenant,omitempty"`
	EnqueuedBy string        `json:"enqueuedBy,omitempty" msgpack:"enqueued_by,omitempty"`
	Delay      time.Duration `json:"delay,omitempty" msgpack:"delay,omitempty"`
	// DedupeID, when set, names the request itself (an outbox row, a run's durable enqueue): the
	// engine creates at most one run per DedupeID within its dedupe retention, even after that
	// run finished, so a resend of the same request never runs the job twice. An id beginning
	// "call:" is the engine's own (a run's durable calls); the HTTP API refuses one.
	DedupeID string `json:"dedupeId,omitempty" msgpack:"dedupe_id,omitempty"`
	// TraceParent and TraceState are the W3C trace context the run is enqueued under (trace.go).
	// Left empty, the engine takes them from the enqueue's ctx (the caller's current span).
	TraceParent string `json:"traceparent,omitempty" msgpack:"traceparent,omitempty"`
	TraceState  string `json:"tracestate,omitempty" msgpack:"tracestate,omitempty"`
	// Priority orders the run within its queue, from MinPriority to MaxPriority (0 by default):
	// each level is a head start of PriorityStep in the claim order (see priority.go).
	Priority int `json:"priority,omitempty" msgpack:"priority,omitempty"`
}

// Validate refuses a request that names no key or no tenant.
func (r EnqueueRequest) Validate() error {
	switch {
	case r.Job == "":
		return Errorf(CodeBadRequest, "enqueue names no job")
	case r.Key == "":
		return Errorf(CodeJobIdempotencyRequired, "enqueue of %q names no idempotency key", r.Job)
	case r.Tenant == "" && !r.NoTenant:
		return Errorf(CodeJobTenantRequired, "enqueue of %q names neither a tenant nor no-tenant", r.Job)
	case r.Tenant != "" && r.NoTenant:
		return Errorf(CodeBadRequest, "enqueue of %q names a tenant and no-tenant", r.Job)
	case r.Delay < 0 || math.IsNaN(float64(r.Delay)):
		return Errorf(CodeBadRequest, "enqueue of %q has a negative delay", r.Job)
	case r.Delay > WakeHorizon:
		// As for a sleep: no store is asked to hold a wake-up past the horizon (SQLite's times
		// end in 2262, so a longer delay read back earlier there than elsewhere).
		return Errorf(CodeBadRequest, "enqueue of %q has a delay of %s; the limit is %s (100 years)", r.Job, r.Delay, WakeHorizon)
	case r.Priority < MinPriority || r.Priority > MaxPriority:
		return Errorf(CodeBadRequest, "enqueue of %q has priority %d; it must be from %d to %d", r.Job, r.Priority, MinPriority, MaxPriority)
	}
	// In a fixed order, so that a request with two bad fields is always refused for the same
	// one; and without a map built per enqueue.
	for _, f := range [...]struct{ name, v string }{{"job", r.Job}, {"queue", r.Queue}, {"key", r.Key},
		{"tenant", r.Tenant}, {"enqueuedBy", r.EnqueuedBy}, {"dedupeId", r.DedupeID}} {
		if err := ValidIdentifier(f.name, f.v); err != nil {
			return err
		}
	}
	if err := ValidActor("enqueuedBy", r.EnqueuedBy); err != nil {
		return err
	}
	return validTrace(r.TraceParent, r.TraceState)
}

// MaxIdentifier is the most bytes ValidIdentifier takes.
const MaxIdentifier = 1000

// ValidIdentifier refuses a name, key or id that no store can hold faithfully: invalid UTF-8, a
// NUL byte (Postgres text refuses it), or more than MaxIdentifier bytes.
func ValidIdentifier(field, v string) error {
	switch {
	case !utf8.ValidString(v):
		return Errorf(CodeBadRequest, "%s is not valid UTF-8", field)
	case strings.IndexByte(v, 0) >= 0:
		return Errorf(CodeBadRequest, "%s contains a NUL byte", field)
	case len(v) > MaxIdentifier:
		return Errorf(CodeBadRequest, "%s is %d bytes; the limit is %d", field, len(v), MaxIdentifier)
	}
	return nil
}

// EnqueueResult is a run started or found.
type EnqueueResult struct {
	RunID string `json:"runId" msgpack:"run_id"`
	// Deduped is true when a live run held the key and was returned instead.
	Deduped bool `json:"deduped" msgpack:"deduped"`
	// Staged is the outbox row of an enqueue that was staged in the caller's transaction rather
	// than sent: RunID is empty, and the run is created when a relay publishes the committed row.
	Staged string `json:"staged,omitempty" msgpack:"staged,omitempty"`
}

// Enqueuer starts runs: the engine, or the HTTP client.
type Enqueuer interface {
	Enqueue(ctx context.Context, req EnqueueRequest) (EnqueueResult, error)
}

// Registry holds the job definitions a worker hosts.
type Registry struct {
	mu   sync.RWMutex
	defs map[string]Definition
	// extra holds the free-standing declarations of Declare (manifest.go), by kind and name.
	extra map[[2]string]Declaration
}

// NewRegistry returns a registry holding defs; a name registered twice, or a nil definition, is
// refused with X_JOB_DEFINITION.
func NewRegistry(defs ...Definition) (*Registry, error) {
	r := &Registry{defs: map[string]Definition{}}
	for i, d := range defs {
		if nilDefinition(d) {
			return nil, Errorf(CodeJobDefinition, "job definition %d is nil", i)
		}
		if err := r.Register(d); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Register adds a definition. A nil one (a nil interface, or a nil *Job: a Define whose error
// was dropped) is refused with X_JOB_DEFINITION, as Define refuses a nil option.
func (r *Registry) Register(d Definition) error {
	if nilDefinition(d) {
		return Errorf(CodeJobDefinition, "a job definition is nil")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.defs[d.Name()]; dup {
		return Errorf(CodeJobDefinition, "job %q is registered twice", d.Name())
	}
	r.defs[d.Name()] = d
	return nil
}

// nilDefinition reports whether d is nil, or a nil pointer in a Definition (whose Name would
// panic).
func nilDefinition(d Definition) bool {
	if d == nil {
		return true
	}
	v := reflect.ValueOf(d)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// Get returns the definition of a job name.
func (r *Registry) Get(name string) (Definition, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	d, ok := r.defs[name]
	return d, ok
}

// All returns the definitions sorted by name.
func (r *Registry) All() []Definition {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Definition, 0, len(r.defs))
	for _, d := range r.defs {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// Queues returns the distinct queues of the registered jobs, sorted.
func (r *Registry) Queues() []string {
	seen := map[string]bool{}
	var out []string
	for _, d := range r.All() {
		if q := d.Config().Queue; !seen[q] {
			seen[q] = true
			out = append(out, q)
		}
	}
	sort.Strings(out)
	return out
}
