// Package render turns a source folder into Kubernetes objects, in process:
// kustomize overlays through krusty, Helm charts (local or remote) through
// the Helm SDK, and plain YAML directories. It reads only through a
// source.FS and records every path it read, so that a later run can tell
// without rendering whether the output could have changed.
package render
