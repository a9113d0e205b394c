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
// namespace, labels, images, strategic-merge patches); any other kustomization
// field is an error, so deploy/ cannot start depending on one unnoticed.
// Then cross-checks: the ConfigMap's config.yaml passes `podshimd
// --check-config`, and the DaemonSet's probes, ports and mounts agree with it.
//
// Usage: validate-manifests.js DEPLOY_DIR PODSHIMD
'use strict';
const fs = require('fs');
const path = require('path');
const os = require('os');
const { execFileSync } = require('child_process');
const yaml = require('js-yaml');
const k8s = require('@kubernetes/client-node');

const [deployDir, podshimd] = process.argv.slice(2);
let failures = 0;
const fail = (msg) => { console.error(`FAIL: ${msg}`); failures++; };

// --- a minimal kustomize -------------------------------------------------
const KUSTOMIZATION_KEYS = new Set(['apiVersion', 'kind', 'namespace', 'labels', 'resources', 'images', 'patches']);
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
      for (const c of (o.spec && o.spec.template && o.spec.template.spec.containers) || []) {
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
  const port = Number(String(cfg.metrics.listen).split(':').pop());
  if (!c.ports.some((p) => p.containerPort === port && p.name === 'metrics')) fail(`${label}: no 'metrics' port ${port}`);
  const sc = c.securityContext;
  if (sc.privileged || sc.allowPrivilegeEscalation !== false || !sc.readOnlyRootFilesystem) fail(`${label}: container must be unprivileged, no escalation, read-only root`);
  if (JSON.stringify(sc.capabilities.drop) !== '["ALL"]') fail(`${label}: capabilities must drop ALL`);
  if (pod.hostPID || pod.hostNetwork || pod.hostIPC) fail(`${label}: no host namespaces are needed`);
  if (pod.automountServiceAccountToken !== false) fail(`${label}: no API token is needed`);
  if (objs.some((o) => /^(Cluster)?Role(Binding)?$/.test(o.kind))) fail(`${label}: RBAC objects, but podshimd uses no API`);
}

let checked = 0;
for (const variant of ['base', 'overlays/containerd', 'overlays/crio']) {
  let objs;
  try {
    objs = render(path.join(deployDir, variant));
  } catch (e) {
    fail(`${variant}: ${e.message}`);
    continue;
  }
  for (const o of objs) {
    for (const e of validate(o, `${variant} ${o.kind}/${o.metadata.name}`)) fail(e);
    checked++;
  }
  crossCheck(objs, variant);
  if (variant === 'base') selfTest(objs.find((o) => o.kind === 'DaemonSet'));
  const ds = objs.find((o) => o.kind === 'DaemonSet');
  console.log(`${variant}: ${objs.map((o) => o.kind).join(', ')}; image ${ds.spec.template.spec.containers[0].image}`);
}
// The overlays differ where they say they do.
const crio = render(path.join(deployDir, 'overlays/crio'));
const crioCtr = crio.find((o) => o.kind === 'DaemonSet').spec.template.spec.containers[0];
if (!crioCtr.securityContext.seLinuxOptions || crioCtr.securityContext.seLinuxOptions.type !== 'spc_t') fail('crio: seLinuxOptions spc_t not applied');
if (!crioCtr.securityContext.capabilities) fail('crio: the SELinux patch replaced the securityContext instead of merging');
if (yaml.load(crio.find((o) => o.kind === 'ConfigMap').data['config.yaml']).cgroup.driver !== 'systemd') fail('crio: cgroup.driver is not systemd');
console.log(`${checked} objects validated, ${failures} failures`);
process.exit(failures ? 1 : 0);
