package main

import (
	"fmt"
	"io"
	"time"

	"github.com/ultimat3/jobs/engine"
)

// printChildren is the children section of `jobs show`: the runs this run started as children.
func printChildren(w io.Writer, now time.Time, kids []engine.ChildView) error {
	if len(kids) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nChildren")
	tw := newTable(w)
	fmt.Fprintln(tw, "  RUN\tNAME\tJOB\tSTATE\tSTARTED\tDETACHED")
	for _, k := range kids {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%v\n", k.RunID, k.Name, orDash(k.Job), orDash(string(k.State)), when(now, k.CreatedAt), k.Detached)
	}
	return tw.Flush()
}

// printFamily heads `history dump --format table` with the run's parent and children, so the
// histories of a family can be followed from one to the next.
func printFamily(w io.Writer, v engine.RunView) {
	if v.Parent != nil {
		fmt.Fprintf(w, "parent: %s (%s) via %q\n", v.Parent.ParentID, v.Parent.Job, v.Parent.Name)
	}
	for _, k := range v.Children {
		fmt.Fprintf(w, "child:  %s (%s, %s) via %q\n", k.RunID, k.Job, k.State, k.Name)
	}
	if v.Parent != nil || len(v.Children) > 0 {
		fmt.Fprintln(w)
	}
}
