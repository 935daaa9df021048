package main

import (
	"fmt"
	"strings"
)

// kubeflowLike lays out a kustomize tree of the shape and size of
// kubeflow's `example` overlay (about 700 objects, about 12 MB of YAML,
// most of it CRDs with large OpenAPI schemas): apps, each a base of CRDs,
// RBAC, workloads, services and generated ConfigMaps and Secrets, with an
// overlay setting its namespace, labels, images, replicas and a JSON
// patch; shared components; and a top overlay composing them all with
// common labels and annotations, as kubeflow's manifests do.
func kubeflowLike(apps int) map[string]string {
	files := map[string]string{}
	var top []string
	for a := 0; a < apps; a++ {
		app := fmt.Sprintf("app%02d", a)
		base := "apps/" + app + "/base/"
		var res []string
		add := func(name, content string) {
			files[base+name] = content
			res = append(res, name)
		}
		for c := 0; c < 2; c++ {
			add(fmt.Sprintf("crd-%d.yaml", c), crd(app, c))
		}
		add("rbac.yaml", rbac(app))
		for d := 0; d < 6; d++ {
			add(fmt.Sprintf("deployment-%d.yaml", d), deployment(app, d))
			add(fmt.Sprintf("service-%d.yaml", d), service(app, d))
		}
		add("params.yaml", fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s-params}\ndata:\n  image: registry.example.com/%s/controller:v1\n  namespace: kubeflow\n", app, app))
		files[base+"kustomization.yaml"] = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- " + strings.Join(res, "\n- ") +
			"\nconfigMapGenerator:\n- name: " + app + "-config\n  literals: [LOG_LEVEL=info, FEATURE_X=true, ENDPOINT=http://" + app + ":8080]\n" +
			"secretGenerator:\n- name: " + app + "-secret\n  literals: [TOKEN=changeme]\n" +
			"replacements:\n- source: {kind: ConfigMap, name: " + app + "-params, fieldPath: data.image}\n  targets:\n  - select: {kind: Deployment, name: " + app + "-worker-0}\n    fieldPaths: [spec.template.spec.containers.0.image]\n"
		ov := "apps/" + app + "/overlay/"
		files[ov+"kustomization.yaml"] = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: kubeflow\nresources: [../base]\n" +
			"labels:\n- pairs: {app.kubernetes.io/part-of: " + app + "}\n  includeSelectors: false\n" +
			"images:\n- name: registry.example.com/" + app + "/worker\n  newTag: v2.1.0\n" +
			"replicas:\n- name: " + app + "-worker-1\n  count: 3\n" +
			"patches:\n- path: resources.yaml\n- target: {kind: Deployment, labelSelector: tier=backend}\n  patch: |-\n    - op: add\n      path: /spec/template/metadata/annotations\n      value: {sidecar.istio.io/inject: \"true\"}\n"
		files[ov+"resources.yaml"] = fmt.Sprintf("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: %s-worker-0}\nspec:\n  template:\n    spec:\n      containers:\n      - name: main\n        resources: {limits: {cpu: \"2\", memory: 4Gi}}\n", app)
		top = append(top, "../../apps/"+app+"/overlay")
	}
	files["components/istio/kustomization.yaml"] = "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\npatches:\n- target: {kind: Service}\n  patch: |-\n    - op: add\n      path: /metadata/annotations\n      value: {networking.istio.io/exportTo: \".\"}\n"
	files["components/namespace/kustomization.yaml"] = "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources: [namespace.yaml]\n"
	files["components/namespace/namespace.yaml"] = "apiVersion: v1\nkind: Namespace\nmetadata: {name: kubeflow, labels: {istio-injection: enabled}}\n"
	files["overlays/example/kustomization.yaml"] = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- " + strings.Join(top, "\n- ") +
		"\ncomponents: [../../components/istio, ../../components/namespace]\n" +
		"labels:\n- pairs: {app.kubernetes.io/managed-by: platform}\ncommonAnnotations: {owner: platform-team}\n"
	return files
}

