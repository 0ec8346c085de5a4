package scheduler

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"
	_ "time/tzdata" // a machine without zoneinfo still validates and resolves every IANA zone

	"github.com/robfig/cron/v3"

	"github.com/ultimat3/jobs"
)

// Policy is what a schedule does with the occurrences it missed while no scheduler ran.
type Policy string

const (
	// Skip (the default) fires the latest occurrence the walk found and drops the older ones.
	Skip Policy = "skip"
	// RunOnce fires the earliest occurrence the walk found, once, and moves the watermark past
	// the rest.
	RunOnce Policy = "run-once"
	// RunAll fires every occurrence the walk found.
	RunAll Policy = "run-all"
)

// maxNameLen bounds a schedule's name, so its runs' keys fit the stores' identifier limit.
const maxNameLen = 900

// DefaultMaxCatchUp bounds the walk of one round when a schedule declares no MaxCatchUp.
const DefaultMaxCatchUp = 10

// maxCatchUpLimit bounds MaxCatchUp: a round creates up to MaxCatchUp runs of a schedule in one
// ScheduleFire transaction, which is bounded as a bulk enqueue, one transaction too, is.
const maxCatchUpLimit = jobs.MaxEnqueueMany

// Schedule is one cron schedule, as plain data: it is what Define returns, what a provider hands
// the scheduler, and what travels as JSON (its Input is msgpack, base64 in JSON). Checksum
// identifies its content.
type Schedule struct {
	// Name identifies the schedule; its runs' idempotency keys start with it.
	Name string `json:"name"`
	// Spec is a standard 5-field cron expression or a descriptor (@hourly, @daily, @every 90m…).
	Spec string `json:"spec"`
	// TZ is the IANA zone Spec is read in ("Europe/Berlin", "UTC"). Required.
	TZ string `json:"tz"`
	// Job names the job each occurrence enqueues, on Queue (empty: the default queue).
	Job   string `json:"job"`
	Queue string `json:"queue,omitempty"`
	// Input is the job's input, msgpack-encoded (jobs.Encode).
	Input []byte `json:"input,omitempty"`
	// Tenant, or NoTenant, is the runs' tenant: exactly one is set.
	Tenant   string `json:"tenant,omitempty"`
	NoTenant bool   `json:"noTenant,omitempty"`
	// Policy is the catch-up policy; empty means Skip.
	Policy Policy `json:"policy,omitempty"`
	// MaxCatchUp bounds the walk of one round, in every policy; 0 means DefaultMaxCatchUp. At
	// most jobs.MaxEnqueueMany: the runs of a round are one transaction.
	MaxCatchUp int `json:"maxCatchUp,omitempty"`
}

// Option sets an optional field of a schedule declared with Define.
type Option func(*Schedule) error

// CatchUp sets the catch-up policy (default Skip).
func CatchUp(p Policy) Option {
	return func(s *Schedule) error {
		s.Policy = p
		return validPolicy(s.Name, p)
	}
}

// MaxCatchUp bounds how many occurrences one round walks from the watermark (default 10). It
// must be positive and at most jobs.MaxEnqueueMany (its runs are one transaction).
func MaxCatchUp(n int) Option {
	return func(s *Schedule) error {
		if n <= 0 {
			return jobs.Errorf(jobs.CodeJobDefinition, "schedule %q: maxCatchUp must be positive, got %d", s.Name, n)
		}
		if n > maxCatchUpLimit {
			return maxCatchUpTooLarge(s.Name, n)
		}
		s.MaxCatchUp = n
		return nil
	}
}

// Define declares a schedule of job beside the job: every occurrence of spec, read in the time
// zone tz, enqueues job with input. The zone is a required argument and is checked against the
// IANA database, and the spec is parsed, here: a bad value is X_JOB_DEFINITION at declaration,
// not a schedule that silently runs at the wrong hour. The runs' tenant is the one the job
// derives from input.
//
//	var digest = scheduler.MustDefine("nightly-digest", Digest, "0 3 * * *", "Europe/Berlin",
//		DigestInput{}, scheduler.CatchUp(scheduler.RunOnce))
func Define(name string, job jobs.Definition, spec, tz string, input any, opts ...Option) (Schedule, error) {
	// A nil *jobs.Job (a job whose Define error was dropped) is as absent as a nil interface,
	// and its methods would panic below.
	if v := reflect.ValueOf(job); job == nil || v.Kind() == reflect.Pointer && v.IsNil() {
		return Schedule{}, jobs.Errorf(jobs.CodeJobDefinition, "schedule %q names no job", name)
	}
	in, err := jobs.Encode(input)
	if err != nil {
		return Schedule{}, jobs.Wrap(jobs.CodeJobDefinition, err, "schedule %q: encode the input", name)
	}
	id, err := job.Identity(in)
	if err != nil {
		return Schedule{}, jobs.Wrap(jobs.CodeJobDefinition, err, "schedule %q: the input of job %q", name, job.Name())
	}
	s := Schedule{Name: name, Spec: spec, TZ: tz, Job: job.Name(), Queue: job.Config().Queue, Input: in,
		Tenant: id.Tenant, NoTenant: id.NoTenant, Policy: Skip, MaxCatchUp: DefaultMaxCatchUp}
	for i, o := range opts {
		if o == nil {
			// Refused, as jobs.Define refuses a nil option, rather than a panic at start-up.
			return Schedule{}, jobs.Errorf(jobs.CodeJobDefinition, "schedule %q: option %d is nil", name, i)
		}
		if err := o(&s); err != nil {
			return Schedule{}, err
		}
	}
	if _, err := s.compile(); err != nil {
		return Schedule{}, err
	}
	return s, nil
}

