// Package pin rewrites container image references to immutable ones
// (repo:tag@sha256:…), resolving each against its registry according to
// the first image rule that matches it. It edits the YAML node tree in
// place, so nothing else in a document moves.
package pin
