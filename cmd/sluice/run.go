package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/cluster"
	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/session"
	"sluice.dev/sluice/internal/source"
)

type runFlags struct {
	kube               kubeFlags
	render             renderFlags
	limits             limitFlags
	file               string
	session            string
	mode               string
	pause              string
	values             []string
	helmRelease        string
	asOwner            string
	repo               string
	ref                string
	poll               time.Duration
	handoff            bool
	handoffFile        string
	allowClusterScoped bool
	steal              bool
	yes                bool
	readyTimeout       time.Duration
	leaseDuration      time.Duration
	output             string
}

func newRunCmd(s Streams) *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "run [PATH]",
		Short: "Run a live session: apply PATH on every save, then put the cluster back",
		Long: `Render PATH (a kustomization, a Helm chart or plain YAML) and apply it to the
cluster, then again on every change of what the render read, until Ctrl+C.
GitOps is paused meanwhile, only as far as needed (--pause object, the
default): the objects the session changes that a Flux Kustomization owns
are marked kustomize.toolkit.fluxcd.io/reconcile: disabled, and the
Kustomization goes on reconciling everything else from git. Where a mark
cannot hold, the owner is paused whole, and the session says why: a
HelmRelease (Helm upgrades its release whole) and a Kustomization whose
object the session deletes are suspended, an Argo CD Application loses its
automated sync (or gets argocd.argoproj.io/skip-reconcile where an
ApplicationSet or a parent Application would put its sync policy back).
An owner that a parent Kustomization applies from git is marked for the
parent to leave it paused. A pause that something reverts anyway ends the
session rather than fight the controller. --pause owner suspends every
owner. When the session ends, objects it created are deleted, objects it
changed or deleted get their prior state back (managed fields included,
so Flux owns them again), and the owners are resumed as they were and
asked to reconcile.

Each session is recorded on the cluster (namespace sluice-system): see
'sluice run list', 'sluice run stop' and 'sluice run cleanup'.

With --mode version the workload runs beside the existing one, in
namespaces of its own (NAMESPACE-SESSION); compare them with
'sluice diff --namespace A --against B'. A chart that a Flux HelmRelease
deploys is rendered with that HelmRelease's values unless --values is given.`,
		Example: `  sluice run deploy/overlays/dev -n dev
  sluice run charts/web --session alice-web
  sluice run --repo https://git.example.com/team/app.git --ref alice/feature deploy/overlays/dev --poll 30s
  sluice run -f run.yaml
  sluice run deploy/overlays/dev --mode version
  sluice run deploy/overlays/dev --pause owner`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, s, args)
		},
	}
	fl := cmd.Flags()
	f.kube.add(fl)
	f.render.add(fl, true)
	f.limits.add(fl)
	fl.StringVarP(&f.file, "filename", "f", "", "a RunConfig file holding these settings (flags override it)")
	fl.StringVar(&f.session, "session", "", "the session's name on the cluster (default: USER-DIRNAME)")
	fl.StringVar(&f.mode, "mode", "replace", "replace: apply over the workload, pausing its GitOps owners; version: run beside it in NAMESPACE-SESSION")
	fl.StringVar(&f.pause, "pause", "object", "object: pause only the objects the session changes where the owner's controller honours it (a Flux Kustomization), else the owner; owner: suspend every owner")
	fl.StringArrayVar(&f.values, "values", nil, "a values file for a chart (repeatable); without it, the HelmRelease's values")
	fl.StringVar(&f.helmRelease, "helm-release", "", "the HelmRelease (NAMESPACE/NAME) whose values a chart renders with (default: the one deploying it)")
	fl.StringVar(&f.asOwner, "as-owner", "", "render PATH as this Flux Kustomization ([Kustomization/]NAMESPACE/NAME) or Argo CD Application (Application/NAMESPACE/NAME) applies it (default: the one whose source and path are PATH's; none: as it is)")
	fl.StringVar(&f.repo, "repo", "", "run on a temporary checkout of this repository (with --ref), PATH inside it")
	fl.StringVar(&f.ref, "ref", "", "the branch (or tag) of --repo")
	fl.DurationVar(&f.poll, "poll", 0, "with --repo, fetch the branch again this often")
	fl.BoolVar(&f.handoff, "handoff", false, "at the end, keep the objects and write the Flux configuration that adopts them (a cluster no GitOps tool manages)")
	fl.StringVar(&f.handoffFile, "handoff-file", "", "where --handoff writes the Flux configuration (default: flux-SESSION.yaml)")
	fl.BoolVar(&f.allowClusterScoped, "allow-cluster-scoped", false, "with --mode version, apply cluster-scoped objects too (every version shares them)")
	fl.BoolVar(&f.steal, "steal", false, "take objects another session holds instead of refusing")
	fl.BoolVarP(&f.yes, "yes", "y", false, "run against a cluster that does not look local without asking")
	fl.DurationVar(&f.readyTimeout, "ready-timeout", 5*time.Second, "how long each iteration checks readiness (negative: not at all)")
	fl.StringVarP(&f.output, "output", "o", "text", "output format: text, or json (one object per iteration)")
	fl.DurationVar(&f.leaseDuration, "heartbeat-timeout", 15*time.Second, "how long without a heartbeat makes the session stale")
	fl.MarkHidden("heartbeat-timeout")
	cmd.AddCommand(newRunListCmd(s), newRunStopCmd(s), newRunCleanupCmd(s))
	return cmd
}

