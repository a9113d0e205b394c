#!/usr/bin/env node
// Renders deploy/base and each overlay and validates every object against the
// Kubernetes OpenAPI schemas:
//   - kubernetes-models (validators generated from the Kubernetes OpenAPI
//     spec: types, required fields, enums, formats);
//   - an unknown-field walk over @kubernetes/client-node's model attribute
//     maps (generated from the same spec), the check kubectl's
//     --validate=strict makes, which the OpenAPI schemas alone do not
//     (they carry no additionalProperties: false).
// kustomize is not packaged in Debian 12, so the kustomizations are rendered
// here by a small renderer for exactly the features deploy/ uses (resources,
// namespace, labels, images, strategic-merge patches, configMapGenerator with
// files and behavior create/replace/merge, named with kustomize's content
// hash and the references to it rewritten); any other kustomization field is
// an error, so deploy/ cannot start depending on one unnoticed. Where kubectl
// is installed, `kubectl kustomize` renders each variant too and must give
// the same objects.
// Then cross-checks: the ConfigMap's config.yaml passes `podshimd
// --check-config`, the DaemonSet's probes, ports and mounts agree with it and
// it mounts the generated ConfigMap; a change to an overlay's config.yaml
// renames the ConfigMap and so changes the DaemonSet's pod template (a
// rollout); deploy/prometheus's scrape job and PodMonitor select the
// DaemonSet's pods and metrics port and add the node label.
//
// Usage: validate-manifests.js DEPLOY_DIR PODSHIMD
'use strict';
const fs = require('fs');
const path = require('path');
const os = require('os');
const { execFileSync, spawnSync } = require('child_process');
const crypto = require('crypto');
const yaml = require('js-yaml');
const k8s = require('@kubernetes/client-node');

const [deployDir, podshimd] = process.argv.slice(2);
let failures = 0;
const fail = (msg) => { console.error(`FAIL: ${msg}`); failures++; };

// --- a minimal kustomize -------------------------------------------------
const KUSTOMIZATION_KEYS = new Set(['apiVersion', 'kind', 'namespace', 'labels', 'resources', 'images', 'patches',
  'configMapGenerator']);
// Generated ConfigMaps, by object: the name they were generated with (the
// hash suffix is added once the whole variant is rendered, as kustomize does).
const generated = new WeakMap();
const MERGE_KEYS = { containers: 'name', initContainers: 'name', volumes: 'name', volumeMounts: 'name',
  env: 'name', ports: 'containerPort', tolerations: null };

function strategicMerge(base, patch, key) {
  if (Array.isArray(patch)) {
    const mk = MERGE_KEYS[key];
    if (!mk || !Array.isArray(base)) return patch;
    const out = base.map((x) => x);
    for (const p of patch) {
      const i = out.findIndex((b) => b[mk] === p[mk]);
      if (i >= 0) out[i] = strategicMerge(out[i], p, undefined); else out.push(p);
    }
    return out;
  }
  if (patch && typeof patch === 'object') {
    const out = Object.assign({}, base && typeof base === 'object' ? base : {});
    for (const [k, v] of Object.entries(patch)) out[k] = strategicMerge(out[k], v, k);
    return out;
  }
  return patch;
}

function loadDocs(file) {
  return yaml.loadAll(fs.readFileSync(file, 'utf8')).filter((d) => d);
}

// kustomize's name suffix for a ConfigMap (api/hasher): sha256 of Go's
// json.Marshal of {data, kind, name: ""} (keys sorted, <, >, &, U+2028 and
// U+2029 escaped), its first 10 hex digits with 0, 1, 3, a, e mapped to
// g, h, k, m, t.
function kustomizeHash(cm) {
  const sorted = (o) => Object.fromEntries(Object.keys(o).sort().map((k) => [k, o[k]]));
  const enc = { data: sorted(cm.data || {}), kind: 'ConfigMap', name: '' };
  if (cm.binaryData) enc.binaryData = sorted(cm.binaryData);
  const json = JSON.stringify(sorted(enc)).replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  const hex = crypto.createHash('sha256').update(json, 'utf8').digest('hex').slice(0, 10);
  return hex.replace(/[013ae]/g, (c) => ({ 0: 'g', 1: 'h', 3: 'k', a: 'm', e: 't' })[c]);
}

