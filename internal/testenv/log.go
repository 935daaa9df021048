package testenv

import (
	"bytes"
	"io"
	"log"
	"sync"
)

func nopLogger() *log.Logger { return log.New(io.Discard, "", 0) }

// Buffer is a buffer something running writes while a test reads it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
