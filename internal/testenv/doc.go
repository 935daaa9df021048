// Package testenv starts the real services Sluice's tests need, on
// loopback: a git server speaking the smart HTTP protocol (git's own
// git-http-backend), an OCI registry (go-containerregistry's), and helpers
// to make repositories and push images. It is used by tests and by the
// benchmark, never by Sluice itself.
package testenv