function generateConfigMaps(k, dir, kfile, objs) {
  for (const g of k.configMapGenerator || []) {
    const extra = Object.keys(g).filter((x) => !['name', 'files', 'behavior'].includes(x));
    if (extra.length) throw new Error(`${kfile}: configMapGenerator: only name, files and behavior are supported (not ${extra})`);
    const data = {};
    for (const f of g.files || []) {
      const [key, file] = f.includes('=') ? f.split('=', 2) : [path.basename(f), f];
      data[key] = fs.readFileSync(path.join(dir, file), 'utf8');
    }
    const behavior = g.behavior || 'create';
    const i = objs.findIndex((o) => o.kind === 'ConfigMap' && generated.get(o) === g.name);
    if (behavior === 'create') {
      if (i >= 0) throw new Error(`${kfile}: configMapGenerator ${g.name} exists already (behavior: replace or merge)`);
      const cm = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: g.name }, data };
      generated.set(cm, g.name);
      objs.push(cm);
    } else if (behavior === 'replace' || behavior === 'merge') {
      if (i < 0) throw new Error(`${kfile}: configMapGenerator ${g.name}: behavior ${behavior}, but the base generates no such ConfigMap`);
      objs[i].data = behavior === 'replace' ? data : Object.assign({}, objs[i].data, data);
    } else {
      throw new Error(`${kfile}: configMapGenerator ${g.name}: unknown behavior ${behavior}`);
    }
  }
}

// The pod template references to ConfigMaps (volumes, projected volumes,
// env, envFrom), each as [holder, key].
function configMapRefs(o) {
  const pod = o.spec && o.spec.template && o.spec.template.spec;
  if (!pod) return [];
  const refs = [];
  for (const v of pod.volumes || []) {
    if (v.configMap) refs.push([v.configMap, 'name']);
    for (const s of (v.projected && v.projected.sources) || []) if (s.configMap) refs.push([s.configMap, 'name']);
  }
  for (const c of [...(pod.containers || []), ...(pod.initContainers || [])]) {
    for (const e of c.env || []) if (e.valueFrom && e.valueFrom.configMapKeyRef) refs.push([e.valueFrom.configMapKeyRef, 'name']);
    for (const e of c.envFrom || []) if (e.configMapRef) refs.push([e.configMapRef, 'name']);
  }
  return refs;
}

// A whole variant: its objects with the generated names hash-suffixed and
// every reference to them rewritten.
function build(dir) {
  const objs = render(dir);
  const renamed = {};
  for (const o of objs) {
    if (!generated.has(o)) continue;
    o.metadata.name = `${generated.get(o)}-${kustomizeHash(o)}`;
    renamed[generated.get(o)] = o.metadata.name;
  }
  for (const o of objs) {
    for (const [holder, key] of configMapRefs(o)) if (renamed[holder[key]]) holder[key] = renamed[holder[key]];
  }
  return objs;
}

