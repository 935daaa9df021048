package dashboard

import (
	"fmt"
	"net/http"
	"sync"
	"time"
)

// broker tells every open page, over server-sent events, which of the
// things pages show changed: a burst of changes (a controller writing a
// thousand statuses) is one event per quiet period.
type broker struct {
	quiet time.Duration

	mu      sync.Mutex
	subs    map[chan string]struct{}
	pending map[string]bool
	timer   *time.Timer
	closed  bool
}

func newBroker(quiet time.Duration) *broker {
	return &broker{quiet: quiet, subs: map[chan string]struct{}{}, pending: map[string]bool{}}
}

// publish notes that what topic names changed.
func (b *broker) publish(topic string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.pending[topic] = true
	if b.timer == nil {
		b.timer = time.AfterFunc(b.quiet, b.flush)
	}
}

func (b *broker) flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.timer = nil
	for topic := range b.pending {
		for ch := range b.subs {
			select {
			case ch <- topic:
			default: // a slow page refreshes on the next event
			}
		}
	}
	clear(b.pending)
}

func (b *broker) subscribe() chan string {
	b.mu.Lock()
	defer b.mu.Unlock()
	ch := make(chan string, 8)
	if b.closed {
		close(ch)
		return ch
	}
	b.subs[ch] = struct{}{}
	return ch
}

func (b *broker) unsubscribe(ch chan string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.subs[ch]; ok {
		delete(b.subs, ch)
		close(ch)
	}
}

// close ends every stream (the server is shutting down).
func (b *broker) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for ch := range b.subs {
		close(ch)
	}
	clear(b.subs)
}

// serve streams events to one page until it goes.
func (b *broker) serve(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	ch := b.subscribe()
	defer b.unsubscribe(ch)
	// A stream lives past the server's write timeout: each write has a
	// deadline of its own, a reader too slow for it is dropped.
	rc := http.NewResponseController(w)
	rc.SetWriteDeadline(time.Now().Add(time.Minute))
	fmt.Fprint(w, "retry: 2000\n\n")
	flusher.Flush()
	keepalive := time.NewTicker(15 * time.Second)
	defer keepalive.Stop()
	for {
		rc.SetWriteDeadline(time.Now().Add(time.Minute))
		select {
		case <-r.Context().Done():
			return
		case topic, ok := <-ch:
			if !ok {
				return
			}
			fmt.Fprintf(w, "event: change\ndata: %s\n\n", topic)
		case <-keepalive.C:
			fmt.Fprint(w, ": keepalive\n\n")
		}
		flusher.Flush()
	}
}
