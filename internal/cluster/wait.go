package cluster

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Readiness is an object's kstatus.
type Readiness struct {
	Ref     Ref    `json:"ref"`
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
}

// Wait polls the objects until kstatus calls every one Current, one has
// Failed, or timeout passes; it returns those not ready, with kstatus'
// reason, and an error naming them.
func (c *Client) Wait(ctx context.Context, objs []*unstructured.Unstructured, timeout time.Duration) ([]Readiness, error) {
	deadline := time.Now().Add(timeout)
	pending := objs
	interval := 100 * time.Millisecond
	for {
		var notReady []Readiness
		var still []*unstructured.Unstructured
		failed := false
		for _, u := range pending {
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(u.GroupVersionKind())
			err := c.client.Get(ctx, client.ObjectKeyFromObject(u), live)
			r := Readiness{Ref: RefOf(u)}
			switch {
			case apierrors.IsNotFound(err):
				r.Status, r.Message = string(status.NotFoundStatus), "not found"
			case err != nil:
				return nil, reachable(c.config, err)
			default:
				res, err := status.Compute(live)
				if err != nil {
					r.Status, r.Message = string(status.UnknownStatus), err.Error()
				} else {
					r.Status, r.Message = string(res.Status), res.Message
				}
			}
			if r.Status == string(status.CurrentStatus) {
				continue
			}
			failed = failed || r.Status == string(status.FailedStatus)
			notReady = append(notReady, r)
			still = append(still, u)
		}
		if len(notReady) == 0 {
			return nil, nil
		}
		if failed || time.Now().After(deadline) {
			sort.Slice(notReady, func(i, j int) bool { return notReady[i].Ref.String() < notReady[j].Ref.String() })
			var parts []string
			for _, r := range notReady {
				parts = append(parts, fmt.Sprintf("%s: %s: %s", r.Ref, r.Status, r.Message))
			}
			why := fmt.Sprintf("timed out after %s", timeout)
			if failed {
				why = "failed"
			}
			return notReady, fmt.Errorf("%d objects not ready (%s): %s", len(notReady), why, strings.Join(parts, "; "))
		}
		pending = still
		select {
		case <-ctx.Done():
			return notReady, ctx.Err()
		case <-time.After(interval):
		}
		interval = min(interval*2, 2*time.Second)
	}
}