function render(dir) {
  const kfile = path.join(dir, 'kustomization.yaml');
  const k = yaml.load(fs.readFileSync(kfile, 'utf8'));
  for (const key of Object.keys(k)) {
    if (!KUSTOMIZATION_KEYS.has(key)) throw new Error(`${kfile}: field '${key}' is not supported by this renderer`);
  }
  if (k.apiVersion !== 'kustomize.config.k8s.io/v1beta1' || k.kind !== 'Kustomization') {
    throw new Error(`${kfile}: not a kustomize.config.k8s.io/v1beta1 Kustomization`);
  }
  let objs = [];
  for (const r of k.resources || []) {
    const p = path.join(dir, r);
    if (!fs.existsSync(p)) throw new Error(`${kfile}: resource '${r}' does not exist`);
    objs = objs.concat(fs.statSync(p).isDirectory() ? render(p) : loadDocs(p));
  }
  generateConfigMaps(k, dir, kfile, objs);
  for (const pt of k.patches || []) {
    if (!pt.path || Object.keys(pt).length !== 1) throw new Error(`${kfile}: only 'path' strategic-merge patches are supported`);
    for (const patch of loadDocs(path.join(dir, pt.path))) {
      const i = objs.findIndex((o) => o.kind === patch.kind && o.metadata.name === patch.metadata.name);
      if (i < 0) throw new Error(`${kfile}: patch ${pt.path} matches no ${patch.kind}/${patch.metadata.name}`);
      objs[i] = strategicMerge(objs[i], patch, undefined);
    }
  }
  for (const l of k.labels || []) {
    const extra = Object.keys(l).filter((x) => !['pairs', 'includeSelectors', 'includeTemplates'].includes(x));
    if (extra.length || l.includeSelectors || l.includeTemplates) throw new Error(`${kfile}: labels: only pairs without selectors/templates`);
    for (const o of objs) o.metadata.labels = Object.assign({}, o.metadata.labels, l.pairs);
  }
  if (k.namespace) {
    for (const o of objs) if (o.kind !== 'Namespace') o.metadata.namespace = k.namespace;
  }
  for (const img of k.images || []) {
    for (const o of objs) {
      const pod = (o.spec && o.spec.template && o.spec.template.spec) || {};
      // kustomize's images transformer rewrites init containers too.
      for (const c of [...(pod.containers || []), ...(pod.initContainers || [])]) {
        if (c.image === img.name) c.image = `${img.newName || img.name}:${img.newTag}`;
      }
    }
  }
  return objs;
}

// --- schema validation -----------------------------------------------------
function modelClass(o) {
  const group = o.apiVersion.includes('/') ? o.apiVersion : `v1`;
  const mod = require(`kubernetes-models/${group}`);
  const cls = mod[o.kind];
  if (!cls) throw new Error(`no schema for ${o.apiVersion} ${o.kind}`);
  return cls;
}

function clientType(o) {
  const v = o.apiVersion.split('/').pop();
  const name = `${v.charAt(0).toUpperCase()}${v.slice(1)}${o.kind}`;
  if (!k8s[name]) throw new Error(`no client-node model ${name}`);
  return name;
}

function strictWalk(value, type, where, errs) {
  if (value === null || value === undefined) return;
  let m;
  if ((m = /^Array<(.+)>$/.exec(type))) {
    if (!Array.isArray(value)) return errs.push(`${where}: expected a list`);
    value.forEach((v, i) => strictWalk(v, m[1], `${where}[${i}]`, errs));
    return;
  }
  if ((m = /^\{ \[key: string\]: (.+); \}$/.exec(type))) {
    for (const [k, v] of Object.entries(value)) strictWalk(v, m[1], `${where}.${k}`, errs);
    return;
  }
  const model = k8s[type];
  if (!model || typeof model.getAttributeTypeMap !== 'function') return;  // scalars, IntOrString, Quantity
  if (typeof value !== 'object' || Array.isArray(value)) return errs.push(`${where}: expected an object (${type})`);
  const attrs = model.getAttributeTypeMap();
  for (const [k, v] of Object.entries(value)) {
    const a = attrs.find((x) => x.baseName === k);
    if (!a) errs.push(`${where}: unknown field '${k}' in ${type}`);
    else strictWalk(v, a.type, `${where}.${k}`, errs);
  }
}

function validate(o, label) {
  const errs = [];
  try {
    new (modelClass(o))(o).validate();
  } catch (e) {
    errs.push(e.message);
  }
  strictWalk(o, clientType(o), `${o.kind}/${o.metadata && o.metadata.name}`, errs);
  return errs.map((e) => `${label}: ${e}`);
}

// The validators must be able to fail: a typo and a wrong type are caught.
function selfTest(ds) {
  const typo = JSON.parse(JSON.stringify(ds));
  typo.spec.template.spec.containers[0].securityContext.readOnlyRootFilesytem = true;
  if (!validate(typo, 'typo').some((e) => e.includes("unknown field 'readOnlyRootFilesytem'"))) fail('a misspelled field was not rejected');
  const wrong = JSON.parse(JSON.stringify(ds));
  wrong.spec.template.spec.hostPID = 'no';
  if (!validate(wrong, 'type').some((e) => e.includes('hostPID'))) fail('a string for a boolean was not rejected');
  const missing = JSON.parse(JSON.stringify(ds));
  delete missing.spec.selector;
  if (!validate(missing, 'required').some((e) => e.includes('selector'))) fail('a missing required field was not rejected');
}

