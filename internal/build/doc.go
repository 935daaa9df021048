// Package build builds container images without a Docker engine: the
// files an Image maps from its sources become one reproducible layer
// (sorted entries, fixed timestamps and owners) laid onto the base image
// with go-containerregistry, per platform of a multi-platform base.
//
// Every image is labelled with a hash of its inputs (base digest, mapped
// files' paths, modes and contents, configuration) and tagged with it, so
// an image whose inputs were built before is found with one request and
// only tagged: a commit that changes one service's files rebuilds that
// service alone.
package build