// MustDefine is Define for package-level declarations: a refused schedule panics at start-up.
func MustDefine(name string, job jobs.Definition, spec, tz string, input any, opts ...Option) Schedule {
	s, err := Define(name, job, spec, tz, input, opts...)
	if err != nil {
		panic(err)
	}
	return s
}

// Validate refuses a schedule the scheduler cannot run (X_JOB_DEFINITION): a bad name, spec,
// zone, policy or maxCatchUp, or an enqueue that would be refused (no job, no tenant).
func (s Schedule) Validate() error {
	_, err := s.compile()
	return err
}

// Checksum is a stable digest of the schedule's content (SHA-256 of its JSON, hex): two
// declarations are the same schedule exactly when their checksums are equal.
func (s Schedule) Checksum() string {
	s = s.normal()
	b, _ := json.Marshal(s) // a struct of strings, bytes, a bool and an int: cannot fail
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// normal fills in the defaults, so a schedule that leaves them empty and one that names them
// are the same schedule.
func (s Schedule) normal() Schedule {
	if s.Policy == "" {
		s.Policy = Skip
	}
	if s.MaxCatchUp == 0 {
		s.MaxCatchUp = DefaultMaxCatchUp
	}
	if s.Queue == "" {
		s.Queue = jobs.DefaultQueue
	}
	if len(s.Input) == 0 {
		s.Input, _ = jobs.Encode(nil)
	}
	return s
}

// compiled is a validated schedule with its parsed spec and zone.
type compiled struct {
	Schedule
	loc      *time.Location
	sched    cron.Schedule
	checksum string
}

// parser reads standard 5-field specs and descriptors (@yearly … @hourly, @every d).
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// validationBase is when compile checks that a spec fires at all; any fixed instant does, since
// a cron spec has no year.
var validationBase = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func (s Schedule) compile() (*compiled, error) {
	s = s.normal()
	bad := func(format string, args ...any) (*compiled, error) {
		return nil, jobs.Errorf(jobs.CodeJobDefinition, "schedule %q: %s", s.Name, fmt.Sprintf(format, args...))
	}
	if s.Name == "" {
		return nil, jobs.Errorf(jobs.CodeJobDefinition, "a schedule has no name")
	}
	for field, v := range map[string]string{"name": s.Name, "job": s.Job, "queue": s.Queue, "tenant": s.Tenant, "tz": s.TZ, "spec": s.Spec} {
		if err := jobs.ValidIdentifier(field, v); err != nil {
			return bad("%s", err.Error())
		}
	}
	// The name starts every key and EnqueuedBy of the schedule's runs: it must leave them room
	// under the 1,000-byte identifier limit, and hold no '@', so "<name>@<instant>" and
	// "<name>@manual@<instant>" can never be read two ways.
	if len(s.Name) > maxNameLen {
		return bad("the name is %d bytes; the limit is %d", len(s.Name), maxNameLen)
	}
	if strings.Contains(s.Name, "@") {
		return bad("the name holds '@', which separates the name from the instant in its runs' keys")
	}
	// The name is a path segment of the schedule's routes (/v1/schedules/<name>), and "." and
	// ".." are dot segments there: a client or proxy resolves them away (RFC 3986), so the
	// routes could never reach the schedule. A lone "/" is escaped to "%2F", which net/http's
	// router reads as a trailing slash: no route either.
	if s.Name == "." || s.Name == ".." {
		return bad("the name %q is a dot segment, which a URL path cannot carry", s.Name)
	}
	if s.Name == "/" {
		return bad("the name %q is a lone slash, which a URL path cannot carry", s.Name)
	}
	if s.Job == "" {
		return bad("names no job")
	}
	if s.Tenant == "" && !s.NoTenant {
		return bad("names neither a tenant nor no-tenant")
	}
	if s.Tenant != "" && s.NoTenant {
		return bad("names a tenant and no-tenant")
	}
	var input any
	if err := jobs.Decode(s.Input, &input); err != nil {
		return bad("the input is not msgpack: %v", err)
	}
	if err := validPolicy(s.Name, s.Policy); err != nil {
		return nil, err
	}
	if s.MaxCatchUp < 0 {
		return bad("maxCatchUp must be positive, got %d", s.MaxCatchUp)
	}
	// Under run-all a round creates every occurrence its walk found, in one transaction: an
	// unbounded cap let one declaration ("@every 1s", run-all, a huge cap) make the round after an
	// outage create every missed second's run at once, and run the leader out of memory, then
	// each node that took the lead after it.
	if s.MaxCatchUp > maxCatchUpLimit {
		return nil, maxCatchUpTooLarge(s.Name, s.MaxCatchUp)
	}
	// The zone: required, and a real IANA zone. "Local" would make the schedule's hours depend
	// on the machine that happens to lead.
	if s.TZ == "" {
		return bad("names no time zone (tz is required: an IANA zone such as \"Europe/Berlin\" or \"UTC\")")
	}
	if s.TZ == "Local" {
		return bad("tz \"Local\" depends on the machine; name an IANA zone")
	}
	// "localtime" and "posixrules" are files a machine's zoneinfo directory may hold, not IANA
	// zones, and LoadLocation reads that directory before the embedded database: where they
	// exist they load as the machine's own zone (a link to /etc/localtime) and its default rules.
	// They are "Local" under another name, and a declaration valid on one machine and refused on
	// another. (EqualFold: a case-insensitive file system finds them in any case.)
	if strings.EqualFold(s.TZ, "localtime") || strings.EqualFold(s.TZ, "posixrules") {
		return bad("tz %q is a file of the machine's zoneinfo, which depends on the machine; name an IANA zone", s.TZ)
	}
	loc, err := time.LoadLocation(s.TZ)
	if err != nil {
		return bad("tz %q is not an IANA time zone (such as \"America/Bogota\")", s.TZ)
	}
	// The spec: the zone is the tz argument alone, never a prefix of the spec.
	spec := strings.TrimSpace(s.Spec)
	if spec == "" {
		return bad("has no cron spec")
	}
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return bad("spec %q names a zone; the zone is the tz field", s.Spec)
	}
	sched, err := parse(spec)
	if err != nil {
		return bad("spec %q: %v", s.Spec, err)
	}
	// The parser takes "@every d" for any duration, and quietly makes one under a second a
	// second and drops a fraction: "@every -1h" would fire every second. Cron's resolution is
	// the second, so a period must be whole seconds, and at least one.
	if rest, ok := strings.CutPrefix(spec, "@every "); ok {
		if d, err := time.ParseDuration(strings.TrimSpace(rest)); err == nil && (d < time.Second || d%time.Second != 0) {
			return bad("spec %q: the period must be whole seconds, at least 1s", s.Spec)
		}
	}
	// A spec is read in the zone by zoned, not by robfig's Next (see zoned). "@every d" is not
	// wall-clock and stays as parsed: every d from the watermark.
	if ss, ok := sched.(*cron.SpecSchedule); ok {
		ss.Location = loc
		sched = zoned{spec: ss, loc: loc}
	}
	if sched.Next(validationBase).IsZero() {
		return bad("spec %q never fires", s.Spec)
	}
	return &compiled{Schedule: s, loc: loc, sched: sched, checksum: s.Checksum()}, nil
}

