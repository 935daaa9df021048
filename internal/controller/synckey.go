package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"sluice.dev/sluice/internal/credentials"
	"sluice.dev/sluice/internal/synckey"
)

// syncKeys reads the controller's sync key from its Secret, at most every
// keyRead: a batch asks before it runs, and a key replaced (a rotation)
// is used within that time. A Secret that is missing is never made here:
// a key made anew would give every sync new passwords, which only a
// person may decide (`sluice sync-key new --secret` makes or rotates it).
type syncKeys struct {
	secrets *credentials.Secrets
	ref     types.NamespacedName

	mu      sync.Mutex
	at      time.Time
	key     synckey.Key
	missing string
}

// keyRead is how long a read key is used before it is read again.
const keyRead = 10 * time.Second

// get returns the key, or why there is none and what to do.
func (k *syncKeys) get(ctx context.Context) (synckey.Key, string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.at.IsZero() && time.Since(k.at) < keyRead {
		return k.key, k.missing
	}
	k.at = time.Now()
	key, err := k.secrets.SyncKey(ctx, k.ref.Namespace, k.ref.Name)
	k.key, k.missing = key, ""
	switch {
	case apierrors.IsNotFound(err):
		k.missing = fmt.Sprintf("the values this sync's chart generates, and its encrypted Secrets, must be the same at every hydration, which takes the controller's sync key: "+
			"the Secret %s it is kept in does not exist: make it with `sluice sync-key new --secret %s`", k.ref, k.ref)
	case err != nil:
		k.missing = fmt.Sprintf("reading the controller's sync key: %v", err)
	}
	return k.key, k.missing
}