// fromConfig fills the flags the user did not set from a RunConfig.
func (f *runFlags) fromConfig(cmd *cobra.Command, args []string) ([]string, error) {
	if f.file == "" {
		return args, nil
	}
	set, err := config.Load(f.file)
	if err != nil {
		return nil, err
	}
	if len(set.RunConfigs) != 1 {
		return nil, fmt.Errorf("%s: expected one RunConfig, found %d", f.file, len(set.RunConfigs))
	}
	rc := set.RunConfigs[0]
	sp, dir := rc.Spec, rc.Origin.Dir
	changed := cmd.Flags().Changed
	str := func(name string, dst *string, v string) {
		if !changed(name) && v != "" {
			*dst = v
		}
	}
	str("namespace", &f.kube.namespace, sp.Namespace)
	str("context", &f.kube.context, sp.Context)
	str("session", &f.session, sp.Session)
	str("mode", &f.mode, sp.Mode)
	str("pause", &f.pause, sp.Pause)
	str("helm-release", &f.helmRelease, sp.HelmRelease)
	str("as-owner", &f.asOwner, sp.AsOwner)
	str("repo", &f.repo, sp.Repo)
	str("ref", &f.ref, sp.Ref)
	if !changed("values") {
		for _, v := range sp.Values {
			f.values = append(f.values, filepath.Join(dir, v))
		}
	}
	if !changed("poll") && sp.Poll != nil {
		f.poll = sp.Poll.Duration
	}
	if !changed("ready-timeout") && sp.ReadyTimeout != nil {
		f.readyTimeout = sp.ReadyTimeout.Duration
	}
	if !changed("handoff") {
		f.handoff = sp.Handoff
	}
	if !changed("handoff-file") && sp.HandoffFile != "" {
		f.handoffFile = filepath.Join(dir, sp.HandoffFile)
	}
	if !changed("allow-cluster-scoped") {
		f.allowClusterScoped = sp.AllowClusterScoped
	}
	if len(args) == 0 && sp.Path != "" {
		if sp.Repo != "" {
			args = []string{sp.Path}
		} else {
			args = []string{filepath.Join(dir, sp.Path)}
		}
	}
	return args, nil
}