// --- podshim-hook on the host ---------------------------------------------------
// The runtime runs the hooks podshimd adds on the host, so: an init container
// of the same image (the same version) installs podshim-hook into a hostPath
// directory; podshimd's --hook-host-path names that file by its host path
// and podshimd mounts the same host directory at that same path (read-only),
// so its check sees the file the runtime will run. Returns what is wrong.
function hookErrors(pod) {
  const errs = [];
  const vols = Object.fromEntries((pod.volumes || []).map((v) => [v.name, v]));
  const hostDir = (c, mp) => {
    const m = (c.volumeMounts || []).find((x) => x.mountPath === mp);
    const v = m && vols[m.name];
    return v && v.hostPath ? { host: v.hostPath.path, readOnly: !!m.readOnly } : null;
  };
  const c = pod.containers.find((x) => x.name === 'podshimd');
  const args = c.args || [];
  const i = args.indexOf('--hook-host-path');
  if (i < 0) return ['podshimd has no --hook-host-path: it would check the image\'s own hook, which the host lacks'];
  const hook = args[i + 1] || '';
  if (!hook.startsWith('/') || path.basename(hook) !== 'podshim-hook') errs.push(`--hook-host-path '${hook}' is not an absolute path to podshim-hook`);
  const dir = path.dirname(hook);
  const seen = hostDir(c, dir);
  if (!seen) errs.push(`podshimd does not mount the host directory ${dir} at ${dir}, so it cannot check the hook`);
  else {
    if (seen.host !== dir) errs.push(`podshimd mounts the host's ${seen.host} at ${dir}: --hook-host-path must be the host's path`);
    if (!seen.readOnly) errs.push(`podshimd's mount of ${dir} must be read-only`);
  }
  const init = (pod.initContainers || []).find((x) => (x.args || []).includes('--install-hook'));
  if (!init) return errs.concat(['no init container runs --install-hook: nothing puts podshim-hook on the host']);
  if (init.image !== c.image) errs.push(`init container ${init.name} runs image ${init.image}, podshimd ${c.image}: the hook would not match podshimd's version`);
  const target = init.args[init.args.indexOf('--install-hook') + 1];
  const wrote = hostDir(init, target);
  if (!wrote || wrote.readOnly) errs.push(`init container ${init.name} writes ${target}, which is no writable hostPath mount`);
  else if (wrote.host !== dir) errs.push(`init container ${init.name} installs into the host's ${wrote.host}, podshimd names ${dir}`);
  const sc = init.securityContext || {};
  if (sc.privileged || sc.allowPrivilegeEscalation !== false || !sc.readOnlyRootFilesystem ||
      JSON.stringify((sc.capabilities || {}).drop) !== '["ALL"]') {
    errs.push(`init container ${init.name} must be unprivileged, no escalation, read-only root, capabilities drop ALL`);
  }
  return errs;
}

// hookErrors must be able to fail.
function hookSelfTest(ds) {
  const mutate = (fn) => { const d = JSON.parse(JSON.stringify(ds)); fn(d.spec.template.spec); return hookErrors(d.spec.template.spec); };
  const podshimd = (pod) => pod.containers.find((x) => x.name === 'podshimd');
  const cases = [
    ['no --hook-host-path', (pod) => { const c = podshimd(pod); c.args = c.args.slice(0, c.args.indexOf('--hook-host-path')); }],
    ['hook dir not mounted', (pod) => { const c = podshimd(pod); c.volumeMounts = c.volumeMounts.filter((m) => m.mountPath !== '/opt/podshim/bin'); }],
    ['another image', (pod) => { pod.initContainers[0].image = 'podshim:0.0.1'; }],
    ['no init container', (pod) => { delete pod.initContainers; }],
  ];
  for (const [what, fn] of cases) if (mutate(fn).length === 0) fail(`hook check: '${what}' was not caught`);
}