// parse is the cron parser, turning a panic on a malformed spec into an error: a spec may come
// from a remote declaration.
func parse(spec string) (sched cron.Schedule, err error) {
	defer func() {
		if v := recover(); v != nil {
			sched, err = nil, fmt.Errorf("unparseable (%v)", v)
		}
	}()
	return parser.Parse(spec)
}

func maxCatchUpTooLarge(name string, n int) error {
	return jobs.Errorf(jobs.CodeJobDefinition, "schedule %q: maxCatchUp is %d; the limit is %d (the runs of one round are one transaction)",
		name, n, maxCatchUpLimit)
}

func validPolicy(name string, p Policy) error {
	switch p {
	case Skip, RunOnce, RunAll:
		return nil
	}
	return jobs.Errorf(jobs.CodeJobDefinition, "schedule %q: catch-up policy %q: want skip, run-once or run-all", name, p)
}

// OccurrenceKey is the idempotency key of the run of a schedule's occurrence: the schedule's
// name and the occurrence's instant (RFC 3339, UTC). Two leaders firing one occurrence name the
// same key.
func OccurrenceKey(name string, occurrence time.Time) string {
	return name + "@" + occurrence.UTC().Format(time.RFC3339)
}

// ManualKey is the idempotency key of a manual trigger at now: it says "manual", so it never
// collides with an occurrence's key, and carries the instant to the nanosecond.
func ManualKey(name string, now time.Time) string {
	return name + "@manual@" + now.UTC().Format(time.RFC3339Nano)
}
