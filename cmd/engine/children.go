package main

import (
	"fmt"
	"io"
	"strconv"
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
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%v\n", cell(k.RunID, 0), cell(k.Name, identWidth), cell(orDash(k.Job), identWidth),
			cell(orDash(string(k.State)), 0), when(now, k.CreatedAt), k.Detached)
	}
	return tw.Flush()
}

// printFamily heads `history dump --format table` with the run's parent and children, so the
// histories of a family can be followed from one to the next.
func printFamily(w io.Writer, v engine.RunView) {
	if v.Parent != nil {
		fmt.Fprintf(w, "parent: %s (%s) via %s\n", cell(v.Parent.ParentID, 0), cell(v.Parent.Job, 0), cell(strconv.Quote(v.Parent.Name), 0))
	}
	for _, k := range v.Children {
		fmt.Fprintf(w, "child:  %s (%s, %s) via %s\n", cell(k.RunID, 0), cell(k.Job, 0), cell(string(k.State), 0), cell(strconv.Quote(k.Name), 0))
	}
	if v.Parent != nil || len(v.Children) > 0 {
		fmt.Fprintln(w)
	}
}
