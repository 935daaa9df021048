// Package sandbox runs what Sluice evaluates of other people's
// repositories (renders, and pull request templates) in worker processes:
// the same binary, re-executed as `sluice render-worker`, one process per
// render, so that no render leaves state behind that another sees
// (kustomize's process-wide OpenAPI schema, say), and a render past its
// limits is killed, not abandoned.
//
// A worker starts with nothing: an environment of its runtime settings
// only (no credentials), no file it may open (Landlock, where the kernel
// has it: the source tree, remote bases, charts and the cluster's
// capabilities come from the process that started it, over its stdin and
// stdout, and that process records and bounds every read), no TCP
// connection it may make, a virtual memory limit with a soft Go memory
// limit under it, a CPU-time limit, and a wall-clock deadline after which
// its process group is killed. A worker that is killed is reported with
// the limit it reached and the last file it read.
package sandbox