// --- cross-checks ------------------------------------------------------------
function crossCheck(objs, label) {
  const ds = objs.find((o) => o.kind === 'DaemonSet');
  const cm = objs.find((o) => o.kind === 'ConfigMap');
  if (!ds || !cm) return fail(`${label}: needs a DaemonSet and a ConfigMap`);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'podshim-deploy-'));
  const cfgFile = path.join(tmp, 'config.yaml');
  fs.writeFileSync(cfgFile, cm.data['config.yaml']);
  try {
    execFileSync(podshimd, ['--check-config', '--config', cfgFile], { stdio: 'pipe' });
  } catch (e) {
    fail(`${label}: config.yaml is refused by podshimd --check-config: ${e.stderr}`);
  }
  fs.rmSync(tmp, { recursive: true });
  const cfg = yaml.load(cm.data['config.yaml']);
  const pod = ds.spec.template.spec;
  const c = pod.containers.find((x) => x.name === 'podshimd');
  const mounts = Object.fromEntries(c.volumeMounts.map((m) => [m.mountPath, m]));
  const vols = Object.fromEntries(pod.volumes.map((v) => [v.name, v]));
  for (const m of c.volumeMounts) if (!vols[m.name]) fail(`${label}: mount ${m.mountPath} names no volume '${m.name}'`);
  const hostOf = (mp) => mounts[mp] && vols[mounts[mp].name].hostPath && vols[mounts[mp].name].hostPath.path;
  const want = { [cfg.cgroup.root]: '/sys/fs/cgroup', '/var/run/nri': '/var/run/nri', '/var/run/cdi': '/var/run/cdi',
    '/etc/cdi': '/etc/cdi', '/run/podshim': '/run/podshim', [cfg.state_dir]: '/var/lib/podshim' };
  for (const [mp, host] of Object.entries(want)) {
    if (hostOf(mp) !== host) fail(`${label}: ${mp} must be the host's ${host}, is ${hostOf(mp)}`);
  }
  for (const mp of ['/var/run/cdi', '/etc/cdi']) if (!mounts[mp].readOnly) fail(`${label}: ${mp} must be read-only`);
  if (!cfg.nri.socket.startsWith('/var/run/nri/')) fail(`${label}: nri.socket outside the mounted /var/run/nri`);
  const args = c.args || [];
  const cfgPath = args[args.indexOf('--config') + 1];
  if (path.dirname(cfgPath) !== '/etc/podshim' || !mounts['/etc/podshim']) fail(`${label}: --config ${cfgPath} is not the mounted ConfigMap`);
  for (const p of ['startupProbe', 'readinessProbe', 'livenessProbe']) {
    const cmd = c[p] && c[p].exec && c[p].exec.command;
    if (!cmd || cmd[0] !== '/usr/bin/podshimctl' || cmd[cmd.indexOf('--socket') + 1] !== cfg.socket.path) {
      fail(`${label}: ${p} must exec /usr/bin/podshimctl on socket.path ${cfg.socket.path}`);
    }
  }
  const cfgVol = pod.volumes.find((v) => v.name === mounts['/etc/podshim'].name);
  if (!cfgVol.configMap || cfgVol.configMap.name !== cm.metadata.name) {
    fail(`${label}: /etc/podshim mounts ${JSON.stringify(cfgVol)}, not the generated ConfigMap ${cm.metadata.name}`);
  }
  if (!/^podshim-config-[a-z0-9]{10}$/.test(cm.metadata.name)) {
    fail(`${label}: ConfigMap ${cm.metadata.name} has no content hash in its name (configMapGenerator), so a config change would not roll the DaemonSet`);
  }
  const port = Number(String(cfg.metrics.listen).split(':').pop());
  if (!c.ports.some((p) => p.containerPort === port && p.name === 'metrics')) fail(`${label}: no 'metrics' port ${port}`);
  const sc = c.securityContext;
  if (sc.privileged || sc.allowPrivilegeEscalation !== false || !sc.readOnlyRootFilesystem) fail(`${label}: container must be unprivileged, no escalation, read-only root`);
  if (JSON.stringify(sc.capabilities.drop) !== '["ALL"]') fail(`${label}: capabilities must drop ALL`);
  if (pod.hostPID || pod.hostNetwork || pod.hostIPC) fail(`${label}: no host namespaces are needed`);
  if (pod.automountServiceAccountToken !== false) fail(`${label}: no API token is needed`);
  for (const e of hookErrors(pod)) fail(`${label}: ${e}`);
  if (objs.some((o) => /^(Cluster)?Role(Binding)?$/.test(o.kind))) fail(`${label}: RBAC objects, but podshimd uses no API`);
}

