package session

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"slices"
	"time"

	"sluice.dev/sluice/internal/cluster"
)

// Mode says how a session places its objects.
type Mode string

// Modes.
const (
	// Replace applies over the workload that is there, suspending its
	// GitOps owners.
	Replace Mode = "replace"
	// Version runs the workload beside the existing one, in namespaces of
	// its own (<namespace>-<session>), owners left alone.
	Version Mode = "version"
)

// Record is what a session keeps on the cluster: enough for anyone to put
// back everything it changed.
type Record struct {
	Name    string    `json:"name"`
	Holder  string    `json:"holder"` // user@host
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	Mode    Mode      `json:"mode"`
	// Path is the directory rendered; Repo and Ref name the branch it was
	// checked out from, when the session runs on one.
	Path   string `json:"path"`
	Repo   string `json:"repo,omitempty"`
	Ref    string `json:"ref,omitempty"`
	Branch string `json:"branch,omitempty"`
	Commit string `json:"commit,omitempty"`
	// Namespaces are every namespace the session's objects are in.
	Namespaces []string `json:"namespaces,omitempty"`
	// Owners are the GitOps objects the session suspended, with their
	// settings before it.
	Owners []Owner `json:"owners,omitempty"`
	// Saved holds the full prior state of every object the session
	// modified or deleted.
	Saved []Saved `json:"saved,omitempty"`
	// Created lists the objects the session created.
	Created []cluster.Ref `json:"created,omitempty"`
	// Applied is the session's inventory: the objects of its last apply.
	Applied []cluster.Ref `json:"applied,omitempty"`
}

// Saved is an object as it was before the session first touched it.
type Saved struct {
	Ref    cluster.Ref     `json:"ref"`
	Object json.RawMessage `json:"object"`
}

// Owner is a GitOps object the session paused.
type Owner struct {
	Ref cluster.Ref `json:"ref"`
	// How is how it is paused; empty in records of earlier versions,
	// which suspended every owner.
	How How `json:"how,omitempty"`
	// Why says why this way, when it is not the narrowest.
	Why string `json:"why,omitempty"`
	// Prior is the owner's setting before any session paused it: Flux's
	// spec.suspend, Argo CD's spec.syncPolicy.automated or its
	// skip-reconcile annotation; null when unset. None for HowObjects.
	Prior json.RawMessage `json:"prior"`
	// Objects are the owner's objects the session marked (HowObjects).
	Objects []cluster.Ref `json:"objects,omitempty"`
	// Deleted are the owner's objects the session deleted because the
	// working tree no longer renders them. A deleted object carries no
	// mark, so while any is deleted a Flux Kustomization is suspended
	// rather than paused object by object.
	Deleted []cluster.Ref `json:"deleted,omitempty"`
	// Parent is the Flux Kustomization that applies the owner from git,
	// kept off it meanwhile by the owner's reconcile: disabled mark.
	Parent *cluster.Ref `json:"parent,omitempty"`
	// Revision is the revision of git the owner deployed when the session
	// paused it, to tell when git moves on.
	Revision string `json:"revision,omitempty"`
}

// knows reports whether the record already accounts for the object.
func (r *Record) knows(ref cluster.Ref) bool {
	return r.created(ref) || r.saved(ref) != nil
}

func (r *Record) created(ref cluster.Ref) bool {
	return slices.ContainsFunc(r.Created, func(c cluster.Ref) bool { return sameObject(c, ref) })
}

func (r *Record) saved(ref cluster.Ref) *Saved {
	for i := range r.Saved {
		if sameObject(r.Saved[i].Ref, ref) {
			return &r.Saved[i]
		}
	}
	return nil
}

func (r *Record) owner(ref cluster.Ref) bool {
	return r.ownerIndex(ref) >= 0
}

func (r *Record) ownerIndex(ref cluster.Ref) int {
	return slices.IndexFunc(r.Owners, func(o Owner) bool { return sameObject(o.Ref, ref) })
}

// marked reports whether the session marks the object for its owner's
// controller to leave alone: every object of a Flux Kustomization, even
// one suspended (a reconcile under way when it was suspended still skips
// a marked object).
func (r *Record) marked(ref cluster.Ref) bool {
	for _, o := range r.Owners {
		if o.Ref.Kind == fluxKustomization.Kind && slices.ContainsFunc(o.Objects, func(c cluster.Ref) bool { return sameObject(c, ref) }) {
			return true
		}
	}
	return false
}

// sameObject compares refs regardless of API version.
func sameObject(a, b cluster.Ref) bool {
	return a.Group == b.Group && a.Kind == b.Kind && a.Namespace == b.Namespace && a.Name == b.Name
}

func (r *Record) encode() ([]byte, error) {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	if err := json.NewEncoder(zw).Encode(r); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func decodeRecord(data []byte) (*Record, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, err
	}
	r := &Record{}
	return r, json.Unmarshal(raw, r)
}
