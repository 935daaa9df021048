// Package config reads Sluice resources from YAML files: strictly (unknown
// fields, wrong types and missing required fields are errors), with every
// error tied to the file and line it concerns, and every error of every file
// reported at once.
package config