// deploy/prometheus: the scrape job and the PodMonitor find the DaemonSet's
// pods and metrics port, and give every series job="podshim" and node.
function scrapeCheck(objs, label) {
  const ds = objs.find((o) => o.kind === 'DaemonSet');
  const ns = ds.metadata.namespace;
  const podLabels = ds.spec.template.metadata.labels;
  const ports = ds.spec.template.spec.containers.flatMap((c) => c.ports || []);
  const sets = (rules, src, dst) => rules.some((r) => JSON.stringify(r[src]) === '["__meta_kubernetes_pod_node_name"]' &&
    r[dst] === 'node' && (r.action || 'replace') === 'replace');
  const job = yaml.load(fs.readFileSync(path.join(deployDir, 'prometheus/podshim-scrape.yaml'), 'utf8')).scrape_configs[0];
  const where = `${label}: prometheus/podshim-scrape.yaml`;
  if (job.job_name !== 'podshim') fail(`${where}: job_name ${job.job_name}, the alert rules select job="podshim"`);
  const sd = job.kubernetes_sd_configs[0];
  if (sd.role !== 'pod' || !sd.namespaces.names.includes(ns)) fail(`${where}: not pod discovery in namespace ${ns}`);
  for (const sel of sd.selectors || []) {
    const [k, v] = sel.label.split('=');
    if (podLabels[k] !== v) fail(`${where}: selector ${sel.label} does not match the DaemonSet's pod labels`);
  }
  const keep = job.relabel_configs.find((r) => r.action === 'keep' &&
    JSON.stringify(r.source_labels) === '["__meta_kubernetes_pod_container_port_name"]');
  if (!keep || !ports.some((p) => p.name && new RegExp(`^(?:${keep.regex})$`).test(p.name))) fail(`${where}: keeps no container port of the DaemonSet`);
  if (!sets(job.relabel_configs, 'source_labels', 'target_label')) fail(`${where}: no node label from __meta_kubernetes_pod_node_name`);
  const pm = yaml.load(fs.readFileSync(path.join(deployDir, 'prometheus/podshim-podmonitor.yaml'), 'utf8'));
  const pw = `${label}: prometheus/podshim-podmonitor.yaml`;
  if (pm.kind !== 'PodMonitor' || pm.metadata.namespace !== ns || !pm.spec.namespaceSelector.matchNames.includes(ns)) fail(`${pw}: not a PodMonitor for namespace ${ns}`);
  for (const [k, v] of Object.entries(pm.spec.selector.matchLabels)) if (podLabels[k] !== v) fail(`${pw}: selector ${k}=${v} does not match the DaemonSet's pod labels`);
  if (podLabels[pm.spec.jobLabel] !== 'podshim') fail(`${pw}: jobLabel ${pm.spec.jobLabel} does not make job="podshim"`);
  for (const ep of pm.spec.podMetricsEndpoints) {
    if (!ports.some((p) => p.name === ep.port)) fail(`${pw}: port ${ep.port} is no named port of the DaemonSet`);
    if (ep.honorLabels !== true) fail(`${pw}: honorLabels must be true (the per-container namespace/pod/container labels)`);
    if (!sets(ep.relabelings || [], 'sourceLabels', 'targetLabel')) fail(`${pw}: no node label from __meta_kubernetes_pod_node_name`);
  }
  if (ds.spec.template.metadata.annotations && ds.spec.template.metadata.annotations['prometheus.io/scrape']) {
    fail(`${label}: prometheus.io/scrape on the pod: an annotation-driven job would scrape it without the node label and displace the per-container namespace/pod`);
  }
}