func (f *runFlags) run(cmd *cobra.Command, s Streams, args []string) error {
	args, err := f.fromConfig(cmd, args)
	if err != nil {
		return exit(2, err)
	}
	if len(args) == 0 {
		if f.repo == "" {
			return exit(2, errors.New("PATH is required (or -f run.yaml with spec.path)"))
		}
		args = []string{"."}
	}
	if f.output != "text" && f.output != "json" {
		return exit(2, fmt.Errorf("-o %s: must be text or json", f.output))
	}
	if f.mode != string(session.Replace) && f.mode != string(session.Version) {
		return exit(2, fmt.Errorf("--mode %s: must be replace or version", f.mode))
	}
	if f.pause != string(session.PauseObject) && f.pause != string(session.PauseOwner) {
		return exit(2, fmt.Errorf("--pause %s: must be object or owner", f.pause))
	}
	if f.ref != "" && f.repo == "" {
		return exit(2, errors.New("--ref names a branch of --repo: set --repo"))
	}
	if f.handoff && f.mode == string(session.Version) {
		return exit(2, errors.New("--handoff hands over a replace session's objects: not with --mode version"))
	}
	dir := args[0]
	name := f.session
	if name == "" {
		name = defaultSessionName(dir)
	}
	if err := session.ValidateName(name); err != nil {
		return exit(2, fmt.Errorf("--session: %w", err))
	}
	c, err := f.kube.connect()
	if err != nil {
		return exit(2, err)
	}
	if err := f.confirm(c, s); err != nil {
		return exit(2, err)
	}
	ro, err := f.render.options(c, &f.limits)
	if err != nil {
		return exit(2, err)
	}
	if len(f.values) > 0 {
		var files []string
		for _, v := range f.values {
			rel, err := valuesPath(dir, v, f.repo != "")
			if err != nil {
				return exit(2, fmt.Errorf("--values %s: %w", v, err))
			}
			files = append(files, rel)
		}
		ro.Render = &v1alpha1.Render{Helm: &v1alpha1.HelmRender{ValuesFiles: files}}
	}
	p := &runPrinter{out: s.Out, err: s.Err, json: f.output == "json"}
	o := session.RunOptions{
		Session: session.Options{
			Name: name, Mode: session.Mode(f.mode), Pause: session.Pause(f.pause), Namespace: f.kube.namespace,
			AllowClusterScoped: f.allowClusterScoped, Steal: f.steal, Handoff: f.handoff,
			LeaseDuration: f.leaseDuration,
		},
		Dir: dir, Render: ro, HelmRelease: f.helmRelease, AsOwner: f.asOwner, ReadyTimeout: f.readyTimeout,
		Repo: f.repo, Ref: f.ref, Poll: f.poll, Auth: source.AuthFromEnv(os.Getenv),
		OnStart: p.started, OnIteration: p.iteration, OnStopping: p.stopping, OnNotice: p.notice,
	}
	out, err := session.Run(cmd.Context(), c, o)
	p.done()
	if out != nil && len(out.Handoff) > 0 {
		file := f.handoffFile
		if file == "" {
			file = "flux-" + name + ".yaml"
		}
		if werr := os.WriteFile(file, out.Handoff, 0o644); werr != nil {
			return exit(1, werr)
		}
		fmt.Fprintf(s.Err, "wrote %s: commit it where your cluster's Flux reads its configuration\n", file)
		s.Out.Write(out.Handoff)
	}
	if out != nil && out.Restoration != nil {
		p.restored(out.Restoration)
	}
	if err != nil {
		var ce *session.ConflictError
		if errors.As(err, &ce) {
			return exit(2, err)
		}
		return exit(1, err)
	}
	return nil
}

// valuesPath makes a values file relative to the chart directory, as the
// renderer reads them.
func valuesPath(dir, file string, inRepo bool) (string, error) {
	if inRepo {
		return filepath.ToSlash(file), nil // a path inside the checkout, relative to PATH
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	absFile, err := filepath.Abs(file)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(absFile); err != nil {
		return "", err
	}
	rel, err := filepath.Rel(absDir, absFile)
	if err != nil {
		return "", err
	}
	return filepath.ToSlash(rel), nil
}

// confirm guards clusters that do not look local: --context named, --yes,
// or an answer on the terminal.
func (f *runFlags) confirm(c *cluster.Client, s Streams) error {
	if c.Local() || f.kube.context != "" || f.yes {
		return nil
	}
	what := fmt.Sprintf("context %q (API server %s) does not look like a local cluster", c.Context, c.Host())
	in, ok := s.In.(*os.File)
	if !ok || !isTerminal(in) || !isTerminal(s.Err) {
		return fmt.Errorf("%s: name it with --context, or pass --yes", what)
	}
	fmt.Fprintf(s.Err, "%s. Run a live session against it? [y/N] ", what)
	answer, _ := bufio.NewReader(in).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
		return errors.New("not confirmed")
	}
	return nil
}

var notLabel = regexp.MustCompile(`[^a-z0-9-]+`)

// defaultSessionName is USER-DIRNAME as a DNS label.
func defaultSessionName(dir string) string {
	name := "sluice"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	abs, _ := filepath.Abs(dir)
	n := strings.Trim(notLabel.ReplaceAllString(strings.ToLower(name+"-"+filepath.Base(abs)), "-"), "-")
	if len(n) > 40 {
		n = strings.TrimRight(n[:40], "-")
	}
	return n
}

// runPrinter prints a session's progress: a line per iteration.
type runPrinter struct {
	out, err io.Writer
	json     bool
	sigs     chan os.Signal
}

func (p *runPrinter) started(st session.Started) {
	msg := fmt.Sprintf("session %s (%s mode; objects without a namespace go to %s), watching %s. Ctrl+C ends it and puts the cluster back.", st.Name, st.Mode, st.Namespace, st.Watching)
	if st.HelmRelease != nil {
		msg += fmt.Sprintf("\nthe chart renders with the values of HelmRelease %s/%s", st.HelmRelease.Namespace, st.HelmRelease.Name)
	}
	if st.Owner != "" {
		msg += fmt.Sprintf("\nPATH renders as %s applies it (--as-owner none: as it is)", st.Owner)
	}
	fmt.Fprintln(p.err, msg)
}

