package controller

import (
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	"sluice.dev/sluice/api/v1alpha1"
)

// EventReason is a reason of the Events the controller records, the type
// they have, and what they say.
type EventReason struct {
	Reason, Type, Kinds, Meaning string
}

// eventReasons are every reason of an Event the controller records: the
// reference documents them, and a reason not listed here is refused by
// the recorder (in tests, the test fails).
var eventReasons = []EventReason{
	{"Committed", corev1.EventTypeNormal, "ManifestSync", "the sync committed its folder (the message names the commit and branch)"},
	{v1alpha1.ReasonFailed, corev1.EventTypeWarning, "ManifestSync, Image, RepoConfig", "the reconcile failed (the message says why); it is retried with backoff"},
	{v1alpha1.ReasonVerificationFailed, corev1.EventTypeWarning, "ManifestSync", "the source's commit or tag, or an image, is not signed as spec asks"},
	{v1alpha1.ReasonInvalid, corev1.EventTypeWarning, "ManifestSync, Image, RepoConfig", "the spec cannot succeed as it is; nothing is retried until it changes"},
	{v1alpha1.ReasonLocked, corev1.EventTypeNormal, "ManifestSync", "a developer's takeover holds the folder; the sync waits"},
	{"Unlocked", corev1.EventTypeNormal, "ManifestSync", "the takeover lock ended; the sync writes the folder again"},
	{"PullRequestOpened", corev1.EventTypeNormal, "ManifestSync", "the change waits for review in a new pull request"},
	{"PullRequestUpdated", corev1.EventTypeNormal, "ManifestSync", "the pull request was updated with a new commit"},
	{"PullRequestMerged", corev1.EventTypeNormal, "ManifestSync", "the pull request was merged"},
	{"PullRequestClosed", corev1.EventTypeNormal, "ManifestSync", "the pull request was closed without merging"},
	{"PruneProposed", corev1.EventTypeNormal, "ManifestSync", "removing a deleted sync's folder waits for review in a pull request"},
	{"HooksNotAsHelm", corev1.EventTypeWarning, "ManifestSync", "the sync committed a chart some of whose hooks its deployer does not run as Helm does (status.warnings names each)"},
	{"Built", corev1.EventTypeNormal, "Image", "the image was built and pushed (the message names the digest and tags)"},
	{"Reconciled", corev1.EventTypeNormal, "RepoConfig", "the RepoConfig's resources were written"},
}

// EventReasons are the reasons of the Events the controller records.
func EventReasons() []EventReason { return slices.Clone(eventReasons) }

// unlisted, when set, is told of each Event of a reason not listed
// (tests fail on it).
var unlisted atomic.Pointer[func(string)]

// checkedEvents records Events whose reason is listed, with the type
// listed for it; any other is logged as a defect, not recorded.
type checkedEvents struct {
	events.EventRecorder
	log *slog.Logger
}

func (c checkedEvents) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	i := slices.IndexFunc(eventReasons, func(e EventReason) bool { return e.Reason == reason })
	if i < 0 || eventReasons[i].Type != eventtype {
		msg := fmt.Sprintf("an Event of reason %q (%s) that the controller does not list", reason, eventtype)
		if f := unlisted.Load(); f != nil {
			(*f)(msg)
		}
		c.log.Error(msg)
		return
	}
	c.EventRecorder.Eventf(regarding, related, eventtype, reason, action, note, args...)
}