// A config change renames the ConfigMap, so the DaemonSet's pod template
// changes and the DaemonSet rolls; an unchanged config keeps the name.
function rolloutCheck(variant) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'podshim-rollout-'));
  try {
    fs.cpSync(deployDir, tmp, { recursive: true });
    const tmpl = (dir) => JSON.stringify(build(path.join(dir, variant)).find((o) => o.kind === 'DaemonSet').spec.template);
    const before = tmpl(tmp);
    if (tmpl(tmp) !== before) fail(`${variant}: rendering twice gives two pod templates`);
    const k = yaml.load(fs.readFileSync(path.join(tmp, variant, 'kustomization.yaml'), 'utf8'));
    const gen = (k.configMapGenerator || []).find((g) => g.name === 'podshim-config');
    if (!gen) return fail(`${variant}: podshim-config is not generated (configMapGenerator), so a config change would not roll the DaemonSet`);
    const cfg = path.join(tmp, variant, gen.files[0].split('=').pop());
    const text = fs.readFileSync(cfg, 'utf8');
    const changed = text.replace(/^log_level: (\w+)$/m, (_, v) => `log_level: ${v === 'debug' ? 'info' : 'debug'}`);
    if (changed === text) return fail(`${variant}: ${cfg} has no log_level line to change`);
    fs.writeFileSync(cfg, changed);
    if (tmpl(tmp) === before) fail(`${variant}: changing config.yaml leaves the DaemonSet's pod template as it was: no rollout`);
  } finally {
    fs.rmSync(tmp, { recursive: true });
  }
}

// `kubectl kustomize`, where installed (not in Debian 12): the same objects.
function kubectlCheck(variant, objs) {
  const r = spawnSync('kubectl', ['kustomize', path.join(deployDir, variant)], { encoding: 'utf8' });
  if (r.error || r.status !== 0) {
    console.log(`${variant}: kubectl kustomize not available (${r.error ? r.error.code : r.stderr.trim().split('\n')[0]}); this renderer only`);
    return;
  }
  const canon = (list) => JSON.stringify(list.map((o) => JSON.parse(JSON.stringify(o)))
    .sort((a, b) => `${a.kind}/${a.metadata.name}`.localeCompare(`${b.kind}/${b.metadata.name}`)), (k, v) =>
    (v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.keys(v).sort().map((x) => [x, v[x]])) : v));
  const theirs = yaml.loadAll(r.stdout).filter((d) => d);
  if (canon(theirs) !== canon(objs)) {
    fail(`${variant}: kubectl kustomize renders other objects than this renderer:\n--- kubectl\n${canon(theirs)}\n--- here\n${canon(objs)}`);
  } else {
    console.log(`${variant}: kubectl kustomize renders the same ${objs.length} objects (${objs.find((o) => o.kind === 'ConfigMap').metadata.name})`);
  }
}

let checked = 0;
for (const variant of ['base', 'overlays/containerd', 'overlays/crio']) {
  let objs;
  try {
    objs = build(path.join(deployDir, variant));
  } catch (e) {
    fail(`${variant}: ${e.message}`);
    continue;
  }
  for (const o of objs) {
    for (const e of validate(o, `${variant} ${o.kind}/${o.metadata.name}`)) fail(e);
    checked++;
  }
  crossCheck(objs, variant);
  scrapeCheck(objs, variant);
  kubectlCheck(variant, objs);
  rolloutCheck(variant);
  if (variant === 'base') selfTest(objs.find((o) => o.kind === 'DaemonSet'));
  if (variant === 'base') hookSelfTest(objs.find((o) => o.kind === 'DaemonSet'));
  const ds = objs.find((o) => o.kind === 'DaemonSet');
  console.log(`${variant}: ${objs.map((o) => o.kind).join(', ')}; image ${ds.spec.template.spec.containers[0].image}`);
}
// The overlays differ where they say they do.
const crio = build(path.join(deployDir, 'overlays/crio'));
const crioCtr = crio.find((o) => o.kind === 'DaemonSet').spec.template.spec.containers[0];
if (!crioCtr.securityContext.seLinuxOptions || crioCtr.securityContext.seLinuxOptions.type !== 'spc_t') fail('crio: seLinuxOptions spc_t not applied');
if (!crioCtr.securityContext.capabilities) fail('crio: the SELinux patch replaced the securityContext instead of merging');
if (yaml.load(crio.find((o) => o.kind === 'ConfigMap').data['config.yaml']).cgroup.driver !== 'systemd') fail('crio: cgroup.driver is not systemd');
console.log(`${checked} objects validated, ${failures} failures`);
process.exit(failures ? 1 : 0);
