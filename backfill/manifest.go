package backfill

import "github.com/ultimat3/jobs"

// Declarations implements jobs.Declarer: a worker hosting the backfill declares it in its
// manifest beside its job, so the engine knows the sweep exists (and can call it pending) even
// when it never ran.
func (b *Backfill[Row]) Declarations() []jobs.Declaration {
	d, err := jobs.NewDeclaration(jobs.DeclareBackfill, b.decl.Name, b.decl)
	if err != nil {
		// A name Define accepted and plain data always encode; nothing to declare otherwise.
		return nil
	}
	return []jobs.Declaration{d}
}
