package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"sluice.dev/sluice/internal/cluster"
)

// Details is what a session changed on the cluster, read from its record:
// the objects named, never their contents (a saved Secret's data stays in
// the record).
type Details struct {
	Info
	// Repo, Ref and Commit name what the session's branch was checked out
	// from, when it runs on one.
	Repo, Ref, Commit string
	// Namespaces are every namespace the session's objects are in.
	Namespaces []string
	// Created are the objects the session created; Modified the existing
	// ones it changes; Deleted the ones it deleted (each put back on stop).
	Created, Modified, Deleted []cluster.Ref
	// Unreadable are objects it changed or deleted that this identity
	// may not read, so cannot tell which.
	Unreadable []cluster.Ref
	// Owners are the GitOps objects it pauses, each with how.
	Owners []string
	// Shadows maps each of a version-mode session's namespaces to the
	// namespace it runs beside.
	Shadows map[string]string
	// NoRecord says the session has touched nothing yet.
	NoRecord bool
}

// Describe reads what a session changed.
func Describe(ctx context.Context, c *cluster.Client, name string) (Details, error) {
	in, err := Get(ctx, c, name)
	if err != nil {
		return Details{}, err
	}
	d := Details{Info: in}
	rec, err := (&store{c: c.Kube(), name: name}).read(ctx)
	if errors.Is(err, ErrNoRecord) {
		d.NoRecord = true
		return d, nil
	}
	if err != nil {
		return d, err
	}
	d.Repo, d.Ref, d.Commit, d.Namespaces = rec.Repo, rec.Ref, rec.Commit, rec.Namespaces
	d.Created = slices.Clone(rec.Created)
	// A saved object is one the session changed while it is there, one it
	// deleted when it is gone.
	for _, s := range rec.Saved {
		_, err := getRef(ctx, c.Kube(), s.Ref)
		switch {
		case apierrors.IsNotFound(err):
			d.Deleted = append(d.Deleted, s.Ref)
		case apierrors.IsForbidden(err):
			d.Unreadable = append(d.Unreadable, s.Ref)
		case err != nil:
			return d, fmt.Errorf("reading %s: %w", s.Ref.Subject(), err)
		default:
			d.Modified = append(d.Modified, s.Ref)
		}
	}
	for _, o := range rec.Owners {
		d.Owners = append(d.Owners, o.Paused())
	}
	if rec.Mode == Version {
		d.Shadows = map[string]string{}
		for _, ns := range rec.Namespaces {
			if base, ok := strings.CutSuffix(ns, "-"+name); ok && base != "" {
				d.Shadows[ns] = base
			}
		}
	}
	for _, refs := range [][]cluster.Ref{d.Created, d.Modified, d.Deleted, d.Unreadable} {
		slices.SortFunc(refs, func(a, b cluster.Ref) int { return strings.Compare(a.Subject(), b.Subject()) })
	}
	return d, nil
}
