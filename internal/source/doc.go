// Package source reads and writes git repositories and local trees: the
// clone cache (one fetch per repository per run), ref resolution, read-only
// file systems over a commit's tree or a working directory, the git object
// writes and branch updates that destinations are built from, and the
// record of what a renderer read.
package source
