{{- /*
One controller Deployment. Argument: dict "root" $, "process" name, "targets" list,
"serviceAccount" (the process whose ServiceAccount it runs as), "config" (its config.yaml, for
the checksum), "webhook" (serves the admission webhook) and "shard" (a shard's process, or "").
*/ -}}
{{- define "ohmlab-controller.deployment" -}}
{{- $root := .root }}
{{- $proc := .process }}
{{- $targets := .targets }}
{{- $name := include "ohmlab-controller.processName" (dict "root" $root "process" $proc) }}
{{- $config := .config }}
{{- $shard := .shard }}
{{- $webhook := .webhook }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "ohmlab-controller.labels" $root | nindent 4 }}
    app.kubernetes.io/component: controller
    ohmlab.fr/process: {{ $proc }}
    {{- with $shard }}
    ohmlab.fr/shard: {{ . }}
    {{- end }}
  annotations:
    ohmlab.fr/targets: {{ join "," $targets | quote }}
spec:
  replicas: {{ $root.Values.replicas }}
  revisionHistoryLimit: {{ $root.Values.revisionHistoryLimit }}
  selector:
    matchLabels:
      {{- include "ohmlab-controller.processSelectorLabels" (dict "root" $root "process" $proc) | nindent 6 }}
  template:
    metadata:
      labels:
        {{- $selector := include "ohmlab-controller.processSelectorLabels" (dict "root" $root "process" $proc) | fromYaml }}
        {{- if $shard }}
        {{- $_ := set $selector "ohmlab.fr/shard" $shard }}
        {{- end }}
        {{- toYaml (merge $selector $root.Values.podLabels) | nindent 8 }}
      annotations:
        # A configuration change rolls the process.
        checksum/config: {{ $config | sha256sum }}
        kubectl.kubernetes.io/default-container: controller
        {{- with $root.Values.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ include "ohmlab-controller.processName" (dict "root" $root "process" .serviceAccount) }}
      automountServiceAccountToken: true
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $root.Values.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      securityContext:
        runAsNonRoot: true
        runAsUser: {{ $root.Values.securityContext.runAsUser }}
        runAsGroup: {{ $root.Values.securityContext.runAsGroup }}
        fsGroup: {{ $root.Values.securityContext.runAsGroup }}
        seccompProfile:
          type: RuntimeDefault
      containers:
        - name: controller
          image: {{ include "ohmlab-controller.image" $root }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          command:
            - /ohmlab-controller
          args:
            - --config={{ include "ohmlab-controller.configDir" $root }}/config.yaml
            - --metrics-bind-address=:{{ include "ohmlab-controller.metricsPort" $root }}
            - --health-probe-bind-address=:{{ include "ohmlab-controller.healthPort" $root }}
            {{- if $webhook }}
            - --webhook-port={{ include "ohmlab-controller.webhookPort" $root }}
            - --webhook-cert-dir={{ include "ohmlab-controller.webhookCertDir" $root }}
            {{- else }}
            # A shard serves no webhook: its cache holds only its shard's objects.
            - --webhook-port=0
            {{- end }}
            - --log-level={{ $root.Values.logLevel }}
          env:
            - name: POD_NAMESPACE
              valueFrom:
                fieldRef:
                  fieldPath: metadata.namespace
            - name: POD_NAME
              valueFrom:
                fieldRef:
                  fieldPath: metadata.name
            {{- with $root.Values.gogc }}
            - name: GOGC
              value: {{ . | quote }}
            {{- end }}
          ports:
            - name: metrics
              containerPort: {{ include "ohmlab-controller.metricsPort" $root }}
              protocol: TCP
            - name: health
              containerPort: {{ include "ohmlab-controller.healthPort" $root }}
              protocol: TCP
            {{- if $webhook }}
            - name: webhook
              containerPort: {{ include "ohmlab-controller.webhookPort" $root }}
              protocol: TCP
            {{- end }}
          {{- if $webhook }}
          # The API server calls the webhook through the Service: a deleted pod leaves kube-proxy's
          # rules a moment after its deletion, and admissions sent meanwhile still arrive here. The
          # kubelet sends SIGTERM (which stops the webhook server) after this hook: without it a
          # rollout loses admissions (failurePolicy Fail: refused applies; test/cluster counts them).
          lifecycle:
            preStop:
              sleep:
                seconds: 5
          {{- end }}
          livenessProbe:
            httpGet:
              path: /healthz
              port: health
            initialDelaySeconds: 5
            periodSeconds: 20
          readinessProbe:
            httpGet:
              path: /readyz
              port: health
            initialDelaySeconds: 5
            periodSeconds: 10
          securityContext:
            runAsNonRoot: true
            runAsUser: {{ $root.Values.securityContext.runAsUser }}
            runAsGroup: {{ $root.Values.securityContext.runAsGroup }}
            allowPrivilegeEscalation: false
            privileged: false
            readOnlyRootFilesystem: true
            capabilities:
              drop:
                - ALL
            seccompProfile:
              type: RuntimeDefault
          {{- with $root.Values.resources }}
          resources:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          volumeMounts:
            - name: config
              mountPath: {{ include "ohmlab-controller.configDir" $root }}
              readOnly: true
            - name: tmp
              mountPath: /tmp
            {{- if $webhook }}
            - name: webhook-certs
              mountPath: {{ include "ohmlab-controller.webhookCertDir" $root }}
              readOnly: true
            {{- end }}
            {{- range $t := $targets }}
            - name: {{ $t }}-token
              mountPath: {{ include "ohmlab-controller.tokenDir" $t }}
              readOnly: true
            {{- end }}
      volumes:
        # The configuration and, under <target>-ca/, each target's backend CA: one projected
        # volume, so that nothing is mounted inside another volume.
        - name: config
          projected:
            sources:
              - configMap:
                  name: {{ $name }}-config
                  items:
                    - key: config.yaml
                      path: config.yaml
              {{- range $t := $targets }}
              {{- $ca := (index $root.Values.targets $t).backend.ca }}
              {{- if $ca.configMap }}
              - configMap:
                  name: {{ $ca.configMap }}
                  items:
                    - key: {{ $ca.key }}
                      path: {{ include "ohmlab-controller.caSubdir" $t }}/ca.crt
              {{- else if $ca.secret }}
              - secret:
                  name: {{ $ca.secret }}
                  items:
                    - key: {{ $ca.key }}
                      path: {{ include "ohmlab-controller.caSubdir" $t }}/ca.crt
              {{- end }}
              {{- end }}
        - name: tmp
          emptyDir:
            sizeLimit: 16Mi
        {{- if $webhook }}
        - name: webhook-certs
          secret:
            secretName: {{ include "ohmlab-controller.webhookSecretName" $root }}
            defaultMode: 0440
        {{- end }}
        {{- range $t := $targets }}
        {{- $auth := (index $root.Values.targets $t).backend.auth }}
        # The token this target logs in to its backend with: audience {{ $auth.audience }}, not
        # an API credential, rotated by the kubelet.
        - name: {{ $t }}-token
          projected:
            sources:
              - serviceAccountToken:
                  audience: {{ $auth.audience }}
                  expirationSeconds: {{ $auth.tokenExpirationSeconds }}
                  path: token
        {{- end }}
      {{- with $root.Values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $root.Values.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $root.Values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- $spread := $root.Values.topologySpreadConstraints }}
      {{- if kindIs "invalid" $spread }}
      # Unset: the replicas on different nodes where the scheduler can, so that losing a node
      # leaves one answering admissions (failurePolicy Fail). pod-template-hash: during a rollout
      # only the new ReplicaSet's pods count.
      topologySpreadConstraints:
        - maxSkew: 1
          topologyKey: kubernetes.io/hostname
          whenUnsatisfiable: ScheduleAnyway
          labelSelector:
            matchLabels:
              {{- include "ohmlab-controller.processSelectorLabels" (dict "root" $root "process" $proc) | nindent 14 }}
          matchLabelKeys:
            - pod-template-hash
      {{- else if $spread }}
      topologySpreadConstraints:
        {{- toYaml $spread | nindent 8 }}
      {{- end }}
{{- end -}}
