package source

import (
	"container/list"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
)

const (
	// objectCacheSize bounds a Cache's decoded objects, all its clones
	// together (go-git's default for one repository).
	objectCacheSize = 96 * cache.MiByte
	// objectIdle is how long a decoded object stays unread before it
	// leaves the cache: as long as a clone's files stay open unused
	// (idleClose).
	objectIdle = 2 * time.Minute
)

// objectCache holds the decoded objects of a Cache's clones for go-git: a
// walk's commits and trees, a delta chain's bases. Like go-git's LRU it is
// bounded in bytes, the least recently used object leaving first; unlike
// it, an object no read has asked for in idle leaves too. A bound alone is
// reached after hours of a controller reading each new commit once, so its
// memory would depend on how long it had run; with the idle limit it holds
// what its syncs read now, and stays level under a steady load.
//
// Expired objects leave on the next Put or Get, from the least recently
// used end: each call removes what has expired, so the cost stays that of
// the objects cached.
type objectCache struct {
	max  cache.FileSize
	idle time.Duration
	now  func() time.Time

	mu     sync.Mutex
	size   cache.FileSize
	lru    list.List // of *cachedObject, the most recently used first
	byHash map[plumbing.Hash]*list.Element
}

type cachedObject struct {
	obj  plumbing.EncodedObject
	used time.Time
}

var _ cache.Object = (*objectCache)(nil)

func newObjectCache(max cache.FileSize, idle time.Duration) *objectCache {
	return &objectCache{max: max, idle: idle, now: time.Now, byHash: map[plumbing.Hash]*list.Element{}}
}

// Put caches obj as just used; an object larger than the bound is not
// cached.
func (c *objectCache) Put(obj plumbing.EncodedObject) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	c.expire(now)
	size := cache.FileSize(obj.Size())
	if e, ok := c.byHash[obj.Hash()]; ok {
		o := e.Value.(*cachedObject)
		c.size += size - cache.FileSize(o.obj.Size())
		o.obj, o.used = obj, now
		c.lru.MoveToFront(e)
	} else {
		if size > c.max {
			return
		}
		c.byHash[obj.Hash()] = c.lru.PushFront(&cachedObject{obj: obj, used: now})
		c.size += size
	}
	for c.size > c.max {
		c.remove(c.lru.Back())
	}
}

// Get returns the object named h, marking it used.
func (c *objectCache) Get(h plumbing.Hash) (plumbing.EncodedObject, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	c.expire(now)
	e, ok := c.byHash[h]
	if !ok {
		return nil, false
	}
	o := e.Value.(*cachedObject)
	o.used = now
	c.lru.MoveToFront(e)
	return o.obj, true
}

// Clear drops every object.
func (c *objectCache) Clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Init()
	clear(c.byHash)
	c.size = 0
}

// expire removes the objects last used more than idle before now: they
// are at the back, the least recently used end.
func (c *objectCache) expire(now time.Time) {
	for e := c.lru.Back(); e != nil && now.Sub(e.Value.(*cachedObject).used) > c.idle; e = c.lru.Back() {
		c.remove(e)
	}
}

func (c *objectCache) remove(e *list.Element) {
	o := c.lru.Remove(e).(*cachedObject)
	delete(c.byHash, o.obj.Hash())
	c.size -= cache.FileSize(o.obj.Size())
}
