// Package hooks makes a chart's rendered objects into what the tool that
// deploys a folder would put on the cluster had it deployed the chart
// itself: `helm template` prints every hook and test of a chart, and a
// folder of them applied as plain objects is not what `helm install`,
// helm-controller or Argo CD does. Test hooks are left out; lifecycle
// hooks keep the phases Argo CD maps them to, or run in Helm's order as
// Flux Kustomizations applied one after another; what a tool cannot do
// as Helm does is said, hook by hook.
package hooks
