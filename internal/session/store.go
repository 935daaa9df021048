package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SystemNamespace holds every session's Lease and record.
const SystemNamespace = "sluice-system"

// Labels and annotations of the session's own objects.
const (
	labelSession     = "sluice.dev/session"
	labelPart        = "sluice.dev/record-part"
	labelManagedBy   = "app.kubernetes.io/managed-by"
	annotationParts  = "sluice.dev/record-parts"
	annotationGen    = "sluice.dev/record-generation"
	annotationDigest = "sluice.dev/record-sha256"
	recordKey        = "record.json.gz"
)

// partSize bounds the compressed record bytes one Secret holds: Secrets
// are limited to 1 MiB, metadata included.
var partSize = 512 << 10

// ErrNoRecord says a session has no record (it never started, or was
// cleaned up).
var ErrNoRecord = errors.New("no session record")

// store keeps a session's record in Secrets: the index Secret
// sluice-run-NAME holds it whole when it fits, otherwise it names a
// generation of part Secrets written before it, so a reader never sees a
// record half-written.
type store struct {
	c    client.Client
	name string
	gen  int
	// parts is how many part Secrets the last write left (0: inline).
	parts int
	// versions are the resourceVersions of the Secrets this store wrote, so
	// a rewrite is one request.
	versions map[string]string
}

func secretName(session string) string { return "sluice-run-" + session }

func partName(session string, gen, i int) string {
	return fmt.Sprintf("sluice-run-%s-g%d-%d", session, gen%2, i)
}

func (s *store) secret(name string, labels map[string]string) *corev1.Secret {
	l := map[string]string{labelSession: s.name, labelManagedBy: "sluice"}
	for k, v := range labels {
		l[k] = v
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: SystemNamespace, Labels: l},
		Type:       "sluice.dev/session-record",
	}
}

// write stores the record.
func (s *store) write(ctx context.Context, r *Record) error {
	data, err := r.encode()
	if err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	index := s.secret(secretName(s.name), nil)
	index.Annotations = map[string]string{annotationDigest: hex.EncodeToString(sum[:])}
	parts := 0
	if len(data) <= partSize {
		index.Data = map[string][]byte{recordKey: data}
	} else {
		s.gen++
		for off := 0; off < len(data); off += partSize {
			part := s.secret(partName(s.name, s.gen, parts), map[string]string{labelPart: strconv.Itoa(s.gen % 2)})
			part.Data = map[string][]byte{recordKey: data[off:min(off+partSize, len(data))]}
			if err := s.upsert(ctx, part); err != nil {
				return fmt.Errorf("writing session record %s: %w", s.name, err)
			}
			parts++
		}
		index.Annotations[annotationParts] = strconv.Itoa(parts)
		index.Annotations[annotationGen] = strconv.Itoa(s.gen)
	}
	if err := s.upsert(ctx, index); err != nil {
		return fmt.Errorf("writing session record %s: %w", s.name, err)
	}
	// Parts of the generation before, or beyond this one's, are garbage
	// now that the index no longer names them.
	if s.parts > 0 {
		if err := s.deleteParts(ctx, s.gen, parts); err != nil {
			return err
		}
	}
	s.parts = parts
	return nil
}

// deleteParts removes the part Secrets that are not parts 0..n-1 of
// generation gen.
func (s *store) deleteParts(ctx context.Context, gen, n int) error {
	var list corev1.SecretList
	if err := s.c.List(ctx, &list, client.InNamespace(SystemNamespace), client.MatchingLabels{labelSession: s.name}, client.HasLabels{labelPart}); err != nil {
		return err
	}
	keep := map[string]bool{}
	for i := 0; i < n; i++ {
		keep[partName(s.name, gen, i)] = true
	}
	for i := range list.Items {
		if !keep[list.Items[i].Name] {
			if err := s.c.Delete(ctx, &list.Items[i]); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	return nil
}

// read loads the record.
func (s *store) read(ctx context.Context) (*Record, error) {
	var index corev1.Secret
	err := s.c.Get(ctx, client.ObjectKey{Namespace: SystemNamespace, Name: secretName(s.name)}, &index)
	if apierrors.IsNotFound(err) {
		return nil, ErrNoRecord
	}
	if err != nil {
		return nil, err
	}
	data := index.Data[recordKey]
	if n, _ := strconv.Atoi(index.Annotations[annotationParts]); n > 0 {
		gen, _ := strconv.Atoi(index.Annotations[annotationGen])
		data = nil
		for i := 0; i < n; i++ {
			var part corev1.Secret
			if err := s.c.Get(ctx, client.ObjectKey{Namespace: SystemNamespace, Name: partName(s.name, gen, i)}, &part); err != nil {
				return nil, fmt.Errorf("reading part %d of session record %s: %w", i, s.name, err)
			}
			data = append(data, part.Data[recordKey]...)
		}
		s.gen, s.parts = gen, n
	}
	sum := sha256.Sum256(data)
	if want := index.Annotations[annotationDigest]; want != hex.EncodeToString(sum[:]) {
		return nil, fmt.Errorf("session record %s is corrupt (digest mismatch)", s.name)
	}
	r, err := decodeRecord(data)
	if err != nil {
		return nil, fmt.Errorf("session record %s: %w", s.name, err)
	}
	return r, nil
}

// remove deletes the record, parts first, so a record whose index is gone
// is gone whole.
func (s *store) remove(ctx context.Context) error {
	if err := s.deleteParts(ctx, 0, 0); err != nil {
		return err
	}
	err := s.c.Delete(ctx, s.secret(secretName(s.name), nil))
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// upsert creates the Secret or replaces the existing one's labels,
// annotations and data.
func (s *store) upsert(ctx context.Context, sec *corev1.Secret) error {
	if s.versions == nil {
		s.versions = map[string]string{}
	}
	if rv := s.versions[sec.Name]; rv != "" {
		obj := sec.DeepCopy()
		obj.ResourceVersion = rv
		if err := s.c.Update(ctx, obj); err == nil {
			s.versions[sec.Name] = obj.ResourceVersion
			return nil
		} else if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return err
		}
	}
	obj := sec.DeepCopy()
	err := s.c.Create(ctx, obj)
	for attempt := 0; apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err); attempt++ {
		if attempt == 5 {
			break
		}
		if err = s.c.Get(ctx, client.ObjectKeyFromObject(sec), obj); err != nil {
			return err
		}
		obj.Labels, obj.Annotations, obj.Data, obj.StringData = sec.Labels, sec.Annotations, sec.Data, nil
		err = s.c.Update(ctx, obj)
	}
	if err == nil {
		s.versions[sec.Name] = obj.ResourceVersion
	}
	return err
}
