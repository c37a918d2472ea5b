{{/*
Names, labels and the process map of the ohmlab-controller chart.

Fixed interface of the process (cmd/ohmlab-controller): the ports, paths and arguments below
are what the binary expects; they are constants of the chart, not values.
*/}}

{{- define "ohmlab-controller.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ohmlab-controller.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "ohmlab-controller.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Common labels. */}}
{{- define "ohmlab-controller.labels" -}}
helm.sh/chart: {{ include "ohmlab-controller.chart" . }}
app.kubernetes.io/name: {{ include "ohmlab-controller.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: ohmlab
{{- end -}}

{{/* Selector labels of every controller pod of the release. */}}
{{- define "ohmlab-controller.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ohmlab-controller.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end -}}

{{/* Selector labels of one process's pods. Argument: dict "root" $ "process" name. */}}
{{- define "ohmlab-controller.processSelectorLabels" -}}
{{ include "ohmlab-controller.selectorLabels" .root }}
ohmlab.fr/process: {{ .process }}
{{- end -}}

{{/* Name of a process's objects (Deployment, ServiceAccount, ConfigMap, NetworkPolicy). */}}
{{- define "ohmlab-controller.processName" -}}
{{- printf "%s-%s" (include "ohmlab-controller.fullname" .root) .process | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Name of a target's RBAC objects. Argument: dict "root" $ "target" name. */}}
{{- define "ohmlab-controller.targetName" -}}
{{- printf "%s-%s" (include "ohmlab-controller.fullname" .root) .target | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ohmlab-controller.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* Webhook objects. */}}
{{- define "ohmlab-controller.webhookServiceName" -}}
{{- printf "%s-webhook" (include "ohmlab-controller.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- define "ohmlab-controller.webhookCertificateName" -}}
{{- printf "%s-webhook" (include "ohmlab-controller.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{/* The serving certificate's Secret: the user's (webhook.certificate.secretName) or cert-manager's. */}}
{{- define "ohmlab-controller.webhookSecretName" -}}
{{- if .Values.webhook.certificate.secretName -}}
{{- .Values.webhook.certificate.secretName -}}
{{- else -}}
{{- printf "%s-webhook-tls" (include "ohmlab-controller.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/*
Where the serving certificate comes from: "secret" (the user's Secret and CA bundle) or
"cert-manager". Rendering fails when neither is possible.
*/}}
{{- define "ohmlab-controller.webhookCertificateSource" -}}
{{- $c := .Values.webhook.certificate -}}
{{- if and $c.secretName (not $c.caBundle) -}}
{{- fail "webhook.certificate.caBundle: required with webhook.certificate.secretName: the API server verifies the webhook's serving certificate with it. Set it to the PEM certificate of the CA that signed the Secret's tls.crt." -}}
{{- else if and $c.caBundle (not $c.secretName) -}}
{{- fail "webhook.certificate.secretName: required with webhook.certificate.caBundle: name the Secret (tls.crt, tls.key) the webhook serves." -}}
{{- else if $c.secretName -}}
secret
{{- else if .Capabilities.APIVersions.Has "cert-manager.io/v1" -}}
cert-manager
{{- else -}}
{{- fail "webhook.certificate: the webhook needs a serving certificate, and the cluster serves no cert-manager.io/v1 to issue it. Install cert-manager first (with helm template, pass --api-versions cert-manager.io/v1), or bring your own: set webhook.certificate.secretName (a kubernetes.io/tls Secret in the release namespace) and webhook.certificate.caBundle (its CA, PEM)." -}}
{{- end -}}
{{- end -}}

{{/*
Name of a target's Role and RoleBinding in a namespace: <fullname>-<target>[-<suffix>] in the
release namespace, and <release namespace>-<fullname>-<target>[-<suffix>] in any other (a watched
namespace, the leader-election namespace), where another release of the same name may put its own,
as the cluster-scoped names do. Argument: dict "root" $ "target" name "namespace" ns "suffix" name
(optional).
*/}}
{{- define "ohmlab-controller.roleName" -}}
{{- $name := include "ohmlab-controller.targetName" (dict "root" .root "target" .target) -}}
{{- with .suffix -}}
{{- $name = printf "%s-%s" $name . -}}
{{- end -}}
{{- if ne .namespace .root.Release.Namespace -}}
{{- $name = printf "%s-%s" .root.Release.Namespace $name -}}
{{- end -}}
{{- $name | trunc 253 | trimSuffix "-" -}}
{{- end -}}

{{/*
Name of a cluster-scoped object (ValidatingWebhookConfiguration, ClusterRole,
ClusterRoleBinding): <release namespace>-<fullname>[-<suffix>], so that two releases of one name
in two namespaces do not collide. Cluster-scoped names may be 253 characters long. Argument:
dict "root" $ "suffix" name (optional).
*/}}
{{- define "ohmlab-controller.clusterName" -}}
{{- $name := printf "%s-%s" .root.Release.Namespace (include "ohmlab-controller.fullname" .root) -}}
{{- with .suffix -}}
{{- $name = printf "%s-%s" $name . -}}
{{- end -}}
{{- $name | trunc 253 | trimSuffix "-" -}}
{{- end -}}

{{/*
Seconds of a Go duration (1m30s, 500ms, 1.5h), as the schema's pattern spells it: the sum of its
parts, as time.ParseDuration adds them.
*/}}
{{- define "ohmlab-controller.seconds" -}}
{{- $units := dict "ns" 1e-9 "us" 1e-6 "µs" 1e-6 "ms" 1e-3 "s" 1.0 "m" 60.0 "h" 3600.0 -}}
{{- $total := 0.0 -}}
{{- range $part := regexFindAll "[0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h)" (toString .) -1 -}}
{{- $number := regexFind "^[0-9]+(\\.[0-9]+)?" $part -}}
{{- $total = addf $total (mulf ($number | float64) (get $units (trimPrefix $number $part))) -}}
{{- end -}}
{{- $total -}}
{{- end -}}

{{/*
The Prometheus Operator kinds the cluster serves, as JSON: ["PodMonitor", "PrometheusRule"] or
a part of it. A cluster announces monitoring.coreos.com/v1/<Kind> for each CRD installed, and a
cluster may have only some of them (a PodMonitor without PrometheusRule); `helm template
--api-versions monitoring.coreos.com/v1` names the group version alone, which stands for both.
*/}}
{{- define "ohmlab-controller.monitoringKinds" -}}
{{- $gv := "monitoring.coreos.com/v1" -}}
{{- $kinds := list -}}
{{- $announced := list -}}
{{- range .Capabilities.APIVersions -}}
{{- if hasPrefix (printf "%s/" $gv) . -}}
{{- $announced = append $announced (trimPrefix (printf "%s/" $gv) .) -}}
{{- end -}}
{{- end -}}
{{- range $kind := list "PodMonitor" "PrometheusRule" -}}
{{- if or (has $kind $announced) (and (not $announced) ($.Capabilities.APIVersions.Has $gv)) -}}
{{- $kinds = append $kinds $kind -}}
{{- end -}}
{{- end -}}
{{- toJson $kinds -}}
{{- end -}}

{{/* Constants of the process. */}}
{{- define "ohmlab-controller.configDir" -}}/etc/ohmlab{{- end -}}
{{- define "ohmlab-controller.webhookCertDir" -}}/tmp/k8s-webhook-server/serving-certs{{- end -}}
{{- define "ohmlab-controller.webhookPath.vault" -}}/validate-ohmlab-fr-v1alpha1-vaultseed{{- end -}}
{{- define "ohmlab-controller.metricsPort" -}}8080{{- end -}}
{{- define "ohmlab-controller.healthPort" -}}8081{{- end -}}
{{- define "ohmlab-controller.webhookPort" -}}9443{{- end -}}
{{/* Directory of a target's projected Vault token. Argument: the target name. */}}
{{- define "ohmlab-controller.tokenDir" -}}/var/run/secrets/ohmlab/{{ . }}{{- end -}}
{{/* Directory of a target's backend CA, inside the config volume. Argument: the target name. */}}
{{- define "ohmlab-controller.caSubdir" -}}{{ . }}-ca{{- end -}}

{{/* Namespace of a target's Lease. Argument: dict "root" $ "target" name. */}}
{{- define "ohmlab-controller.leaseNamespace" -}}
{{- $t := index .root.Values.targets .target -}}
{{- default .root.Release.Namespace $t.leaderElection.namespace -}}
{{- end -}}

{{/*
The process map, as JSON: {"<process>": ["<target>", ...]} with only enabled targets, processes
without an enabled target left out. Rendering fails here on every inconsistent combination, so
each template that includes it checks the values. Use: include ... | fromJson.
*/}}
{{- define "ohmlab-controller.processes" -}}
{{- $reserved := list "harbor" "sonarqube" -}}
{{- $enabled := list -}}
{{- range $name := keys .Values.targets | sortAlpha -}}
{{- $t := index $.Values.targets $name -}}
{{- if $t.enabled -}}
{{- if has $name $reserved -}}
{{- fail (printf "targets.%s.enabled: %q is a reserved target name: the controller has no %s target yet. Set targets.%s.enabled=false." $name $name $name $name) -}}
{{- end -}}
{{- $enabled = append $enabled $name -}}
{{- end -}}
{{- end -}}
{{- if and $enabled (lt (int .Values.replicas) 1) -}}
{{- fail (printf "replicas: %v with the targets %s enabled: nothing would reconcile them, and the VaultSeed webhook (failurePolicy Fail) would refuse every change. Set replicas to 1 or more (2 keep admissions answered while a pod restarts), or disable the targets." .Values.replicas (join ", " $enabled)) -}}
{{- end -}}
{{- if and .Values.targets.vault.shards (not (has "vault" $enabled)) -}}
{{- fail "targets.vault.shards: the Vault target is disabled, so no shard runs. Set targets.vault.enabled=true, or remove the shards." -}}
{{- end -}}
{{- if has "vault" $enabled -}}
{{- $v := .Values.targets.vault -}}
{{- if not $v.namespaces -}}
{{- fail "targets.vault.namespaces: the Vault target is enabled but watches no namespace. List the namespaces of its VaultSeeds, for example [vault-operator-system]." -}}
{{- end -}}
{{- if and $v.backend.ca.configMap $v.backend.ca.secret -}}
{{- fail "targets.vault.backend.ca: set configMap or secret, not both." -}}
{{- end -}}
{{- /* The controller refuses to start with these under 1s (reconcilers.LoadVaultConfig). */ -}}
{{- range $key, $d := dict "resyncPeriod" $v.resyncPeriod "leaderElection.leaseDuration" $v.leaderElection.leaseDuration -}}
{{- if lt (include "ohmlab-controller.seconds" $d | float64) 1.0 -}}
{{- fail (printf "targets.vault.%s: %s is under 1s: the controller refuses to start with it. Set 1s or more." $key $d) -}}
{{- end -}}
{{- end -}}
{{- if $v.tenants.enabled -}}
{{- if not $v.tenants.namespaces -}}
{{- fail "targets.vault.tenants.namespaces: tenants are enabled but no namespace is a tenant. List the tenant namespaces, or set targets.vault.tenants.enabled=false." -}}
{{- end -}}
{{- range $seg := splitList "/" $v.tenants.prefix -}}
{{- if or (eq $seg ".") (eq $seg "..") -}}
{{- fail (printf "targets.vault.tenants.prefix: %q has a segment '%s': Vault's client cleans it away, so the prefix would name another path." $v.tenants.prefix $seg) -}}
{{- end -}}
{{- end -}}
{{- $fixed := index (splitList "{namespace}" $v.tenants.prefix) 0 -}}
{{- range $src := $v.tenants.sharedSources -}}
{{- if or (hasPrefix $fixed $src) (hasPrefix $src $fixed) -}}
{{- fail (printf "targets.vault.tenants.sharedSources: %q overlaps the tenants' prefix %q: a shared source must lie outside every tenant's prefix (the controller refuses to start with it)." $src $v.tenants.prefix) -}}
{{- end -}}
{{- range $seg := splitList "/" $src -}}
{{- if or (eq $seg ".") (eq $seg "..") -}}
{{- fail (printf "targets.vault.tenants.sharedSources: %q has a segment '%s': Vault's client cleans it away, so the source would name another path." $src $seg) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range $ns := $v.tenants.namespaces -}}
{{- if has $ns $v.namespaces -}}
{{- fail (printf "targets.vault.tenants.namespaces: %q is also in targets.vault.namespaces: a namespace is a platform namespace (the controller's Vault identity) or a tenant (its own), not both." $ns) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- else if .Values.targets.vault.tenants.enabled -}}
{{- fail "targets.vault.tenants.enabled: the Vault target is disabled, so no tenant is reconciled. Set targets.vault.enabled=true, or targets.vault.tenants.enabled=false." -}}
{{- end -}}
{{- $procs := dict -}}
{{- if .Values.deployments -}}
{{- $seen := dict -}}
{{- range $proc := keys .Values.deployments | sortAlpha -}}
{{- $list := list -}}
{{- range $t := index $.Values.deployments $proc -}}
{{- if hasKey $seen $t -}}
{{- fail (printf "deployments: target %q is listed in both %q and %q. Every target must appear in exactly one process." $t (get $seen $t) $proc) -}}
{{- end -}}
{{- $_ := set $seen $t $proc -}}
{{- if has $t $enabled -}}
{{- $list = append $list $t -}}
{{- end -}}
{{- end -}}
{{- if $list -}}
{{- $_ := set $procs $proc (sortAlpha $list) -}}
{{- end -}}
{{- end -}}
{{- range $t := $enabled -}}
{{- if not (hasKey $seen $t) -}}
{{- fail (printf "deployments: target %q is enabled but no process lists it. Add it to exactly one entry, for example deployments.%s: [%s]." $t $t $t) -}}
{{- end -}}
{{- end -}}
{{- else -}}
{{- range $t := $enabled -}}
{{- $_ := set $procs $t (list $t) -}}
{{- end -}}
{{- end -}}
{{- toJson $procs -}}
{{- end -}}

{{/*
The shard processes, as JSON: {"<process>": {"target": "vault", "shard": "<shard>", "serviceAccount":
"<process of the target>"}}, one per entry of targets.vault.shards when the target is enabled. A
shard's process is named <target>-shard-<shard>; it reconciles only the objects labelled
ohmlab.fr/shard=<shard>, under the Lease ohmlab-controller-<target>-<shard>, runs as the
ServiceAccount of the process that runs the target (same RBAC, same Vault role), and serves no
webhook. Use: include ... | fromJson.
*/}}
{{- define "ohmlab-controller.shards" -}}
{{- $procs := include "ohmlab-controller.processes" . | fromJson -}}
{{- $out := dict -}}
{{- $v := .Values.targets.vault -}}
{{- if and $v.enabled $v.shards -}}
{{- $owner := include "ohmlab-controller.processOf" (dict "root" . "target" "vault") -}}
{{- range $shard := $v.shards -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" $shard) -}}
{{- fail (printf "targets.vault.shards: %q is not a valid shard name: it is the value of the label ohmlab.fr/shard and part of the Lease ohmlab-controller-vault-<shard> and of a Deployment name, so it must be lowercase letters, digits and '-', starting and ending with a letter or digit" $shard) -}}
{{- end -}}
{{- $proc := printf "vault-shard-%s" $shard -}}
{{- $full := printf "%s-%s" (include "ohmlab-controller.fullname" $) $proc -}}
{{- if gt (len $full) 63 -}}
{{- fail (printf "targets.vault.shards: the Deployment of shard %q would be named %s, longer than 63 characters; use a shorter shard name (or fullnameOverride)" $shard $full) -}}
{{- end -}}
{{- if hasKey $out $proc -}}
{{- fail (printf "targets.vault.shards: %q is listed twice" $shard) -}}
{{- end -}}
{{- if hasKey $procs $proc -}}
{{- fail (printf "deployments: process %q has the name of the Deployment of shard %q of the Vault target; rename the process" $proc $shard) -}}
{{- end -}}
{{- $_ := set $out $proc (dict "target" "vault" "shard" $shard "serviceAccount" $owner) -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* The Lease names of a target: the unsharded one, then one per shard. Argument: dict "root" $ "target" name. */}}
{{- define "ohmlab-controller.leaseNames" -}}
{{- $t := index .root.Values.targets .target -}}
{{- $base := default (printf "ohmlab-controller-%s" .target) (($t.leaderElection).name) -}}
{{- $names := list $base -}}
{{- range $t.shards -}}
{{- $names = append $names (printf "%s-%s" $base .) -}}
{{- end -}}
{{- toJson $names -}}
{{- end -}}

{{/* The process that runs a target, or "". Argument: dict "root" $ "target" name. */}}
{{- define "ohmlab-controller.processOf" -}}
{{- $procs := include "ohmlab-controller.processes" .root | fromJson -}}
{{- $found := "" -}}
{{- range $p, $ts := $procs -}}
{{- if has $.target $ts -}}
{{- $found = $p -}}
{{- end -}}
{{- end -}}
{{- $found -}}
{{- end -}}

{{/* Kubernetes API of each target: group, resource, CRD names, webhook. */}}
{{- define "ohmlab-controller.targetAPI" -}}
{{- $apis := dict "vault" (dict "group" "ohmlab.fr" "version" "v1alpha1" "resource" "vaultseeds" "crds" (list "vaultseeds.ohmlab.fr")) -}}
{{- toJson (index $apis .) -}}
{{- end -}}

{{/*
One process's configuration file (/etc/ohmlab/config.yaml): only its targets' sections.
Argument: dict "root" $ "targets" list, and "shard" name for a shard's process.
*/}}
{{- define "ohmlab-controller.config" -}}
{{- $root := .root -}}
{{- $sections := dict -}}
{{- range $t := .targets -}}
{{- if eq $t "vault" -}}
{{- $v := $root.Values.targets.vault -}}
{{- $auth := dict "method" $v.backend.auth.method "mount" $v.backend.auth.mount "role" $v.backend.auth.role "audience" $v.backend.auth.audience "tokenFile" (printf "%s/token" (include "ohmlab-controller.tokenDir" $t)) -}}
{{- $backend := dict "address" $v.backend.address "timeout" $v.backend.timeout "qps" $v.backend.qps "burst" $v.backend.burst "auth" $auth -}}
{{- if or $v.backend.ca.configMap $v.backend.ca.secret -}}
{{- $_ := set $backend "caFile" (printf "%s/%s/ca.crt" (include "ohmlab-controller.configDir" $root) (include "ohmlab-controller.caSubdir" $t)) -}}
{{- end -}}
{{- if $v.backend.tlsServerName -}}
{{- $_ := set $backend "tlsServerName" $v.backend.tlsServerName -}}
{{- end -}}
{{- $le := dict "namespace" (include "ohmlab-controller.leaseNamespace" (dict "root" $root "target" $t)) "leaseDuration" $v.leaderElection.leaseDuration -}}
{{- if $v.leaderElection.name -}}
{{- $_ := set $le "name" $v.leaderElection.name -}}
{{- end -}}
{{- $section := dict "namespaces" $v.namespaces "observeOnly" $v.observeOnly "allowDelete" $v.allowDelete "resyncPeriod" $v.resyncPeriod "concurrency" $v.concurrency "leaderElection" $le "backend" $backend "tenants" $v.tenants -}}
{{- $brake := dict "vanishedShare" $v.brake.vanishedShare "minVanished" $v.brake.minVanished -}}
{{- if $v.brake.releasedAt -}}
{{- $_ := set $brake "releasedAt" $v.brake.releasedAt -}}
{{- end -}}
{{- $_ := set $section "brake" $brake -}}
{{- if $.shard -}}
{{- $_ := set $section "shard" $.shard -}}
{{- end -}}
{{- /* The shards that run, for the webhook's warning of a label naming another. */ -}}
{{- $_ := set $section "shards" (default list $v.shards) -}}
{{- $_ := set $sections $t $section -}}
{{- end -}}
{{- end -}}
{{- toYaml (dict "targets" $sections) -}}
{{- end -}}