func (p *runPrinter) iteration(it session.Iteration) {
	if p.json {
		type line struct {
			session.Iteration
			Error string `json:"error,omitempty"`
		}
		l := line{Iteration: it}
		if it.Err != nil {
			l.Error = it.Err.Error()
		}
		json.NewEncoder(p.out).Encode(l)
		return
	}
	fmt.Fprintln(p.out, formatIteration(it, time.Now()))
	if it.AsOwner != "" {
		fmt.Fprintf(p.out, "   %s\n", it.AsOwner)
	}
	for _, line := range it.Paused {
		fmt.Fprintf(p.out, "   paused %s\n", line)
	}
	for _, w := range it.Warnings {
		fmt.Fprintf(p.out, "   hook %s\n", w)
	}
}

// notice prints what the session noticed between iterations.
func (p *runPrinter) notice(msg string) {
	if p.json {
		json.NewEncoder(p.out).Encode(map[string]string{"notice": msg})
		return
	}
	fmt.Fprintf(p.out, "   note: %s\n", msg)
}

// formatIteration is one line: when, where the tree is, what changed,
// readiness, latency.
func formatIteration(it session.Iteration, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d %s", it.N, now.Format("15:04:05"))
	if it.Branch != "" || it.Commit != "" {
		fmt.Fprintf(&b, " %s@%.7s", it.Branch, it.Commit)
	}
	if it.Err != nil {
		msg := strings.ReplaceAll(it.Err.Error(), "\n", "; ")
		fmt.Fprintf(&b, "  error: %s", msg)
		if it.Retrying {
			b.WriteString("  (retrying every second)")
		} else {
			b.WriteString("  (still watching: the next save retries)")
		}
		return b.String()
	}
	res := it.Result
	var counts, objs []string
	for _, a := range []cluster.Action{cluster.Created, cluster.Configured, cluster.Deleted, session.Kept, session.HandedBack, cluster.Unchanged} {
		if n := res.Count(a); n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", n, a))
		}
	}
	for _, ch := range res.Changes {
		switch {
		case ch.Action == cluster.Unchanged:
		case ch.Reason != "":
			objs = append(objs, fmt.Sprintf("%s %s (%s)", ch.Ref, ch.Action, ch.Reason))
		default:
			objs = append(objs, ch.Ref.String()+" "+string(ch.Action))
		}
	}
	if len(objs) > 6 {
		objs = append(objs[:6], fmt.Sprintf("and %d more", len(objs)-6))
	}
	fmt.Fprintf(&b, "  %s", strings.Join(counts, ", "))
	if len(objs) > 0 {
		fmt.Fprintf(&b, ": %s", strings.Join(objs, ", "))
	}
	switch {
	case !res.Changed():
	case it.Ready:
		b.WriteString("  ready")
	case len(it.NotReady) > 0:
		var nr []string
		for _, r := range it.NotReady {
			nr = append(nr, fmt.Sprintf("%s %s", r.Ref, r.Status))
		}
		fmt.Fprintf(&b, "  not ready yet: %s", strings.Join(nr, ", "))
	}
	fmt.Fprintf(&b, "  %s", it.Latency.Round(time.Millisecond))
	return b.String()
}

// stopping reports the end, and keeps a second Ctrl+C from abandoning the
// restore.
func (p *runPrinter) stopping(reason string) {
	fmt.Fprintf(p.err, "stopping (%s): putting the cluster back...\n", reason)
	p.sigs = make(chan os.Signal, 2)
	signal.Notify(p.sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		for range p.sigs {
			fmt.Fprintln(p.err, "still putting the cluster back: wait for it to finish (if this process is killed, `sluice run cleanup` finishes the job)")
		}
	}()
}

func (p *runPrinter) done() {
	if p.sigs != nil {
		signal.Stop(p.sigs)
		close(p.sigs)
	}
}

func (p *runPrinter) restored(r *session.Restoration) {
	fmt.Fprintln(p.err, restorationLine(r))
}

func restorationLine(r *session.Restoration) string {
	var parts []string
	add := func(verb string, refs []cluster.Ref) {
		if len(refs) == 0 {
			return
		}
		var names []string
		for _, ref := range refs {
			names = append(names, ref.String())
		}
		parts = append(parts, fmt.Sprintf("%s %d (%s)", verb, len(refs), strings.Join(names, ", ")))
	}
	add("deleted", r.Deleted)
	add("restored", r.Restored)
	add("handed back", r.Resumed)
	add("kept for GitOps", r.Kept)
	switch {
	case len(parts) == 0 && r.BySession:
		parts = append(parts, "it put the cluster back itself")
	case len(parts) == 0:
		parts = append(parts, "nothing to put back")
	}
	line := fmt.Sprintf("session %s ended: %s", r.Session, strings.Join(parts, "; "))
	for _, sk := range r.Skipped {
		line += "\n  left alone: " + sk
	}
	return line
}