// crd is a CustomResourceDefinition with a large schema, as operators'
// CRDs have: three versions of a deep spec with many described fields.
func crd(app string, n int) string {
	kind := fmt.Sprintf("%sThing%d", strings.ToUpper(app[:1])+app[1:], n)
	plural := strings.ToLower(kind) + "s"
	var schema strings.Builder
	var props func(depth, indent int)
	props = func(depth, indent int) {
		pad := strings.Repeat(" ", indent)
		for f := 0; f < 12; f++ {
			fmt.Fprintf(&schema, "%sfield%d:\n%s  description: Field %d of this level configures how the controller reconciles the resource; see the operator's documentation for its defaults, its interaction with the other fields and the upgrade notes.\n", pad, f, pad, f)
			if depth > 0 && f < 4 {
				fmt.Fprintf(&schema, "%s  type: object\n%s  properties:\n", pad, pad)
				props(depth-1, indent+4)
			} else {
				fmt.Fprintf(&schema, "%s  type: string\n", pad)
			}
		}
	}
	props(2, 14)
	var versions strings.Builder
	for _, v := range []string{"v1alpha1", "v1beta1", "v1"} {
		fmt.Fprintf(&versions, "  - name: %s\n    served: true\n    storage: %v\n    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          spec:\n            type: object\n            properties:\n%s", v, v == "v1", schema.String())
	}
	return fmt.Sprintf("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: %s.%s.example.com\nspec:\n  group: %s.example.com\n  names: {kind: %s, plural: %s, singular: %s}\n  scope: Namespaced\n  versions:\n%s",
		plural, app, app, kind, plural, strings.ToLower(kind), versions.String())
}

func rbac(app string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: %s}\n", app)
	for _, k := range []string{"Role", "ClusterRole"} {
		fmt.Fprintf(&b, "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: %s\nmetadata: {name: %s-%s}\nrules:\n- apiGroups: [\"\", apps, %s.example.com]\n  resources: [pods, deployments, configmaps, secrets, things]\n  verbs: [get, list, watch, create, update, patch, delete]\n", k, app, strings.ToLower(k), app)
		fmt.Fprintf(&b, "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: %sBinding\nmetadata: {name: %s-%s}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: %s, name: %s-%s}\nsubjects: [{kind: ServiceAccount, name: %s, namespace: kubeflow}]\n", k, app, strings.ToLower(k), k, app, strings.ToLower(k), app)
	}
	return b.String()
}

func deployment(app string, n int) string {
	tier := "frontend"
	if n%2 == 0 {
		tier = "backend"
	}
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s-worker-%[2]d
  labels: {app: %[1]s, component: worker-%[2]d, tier: %[3]s}
spec:
  replicas: 1
  selector:
    matchLabels: {app: %[1]s, component: worker-%[2]d}
  template:
    metadata:
      labels: {app: %[1]s, component: worker-%[2]d, tier: %[3]s}
    spec:
      serviceAccountName: %[1]s
      containers:
      - name: main
        image: registry.example.com/%[1]s/worker:v1
        args: [--port=8080, --metrics-port=9090, --log-level=info]
        ports: [{name: http, containerPort: 8080}, {name: metrics, containerPort: 9090}]
        envFrom: [{configMapRef: {name: %[1]s-config}}, {secretRef: {name: %[1]s-secret}}]
        readinessProbe: {httpGet: {path: /healthz, port: http}, periodSeconds: 10}
        livenessProbe: {httpGet: {path: /livez, port: http}, periodSeconds: 20}
        resources: {requests: {cpu: 100m, memory: 128Mi}, limits: {cpu: "1", memory: 1Gi}}
        volumeMounts: [{name: config, mountPath: /etc/%[1]s}]
      volumes: [{name: config, configMap: {name: %[1]s-config}}]
`, app, n, tier)
}

func service(app string, n int) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata: {name: %[1]s-worker-%[2]d, labels: {app: %[1]s}}\nspec:\n  selector: {app: %[1]s, component: worker-%[2]d}\n  ports: [{name: http, port: 80, targetPort: http}, {name: metrics, port: 9090, targetPort: metrics}]\n", app, n)
}
