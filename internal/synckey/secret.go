package synckey

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Put writes k into the Secret ref (under SecretKey), creating it; an
// existing one is replaced only when rotate is set, since every value
// derived from the old key changes. It says "created" or "rotated".
func Put(ctx context.Context, c client.Client, ref types.NamespacedName, k Key, rotate bool) (string, error) {
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name, Labels: map[string]string{"app.kubernetes.io/part-of": "sluice"}},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{SecretKey: []byte(k.String() + "\n")},
	}
	err := c.Create(ctx, sec)
	switch {
	case err == nil:
		return "created", nil
	case !apierrors.IsAlreadyExists(err):
		return "", fmt.Errorf("creating Secret %s: %w", ref, err)
	case !rotate:
		return "", fmt.Errorf("Secret %s exists, and every sync's generated values derive from the key it holds: --rotate replaces it (each sync then gets new values at its next hydration)", ref)
	}
	cur := &corev1.Secret{}
	if err := c.Get(ctx, ref, cur); err != nil {
		return "", fmt.Errorf("reading Secret %s: %w", ref, err)
	}
	if cur.Data == nil {
		cur.Data = map[string][]byte{}
	}
	cur.Data[SecretKey] = sec.Data[SecretKey]
	if err := c.Update(ctx, cur); err != nil {
		return "", fmt.Errorf("rotating Secret %s: %w", ref, err)
	}
	return "rotated", nil
}
