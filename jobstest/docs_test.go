package jobstest_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"
	"go.uber.org/fx/fxtest"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/api"
	"github.com/ultimat3/jobs/engine"
	"github.com/ultimat3/jobs/store"
	"github.com/ultimat3/jobs/store/memory"
	"github.com/ultimat3/jobs/worker"
)

// exported lists a package's exported top-level names (its non-test files), each with how many
// results it returns when it is a function, -1 otherwise.
func exported(t *testing.T, dir string) map[string]int {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, de := range entries {
		name := de.Name()
		if de.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					out[d.Name.Name] = d.Type.Results.NumFields()
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						out[s.Name.Name] = -1
					case *ast.ValueSpec:
						for _, n := range s.Names {
							out[n.Name] = -1
						}
					}
				}
			}
		}
	}
	return out
}

// packageDoc returns the package comment of the package in dir.
func packageDoc(t *testing.T, dir string) string {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range entries {
		name := de.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			t.Fatal(err)
		}
		if f.Doc != nil {
			return f.Doc.Text()
		}
	}
	t.Fatalf("package %s has no package comment", dir)
	return ""
}

var (
	docRef    = regexp.MustCompile(`\b(jobs|host|jobstest)\.([A-Z]\w*)`)
	docAssign = regexp.MustCompile(`(?m)^\s*(\w+(?:\s*,\s*\w+)*)\s*:?=\s*(jobs|host|jobstest)\.([A-Z]\w*)\(`)
)

// The examples in the package comments of host and jobstest name functions and types that exist,
// and take as many results from a function as it returns: they are read as code to copy.
func TestPackageDocExamplesNameRealFunctions(t *testing.T) {
	t.Parallel()
	pkgs := map[string]map[string]int{
		"jobs":     exported(t, ".."),
		"host":     exported(t, "../host"),
		"jobstest": exported(t, "."),
	}
	for _, dir := range []string{"../host", "."} {
		doc := packageDoc(t, dir)
		for _, m := range docRef.FindAllStringSubmatch(doc, -1) {
			if _, ok := pkgs[m[1]][m[2]]; !ok {
				t.Errorf("the package comment of %s names %s.%s, which package %s does not declare", dir, m[1], m[2], m[1])
			}
		}
		for _, m := range docAssign.FindAllStringSubmatch(doc, -1) {
			results, ok := pkgs[m[2]][m[3]]
			if !ok || results < 0 {
				continue // reported above, or not a function
			}
			if got := len(strings.Split(m[1], ",")); got != results {
				t.Errorf("the package comment of %s assigns %s.%s to %d values (%q); it returns %d", dir, m[2], m[3], got, m[1], results)
			}
		}
	}
}

// stopOrder records the order fx runs the OnStop hooks of an app's modules.
type stopOrder struct {
	mu    sync.Mutex
	order []string
}

func (s *stopOrder) LogEvent(ev fxevent.Event) {
	e, ok := ev.(*fxevent.OnStopExecuting)
	if !ok {
		return
	}
	var who string
	switch c := e.CallerName; {
	case strings.Contains(c, "/jobs/worker."):
		who = "worker"
	case strings.Contains(c, "/jobs/api."):
		who = "API"
	case strings.Contains(c, "/jobs/engine."):
		who = "engine"
	case strings.Contains(c, "jobstest_test."):
		who = "store"
	default:
		who = c
	}
	s.mu.Lock()
	s.order = append(s.order, who)
	s.mu.Unlock()
}

// fxStops builds the guide's fx app (a store, engine.Module, api.Module, worker.Module: the API
// listed before the worker unless workerFirst) and returns the order fx stops them in.
func fxStops(t *testing.T, workerFirst bool) []string {
	t.Helper()
	rec := &stopOrder{}
	reg, err := jobs.NewRegistry(checkout)
	if err != nil {
		t.Fatal(err)
	}
	apiMod := fx.Options(fx.Supply(api.Config{Addr: "127.0.0.1:0", Token: "t"}), api.Module)
	workerMod := fx.Options(fx.Supply(reg, worker.Config{PollWait: time.Second}), worker.Module)
	mods := []fx.Option{apiMod, workerMod}
	if workerFirst {
		mods = []fx.Option{workerMod, apiMod}
	}
	app := fxtest.New(t,
		fx.WithLogger(func() fxevent.Logger { return rec }),
		fx.Supply(slog.New(slog.NewTextHandler(io.Discard, nil))),
		fx.Provide(func(lc fx.Lifecycle) store.Store {
			st := memory.New()
			lc.Append(fx.StopHook(st.Close))
			return st
		}),
		fx.Supply(engine.Config{}), engine.Module,
		fx.Options(mods...),
	)
	app.RequireStart()
	app.RequireStop()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.order
}

// guideStopOrder returns the order of the words worker, API, engine and store in what the guide's
// "With fx" section says of the stop order ("on stop, …" up to the colon).
func guideStopOrder(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../docs/guide.md")
	if err != nil {
		t.Fatal(err)
	}
	guide := string(b)
	i := strings.Index(guide, "### With fx")
	if i < 0 {
		t.Fatal(`docs/guide.md has no "### With fx" section`)
	}
	section := guide[i:]
	if j := strings.Index(section, "\n## "); j >= 0 {
		section = section[:j]
	}
	section = strings.Join(strings.Fields(section), " ")
	k := strings.Index(section, "on stop, ")
	if k < 0 {
		t.Fatal(`docs/guide.md's "With fx" section does not say the order fx stops the modules in ("on stop, the …, the …")`)
	}
	said := section[k:]
	if j := strings.Index(said, ":"); j >= 0 {
		said = said[:j]
	}
	words := []string{"worker", "API", "engine", "store"}
	at := map[string]int{}
	for _, w := range words {
		n := strings.Index(said, w)
		if n < 0 {
			t.Fatalf("the guide's fx stop order %q does not name the %s", said, w)
		}
		at[w] = n
	}
	sort.Slice(words, func(a, b int) bool { return at[words[a]] < at[words[b]] })
	return words
}

// The guide says in which order fx stops the modules of its example app, and it is the order fx
// stops them in: the worker, the API, the engine, the store. The API and the worker do not
// depend on each other, so the one listed later stops first; the engine always stops after both,
// and the store last.
func TestGuideStatesTheFxStopOrder(t *testing.T) {
	t.Parallel()
	got := fxStops(t, false)
	if want := []string{"worker", "API", "engine", "store"}; !slices.Equal(got, want) {
		t.Fatalf("fx stopped the guide's app in the order %v, want %v", got, want)
	}
	if said := guideStopOrder(t); !slices.Equal(said, got) {
		t.Errorf("docs/guide.md says fx stops the modules in the order %v; fx stops them in the order %v", said, got)
	}
	if got := fxStops(t, true); !slices.Equal(got, []string{"API", "worker", "engine", "store"}) {
		t.Errorf("with the worker listed before the API, fx stopped them in the order %v", got)
	}
}
