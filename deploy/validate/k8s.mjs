// Offline validation of pstrain's Kubernetes manifests (deploy/k8s/):
//
//   node deploy/validate/k8s.mjs ROOT
//
// ROOT is a checkout (or a Bazel test's runfiles) holding deploy/k8s/ and the
// built binaries chief/chief, ps/ps, worker/worker (or PSTRAIN_BIN_DIR). It
//  1. renders the kustomizations base/, tls/ (tls/secret.yaml made by
//     tls/make_secret.sh) and collective/ (no ps tasks), cross-checked with
//     `kubectl kustomize` where kubectl is installed, and reads tfjob.yaml;
//  2. validates every object against the Kubernetes API schema of
//     kubernetes-models (types, enums, required fields) and rejects fields
//     the API does not declare; the TFJob's own fields against the
//     kubeflow.org/v1 TFJob spec, its pod templates as PodTemplateSpecs;
//  3. checks that the pieces agree: Service names, selectors and ports with
//     the Jobs' subdomains, labels and container ports; the cluster's shape
//     with the Jobs' completions; the TF_CONFIG that pstrain-launch builds in
//     each pod with the DNS names Kubernetes gives it; every file a flag
//     names with the volume that provides it; every flag with the binary
//     that must accept it; each role's TLS certificate with its addresses
//     (and no certificate but the chief's with the chief's).
// Prints one line per failed check and a summary; exits 1 on any failure.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";
import { ModelDeclaration, UnknownFields } from "./strict_schema.mjs";

const root = path.resolve(process.argv[2] ?? ".");
// The built binaries: ROOT/<name>/<name> (runfiles), or PSTRAIN_BIN_DIR.
const binDir = path.resolve(process.env.PSTRAIN_BIN_DIR ?? root);
// The checkout this file is in (node runs it from its real path): the shipped
// models, which are private to model/shipped/ in Bazel.
const checkout = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const k8s = path.join(root, "deploy/k8s");
const launcher = path.join(k8s, "pstrain_launch.sh");
const roles = ["chief", "ps", "worker"];
const namespace = "ml";
const clusterDomain = "cluster.local";

// Paths in messages: the scratch copy of deploy/k8s shown as deploy/k8s.
let scratch = null;
function shown(p) {
  return scratch && p.startsWith(scratch) ? "deploy/k8s" + p.slice(scratch.length) : path.relative(root, p);
}

let passed = 0;
const failures = [];
function check(ok, what) {
  if (ok) passed++;
  else failures.push(what);
  return ok;
}
// The first path where two JSON values differ ("" if equal), object key order
// aside.
function difference(a, b, at = "") {
  if (a === b) return "";
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null ||
      Array.isArray(a) !== Array.isArray(b)) {
    return `${at || "(top)"}: expected ${short(b)}, got ${short(a)}`;
  }
  for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) {
    const d = difference(a[k], b[k], Array.isArray(a) ? `${at}[${k}]` : `${at}.${k}`);
    if (d) return d;
  }
  return "";
}
function short(value) {
  const text = JSON.stringify(value) ?? "undefined";
  return text.length > 200 ? text.slice(0, 200) + "..." : text;
}
function equal(actual, expected, what) {
  const d = difference(actual, expected);
  return check(d === "", `${what}: ${d}`);
}

// --- Reading and rendering -------------------------------------------------

// The objects of a YAML file, as Kubernetes' YAML 1.1 reader sees them.
function readYaml(file) {
  const objects = [];
  for (const doc of parseAllDocuments(fs.readFileSync(file, "utf8"), {
    version: "1.1",
    uniqueKeys: true,
  })) {
    for (const e of [...doc.errors, ...doc.warnings]) {
      check(false, `${shown(file)}: ${e.message}`);
    }
    const value = doc.toJS();
    if (value !== null) objects.push(value);
  }
  return objects;
}

// A JSON pointer's parent container and last key, for JSON patch ops.
function locate(object, pointer) {
  const keys = pointer.split("/").slice(1)
    .map((k) => k.replace(/~1/g, "/").replace(/~0/g, "~"));
  const last = keys.pop();
  let parent = object;
  for (const k of keys) {
    if (parent === undefined || parent === null) break;
    parent = parent[Array.isArray(parent) ? Number(k) : k];
  }
  return [parent, last];
}

// Applies RFC 6902 add/replace/remove ops (what tls-patch.yaml uses).
function applyJsonPatch(object, ops, where) {
  for (const op of ops) {
    const [parent, key] = locate(object, op.path);
    if (!check(parent !== undefined && parent !== null,
               `${where}: ${op.op} ${op.path}: no such parent`)) continue;
    if (Array.isArray(parent)) {
      const i = key === "-" ? parent.length : Number(key);
      if (op.op === "add") parent.splice(i, 0, structuredClone(op.value));
      else if (op.op === "replace") parent[i] = structuredClone(op.value);
      else if (op.op === "remove") parent.splice(i, 1);
      else check(false, `${where}: unsupported op ${op.op}`);
    } else {
      if (op.op !== "add") {
        check(key in parent, `${where}: ${op.op} ${op.path}: no such field`);
      }
      if (op.op === "remove") delete parent[key];
      else if (op.op === "add" || op.op === "replace") parent[key] = structuredClone(op.value);
      else check(false, `${where}: unsupported op ${op.op}`);
    }
  }
}

function matchesTarget(object, target) {
  const [group, version] = object.apiVersion.includes("/")
    ? object.apiVersion.split("/") : ["", object.apiVersion];
  return (target.kind === undefined || target.kind === object.kind) &&
    (target.name === undefined || target.name === object.metadata?.name) &&
    (target.group === undefined || target.group === group) &&
    (target.version === undefined || target.version === version);
}

// What `kubectl kustomize DIR` builds, for the features these kustomizations
// use: resources (files and directories), JSON patches with a target,
// patches that delete an object (`$patch: delete` with its apiVersion, kind
// and name), and images (a registry for the images).
function kustomize(dir) {
  const where = shown(path.join(dir, "kustomization.yaml"));
  const [k] = readYaml(path.join(dir, "kustomization.yaml"));
  const known = ["apiVersion", "kind", "resources", "patches", "images"];
  for (const key of Object.keys(k)) {
    check(known.includes(key), `${where}: ${key} is not handled by this test's renderer`);
  }
  let objects = [];
  for (const r of k.resources ?? []) {
    const p = path.join(dir, r);
    objects.push(...(fs.statSync(p).isDirectory() ? kustomize(p) : readYaml(p)));
  }
  for (const patch of k.patches ?? []) {
    const ops = patch.path ? readYaml(path.join(dir, patch.path))[0] : null;
    if (ops && !Array.isArray(ops) && ops.$patch === "delete") {
      const before = objects.length;
      objects = objects.filter((o) => !(o.apiVersion === ops.apiVersion && o.kind === ops.kind &&
                                          o.metadata?.name === ops.metadata?.name));
      check(objects.length === before - 1, `${where}: patch ${patch.path} deletes nothing`);
      continue;
    }
    if (!check(Array.isArray(ops), `${where}: patch ${patch.path} is not a JSON patch`)) continue;
    let matched = 0;
    for (const o of objects) {
      if (matchesTarget(o, patch.target ?? {})) {
        applyJsonPatch(o, ops, `${where}: ${o.kind}/${o.metadata.name}`);
        matched++;
      }
    }
    check(matched > 0, `${where}: patch ${patch.path} matches nothing`);
  }
  // images: [{name, newName, newTag}] for the containers of pod templates.
  for (const image of k.images ?? []) {
    for (const o of objects) {
      for (const c of o.spec?.template?.spec?.containers ?? []) {
        const [name, tag] = c.image.split(":");
        if (name !== image.name) continue;
        c.image = `${image.newName ?? name}${image.newTag ?? tag ? ":" + (image.newTag ?? tag) : ""}`;
      }
    }
  }
  return objects;
}

function key(o) {
  return `${o.kind}/${o.metadata?.name}`;
}

// Where kubectl is installed, its kustomize must build the same objects.
function crossCheckWithKubectl(dir, objects) {
  let out;
  try {
    out = execFileSync("kubectl", ["kustomize", dir], {
      encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  } catch (e) {
    if (e.code === "ENOENT") {
      console.log("note: no kubectl; the kustomizations are rendered by this test alone");
      return;
    }
    check(false, `kubectl kustomize ${shown(dir)}: ${e.stderr || e.message}`);
    return;
  }
  const theirs = new Map();
  for (const doc of parseAllDocuments(out, { version: "1.1" })) {
    const o = doc.toJS();
    if (o) theirs.set(key(o), o);
  }
  equal([...theirs.keys()].sort(), objects.map(key).sort(),
        `kubectl kustomize ${shown(dir)}: objects`);
  for (const o of objects) {
    equal(theirs.get(key(o)), o, `kubectl kustomize ${shown(dir)}: ${key(o)}`);
  }
}

// --- Schema ------------------------------------------------------------------

async function validateCore(object, where) {
  const model = await import(`kubernetes-models/${object.apiVersion}/${object.kind}`)
    .catch(() => null);
  if (!check(model !== null, `${where}: ${object.apiVersion} ${object.kind} is not a Kubernetes API kind`)) return;
  try {
    new model[object.kind](object).validate();
    check(true);
  } catch (e) {
    check(false, `${where}: ${e.message}`);
  }
  for (const field of UnknownFields(object, ModelDeclaration(object.apiVersion, object.kind))) {
    check(false, `${where}: unknown field ${field}`);
  }
}

// kubeflow.org/v1 TFJob (training-operator's TFJobSpec, RunPolicy,
// ReplicaSpec): its own fields by hand, its pod templates by the core schema.
async function validateTfJob(job, where) {
  const allowed = (o, keys, at) => {
    for (const k of Object.keys(o ?? {})) check(keys.includes(k), `${where}: unknown field ${at}${k}`);
  };
  allowed(job, ["apiVersion", "kind", "metadata", "spec"], "");
  // metadata is an ObjectMeta, as a pod template's.
  for (const field of UnknownFields({ metadata: job.metadata }, ModelDeclaration("v1", "PodTemplateSpec"))) {
    check(false, `${where}: unknown field ${field}`);
  }
  allowed(job.spec, ["runPolicy", "tfReplicaSpecs", "successPolicy", "enableDynamicWorker"], "spec.");
  const rp = job.spec?.runPolicy ?? {};
  allowed(rp, ["cleanPodPolicy", "ttlSecondsAfterFinished", "activeDeadlineSeconds",
               "backoffLimit", "schedulingPolicy", "suspend", "managedBy"], "spec.runPolicy.");
  if ("cleanPodPolicy" in rp) {
    check(["All", "Running", "None"].includes(rp.cleanPodPolicy),
          `${where}: spec.runPolicy.cleanPodPolicy ${rp.cleanPodPolicy} is not All, Running or None`);
  }
  for (const f of ["backoffLimit", "ttlSecondsAfterFinished", "activeDeadlineSeconds"]) {
    if (f in rp) check(Number.isInteger(rp[f]) && rp[f] >= 0, `${where}: spec.runPolicy.${f} is not a count`);
  }
  const specs = job.spec?.tfReplicaSpecs ?? {};
  check(Object.keys(specs).length > 0, `${where}: no tfReplicaSpecs`);
  const { PodTemplateSpec } = await import("kubernetes-models/v1/PodTemplateSpec");
  for (const [type, spec] of Object.entries(specs)) {
    const at = `spec.tfReplicaSpecs.${type}`;
    check(["Chief", "Master", "PS", "Worker", "Evaluator"].includes(type),
          `${where}: ${at}: not a TFJob replica type`);
    allowed(spec, ["replicas", "template", "restartPolicy"], `${at}.`);
    check(Number.isInteger(spec.replicas) && spec.replicas >= 0, `${where}: ${at}.replicas is not a count`);
    check(["Always", "OnFailure", "Never", "ExitCode"].includes(spec.restartPolicy),
          `${where}: ${at}.restartPolicy ${spec.restartPolicy} is not Always, OnFailure, Never or ExitCode`);
    try {
      new PodTemplateSpec(spec.template).validate();
      check(true);
    } catch (e) {
      check(false, `${where}: ${at}.template: ${e.message}`);
    }
    for (const field of UnknownFields(spec.template, ModelDeclaration("v1", "PodTemplateSpec"))) {
      check(false, `${where}: unknown field ${at}.template.${field}`);
    }
  }
}

// --- What the pods run ---------------------------------------------------------

// The flags a pstrain binary accepts, from its --helpfull.
const knownFlags = new Map();
function flagsOf(binary) {
  if (!knownFlags.has(binary)) {
    let help = "";
    try {
      help = execFileSync(path.join(binDir, binary, binary), ["--helpfull"],
        { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
    } catch (e) {
      help = (e.stdout ?? "") + (e.stderr ?? "");  // --helpfull exits 1
    }
    knownFlags.set(binary, new Set([...help.matchAll(/^\s+--(\w+) /gm)].map((m) => m[1])));
  }
  return knownFlags.get(binary);
}

// The flags a container passes: its args after the role, and the lines of
// each --flagfile (read from the ConfigMap that provides it).
function containerFlags(container, volumeFile, where) {
  const flags = [];
  for (const arg of container.args.slice(1)) {
    const m = arg.match(/^--flagfile=(.*)$/);
    if (!m) {
      flags.push(arg);
      continue;
    }
    const text = volumeFile(m[1]);
    if (!check(text !== undefined, `${where}: --flagfile=${m[1]}: no volume provides it`)) continue;
    for (const line of text.split("\n").map((l) => l.trim())) {
      if (line === "" || line.startsWith("#")) continue;
      check(line.startsWith("--"), `${where}: ${m[1]}: "${line}" is not a flag`);
      flags.push(line);
    }
  }
  return flags.map((f) => {
    const m = f.match(/^--(\w+)(?:=(.*))?$/);
    return m ? { name: m[1], value: m[2] ?? "" } : { name: f, value: "" };
  });
}

// (path) -> the content a ConfigMap or Secret volume puts at that path in
// `pod`, "" for a path under another volume (a claim, an emptyDir), or
// undefined when no volume covers it.
function volumeFiles(pod, container, objects, where) {
  const volumes = new Map((pod.volumes ?? []).map((v) => [v.name, v]));
  for (const m of container.volumeMounts ?? []) {
    if (!check(volumes.has(m.name), `${where}: volumeMount ${m.name} has no volume`)) continue;
    const v = volumes.get(m.name);
    if (v.configMap) {
      check(objects.has(`ConfigMap/${v.configMap.name}`), `${where}: volume ${m.name}: no ConfigMap ${v.configMap.name}`);
    }
    if (v.secret) {
      check(objects.has(`Secret/${v.secret.secretName}`), `${where}: volume ${m.name}: no Secret ${v.secret.secretName}`);
    }
    if (v.persistentVolumeClaim) {
      check(objects.has(`PersistentVolumeClaim/${v.persistentVolumeClaim.claimName}`),
            `${where}: volume ${m.name}: no PersistentVolumeClaim ${v.persistentVolumeClaim.claimName}`);
    }
  }
  return (file) => {
    const mount = (container.volumeMounts ?? [])
      .filter((m) => file.startsWith(m.mountPath + "/"))
      .sort((a, b) => b.mountPath.length - a.mountPath.length)[0];
    if (!mount) return undefined;
    const v = volumes.get(mount.name);
    const rest = file.slice(mount.mountPath.length + 1);
    if (v?.configMap) return objects.get(`ConfigMap/${v.configMap.name}`)?.data?.[rest];
    if (v?.secret) {
      const data = objects.get(`Secret/${v.secret.secretName}`)?.data?.[rest];
      return data === undefined ? undefined : Buffer.from(data, "base64").toString();
    }
    return "";
  };
}

// The checks every pstrain container shares, in the Jobs and the TFJob.
function checkContainer(pod, container, role, objects, where) {
  equal(container.command, ["pstrain-launch"], `${where}: command`);
  equal(container.args?.[0], role, `${where}: role (first arg)`);
  const files = volumeFiles(pod, container, objects, where);
  const flags = containerFlags(container, files, where);
  const known = flagsOf(role);
  for (const f of flags) {
    check(known.has(f.name), `${where}: --${f.name} is not a flag of ${role} (${role} --helpfull)`);
    // A flag naming a file under /etc/pstrain must find it in a volume.
    if (f.value.startsWith("/etc/pstrain/")) {
      check(files(f.value) !== undefined, `${where}: --${f.name}=${f.value}: no volume provides it`);
    }
  }
  const flag = (name) => flags.find((f) => f.name === name)?.value;
  if (role === "chief") {
    // model_dir on a claim: checkpoints survive the pod.
    const dir = flag("model_dir");
    const mount = (container.volumeMounts ?? []).find((m) => dir?.startsWith(m.mountPath + "/"));
    const volume = (pod.volumes ?? []).find((v) => v.name === mount?.name);
    check(volume?.persistentVolumeClaim !== undefined,
          `${where}: --model_dir=${dir} is not on a PersistentVolumeClaim`);
    const model = flag("model");
    if (model?.startsWith("/")) {
      const text = files(model);
      if (check(text !== undefined, `${where}: --model=${model}: no volume provides it`)) {
        const shipped = JSON.parse(fs.readFileSync(path.join(checkout, "model/shipped/cnn.json"), "utf8"));
        equal(JSON.parse(text), shipped, `${where}: ${model} is the shipped cnn (model/shipped/cnn.json)`);
      }
    }
  }
  if (role === "worker") {
    check(Number(container.resources?.limits?.["nvidia.com/gpu"]) >= 1, `${where}: no nvidia.com/gpu limit`);
    check(/-cuda$/.test(container.image), `${where}: image ${container.image} is not the CUDA variant`);
  }
  check(!/-cuda$/.test(container.image) || role === "worker", `${where}: only workers need the CUDA image`);
  check(/^([\w.-]+(:\d+)?\/)?[\w./-]+:[\w.-]+$/.test(container.image) && !/:latest$/.test(container.image),
        `${where}: image ${container.image} is not pinned to a tag`);
  return flags;
}

// Prometheus scrapes the pod: prometheus.io/scrape "true", prometheus.io/port
// the binary's --metrics_port, served by a container port named "metrics"
// apart from the gRPC port.
function checkMetrics(template, container, flags, grpcPort, where) {
  const annotations = template.metadata?.annotations ?? {};
  equal(annotations["prometheus.io/scrape"], "true", `${where}: annotation prometheus.io/scrape`);
  const port = annotations["prometheus.io/port"];
  check(/^[0-9]+$/.test(port ?? ""), `${where}: annotation prometheus.io/port "${port}" is not a port number`);
  equal(annotations["prometheus.io/path"] ?? "/metrics", "/metrics", `${where}: annotation prometheus.io/path`);
  equal(flags.find((f) => f.name === "metrics_port")?.value, port,
        `${where}: --metrics_port is the prometheus.io/port annotation`);
  equal(container.ports?.find((p) => p.name === "metrics")?.containerPort, Number(port),
        `${where}: container port "metrics" is the prometheus.io/port annotation`);
  check(Number(port) !== grpcPort, `${where}: the metrics port ${port} is the gRPC port`);
}

// Runs pstrain-launch --print in a simulated pod.
function launch(role, env) {
  return JSON.parse(execFileSync(launcher, ["--print", role], {
    encoding: "utf8", env: { PATH: process.env.PATH, ...env } }));
}

// The cluster of deploy/k8s/base (or tls, or collective): Services, Jobs,
// TF_CONFIG. With PSTRAIN_NUM_PS 0 (collective) there is no ps Job, and the
// workers mount the chief's model_dir claim instead (worker 0 writes the
// checkpoints).
function checkJobs(objects, tls, variant = tls ? "tls" : "base") {
  const name = objects.get("ConfigMap/pstrain-cluster")?.data ?? {};
  check(Object.keys(name).length > 0, "no ConfigMap pstrain-cluster");
  const prefix = name.PSTRAIN_NAME ?? "pstrain";
  const port = Number(name.PSTRAIN_PORT ?? 2222);
  const counts = { chief: 1, ps: Number(name.PSTRAIN_NUM_PS), worker: Number(name.PSTRAIN_NUM_WORKERS) };
  const jobRoles = counts.ps === 0 ? roles.filter((r) => r !== "ps") : roles;
  if (counts.ps === 0) {
    check(!objects.has(`Job/${prefix}-ps`) && !objects.has(`Service/${prefix}-ps`),
          `${variant}: PSTRAIN_NUM_PS is 0, but a ps Job or Service is there`);
  }
  const pods = {};
  for (const role of jobRoles) {
    const jobName = `${prefix}-${role}`;
    const job = objects.get(`Job/${jobName}`);
    const service = objects.get(`Service/${jobName}`);
    const where = `${variant}: Job/${jobName}`;
    if (!check(job && service, `${variant}: no Job and Service named ${jobName}`)) continue;
    const spec = job.spec;
    const pod = spec.template.spec;
    const labels = spec.template.metadata?.labels ?? {};
    equal(spec.completionMode, "Indexed", `${where}: completionMode`);
    equal([spec.completions, spec.parallelism], [counts[role], counts[role]],
          `${where}: completions and parallelism (pstrain-cluster's count)`);
    equal(pod.restartPolicy, "OnFailure", `${where}: restartPolicy`);
    equal(pod.subdomain, service.metadata.name, `${where}: subdomain is its Service`);
    // The Service: headless, publishing not-ready pods, selecting these pods only.
    const s = service.spec;
    equal(s.clusterIP, "None", `${variant}: Service/${jobName}: clusterIP`);
    equal(s.publishNotReadyAddresses, true, `${variant}: Service/${jobName}: publishNotReadyAddresses`);
    check(Object.entries(s.selector ?? {}).every(([k, v]) => labels[k] === v) && s.selector,
          `${variant}: Service/${jobName}: selector ${JSON.stringify(s.selector)} does not select the Job's pods`);
    for (const other of jobRoles.filter((r) => r !== role)) {
      const otherLabels = objects.get(`Job/${prefix}-${other}`)?.spec.template.metadata?.labels ?? {};
      check(!Object.entries(s.selector ?? {}).every(([k, v]) => otherLabels[k] === v),
            `${variant}: Service/${jobName} also selects the ${other} pods`);
    }
    equal(s.ports?.map((p) => p.port), [port], `${variant}: Service/${jobName}: ports (PSTRAIN_PORT)`);
    const container = pod.containers[0];
    const cport = container.ports?.find((p) => p.name === s.ports?.[0]?.targetPort || p.containerPort === s.ports?.[0]?.targetPort);
    equal(cport?.containerPort, port, `${where}: the container port the Service targets`);
    for (const probe of ["startupProbe", "readinessProbe", "livenessProbe"]) {
      const p = container[probe];
      if (tls) {
        // The kubelet's gRPC probe has no client certificate.
        equal(p?.tcpSocket?.port, port, `${where}: ${probe} tcpSocket port`);
      } else {
        equal(p?.grpc?.port, port, `${where}: ${probe} on gRPC's health service`);
      }
    }
    check((container.envFrom ?? []).some((e) => e.configMapRef?.name === "pstrain-cluster"),
          `${where}: no envFrom pstrain-cluster`);
    check((container.env ?? []).some((e) => e.name === "POD_NAMESPACE" &&
          e.valueFrom?.fieldRef?.fieldPath === "metadata.namespace"),
          `${where}: no POD_NAMESPACE from metadata.namespace`);
    const flags = checkContainer(pod, container, role, objects, where);
    checkMetrics(spec.template, container, flags, port, where);
    if (tls) {
      for (const f of ["tls_cert", "tls_key", "tls_ca", "auth_token_file"]) {
        check(flags.some((x) => x.name === f), `${where}: no --${f}`);
      }
      // The chief's own token: the chief and the ps tasks have it, the
      // workers must not be able to read it.
      const chiefToken = flags.some((x) => x.name === "chief_token_file");
      const chiefSecret = (pod.volumes ?? []).some((v) => v.secret?.secretName === "pstrain-chief");
      if (role === "worker") {
        check(!chiefToken && !chiefSecret, `${where}: a worker gets the chief's token`);
      } else {
        check(chiefToken && chiefSecret, `${where}: no --chief_token_file from Secret pstrain-chief`);
      }
      // Its role's certificate, and no other role's.
      const certs = (pod.volumes ?? []).map((v) => v.secret?.secretName)
        .filter((n) => n?.startsWith("pstrain-tls-"));
      equal(certs, [`pstrain-tls-${role}`], `${where}: the certificate Secrets it mounts`);
    }
    pods[role] = { pod, container, jobName, subdomain: pod.subdomain };
  }
  if (Object.keys(pods).length !== jobRoles.length) return {};

  // Checkpoints: every ps (collective: every worker) mounts the chief's
  // model_dir claim at the same path.
  const claimMount = (p) => {
    const v = p.pod.volumes.find((x) => x.persistentVolumeClaim);
    const m = v && p.container.volumeMounts.find((x) => x.name === v.name);
    return v ? `${v.persistentVolumeClaim.claimName} at ${m?.mountPath}` : "none";
  };
  const writer = counts.ps === 0 ? "worker" : "ps";
  equal(claimMount(pods[writer]), claimMount(pods.chief),
        `${variant}: the ${writer} tasks mount the chief's model_dir claim`);
  if (counts.ps === 0) {
    const modelDir = (role) => {
      const files = volumeFiles(pods[role].pod, pods[role].container, objects, variant);
      return containerFlags(pods[role].container, files, variant).find((f) => f.name === "model_dir")?.value;
    };
    equal(modelDir("worker"), modelDir("chief"),
          `${variant}: the workers' --model_dir is the chief's (worker 0 writes the checkpoints)`);
  }

  // TF_CONFIG in every pod: the names Kubernetes gives the pods; the
  // addresses by role.
  const addresses = {};
  let first = null;
  for (const role of jobRoles) {
    for (let i = 0; i < counts[role]; i++) {
      let tf;
      try {
        tf = launch(role, {
          ...name, POD_NAMESPACE: namespace, JOB_COMPLETION_INDEX: String(i),
          PSTRAIN_HOSTNAME: `${pods[role].jobName}-${i}`, PSTRAIN_CLUSTER_DOMAIN: clusterDomain,
        });
      } catch (e) {
        check(false, `${variant}: pstrain-launch in pod ${pods[role].jobName}-${i}: ${e.stderr || e.message}`);
        continue;
      }
      equal(tf.task, { type: role, index: i }, `${variant}: TF_CONFIG task of pod ${pods[role].jobName}-${i}`);
      if (first === null) first = tf.cluster;
      equal(tf.cluster, first, `${variant}: TF_CONFIG cluster of pod ${pods[role].jobName}-${i} is everyone's`);
    }
  }
  if (counts.ps === 0) {
    check(first && !("ps" in first), `${variant}: TF_CONFIG has a ps job`);
  }
  for (const role of jobRoles) {
    addresses[role] = [...Array(counts[role]).keys()].map((i) =>
      `${pods[role].jobName}-${i}.${pods[role].subdomain}.${namespace}.svc.${clusterDomain}:${port}`);
    equal(first?.[role], addresses[role], `${variant}: TF_CONFIG ${role} addresses are the pods' DNS names`);
  }
  return addresses;
}

// The TFJob: the operator's contract (container "tensorflow", port
// "tfjob-port") and the same ConfigMap, claim and flags as the Jobs. The
// collective one (tfjob-collective.yaml) has no PS replicas, so its
// TF_CONFIG has no "ps" job, and its workers share the chief's model_dir.
function checkTfJob(job, base, where = "tfjob.yaml", collective = false) {
  const specs = job.spec.tfReplicaSpecs;
  const cluster = base.get("ConfigMap/pstrain-cluster").data;
  const types = collective ? ["Chief", "Worker"] : ["Chief", "PS", "Worker"];
  equal(Object.keys(specs).sort(), types, `${where}: replica types`);
  equal([specs.Chief?.replicas, specs.PS?.replicas, specs.Worker?.replicas],
        [1, collective ? undefined : Number(cluster.PSTRAIN_NUM_PS), Number(cluster.PSTRAIN_NUM_WORKERS)],
        `${where}: replicas (the shape of base/config.yaml)`);
  const objects = new Map(base);
  const operatorTf = {};
  for (const [type, spec] of Object.entries(specs)) {
    const role = type.toLowerCase();
    const pod = spec.template.spec;
    const container = pod.containers.find((c) => c.name === "tensorflow");
    if (!check(container, `${where}: ${type}: no container named tensorflow (the operator's TF_CONFIG goes there)`)) continue;
    equal(container.ports?.find((p) => p.name === "tfjob-port")?.containerPort, 2222,
          `${where}: ${type}: tfjob-port (the operator's default port)`);
    equal(spec.restartPolicy, "OnFailure", `${where}: ${type}: restartPolicy`);
    check(!container.readinessProbe && !container.startupProbe,
          `${where}: ${type}: a readiness or startup probe would hold back the DNS name the binary listens on`);
    equal(container.livenessProbe?.grpc?.port, 2222, `${where}: ${type}: livenessProbe on gRPC's health service`);
    const flags = checkContainer(pod, container, role, objects, `${where}: ${type}`);
    checkMetrics(spec.template, container, flags, 2222, `${where}: ${type}`);
    operatorTf[role] = [...Array(spec.replicas).keys()].map((i) =>
      `${job.metadata.name}-${role}-${i}.${namespace}.svc:2222`);
  }
  if (collective) {
    equal(claimOf(specs.Worker), claimOf(specs.Chief), `${where}: the workers mount the chief's model_dir claim`);
    const modelDir = (spec) => containerFlags(spec.template.spec.containers[0],
      volumeFiles(spec.template.spec, spec.template.spec.containers[0], objects, where), where)
      .find((f) => f.name === "model_dir")?.value;
    equal(modelDir(specs.Worker), modelDir(specs.Chief),
          `${where}: the workers' --model_dir is the chief's (worker 0 writes the checkpoints there)`);
    check(!("ps" in operatorTf), `${where}: TF_CONFIG has a ps job`);
  } else {
    equal(claimOf(specs.PS), claimOf(specs.Chief), `${where}: the ps mount the chief's model_dir claim`);
  }
  // pstrain-launch takes the operator's TF_CONFIG as it is, in every replica.
  for (const role of roles) {
    for (let i = 0; i < (operatorTf[role] ?? []).length; i++) {
      const tf = { cluster: operatorTf, task: { type: role, index: i }, environment: "cloud" };
      try {
        equal(launch(role, { TF_CONFIG: JSON.stringify(tf) }), tf, `${where}: TF_CONFIG of ${role} ${i}`);
      } catch (e) {
        check(false, `${where}: pstrain-launch ${role} ${i}: ${e.stderr || e.message}`);
      }
    }
  }
  return operatorTf;
}
function claimOf(spec) {
  const v = spec?.template.spec.volumes?.find((x) => x.persistentVolumeClaim);
  const m = spec?.template.spec.containers[0].volumeMounts?.find((x) => x.name === v?.name);
  return `${v?.persistentVolumeClaim.claimName} at ${m?.mountPath}`;
}

// Whether a certificate's DNS name covers `host`: equal, or a wildcard for
// its first label.
function nameCovers(san, host) {
  return san === host || (san.startsWith("*.") && host.slice(host.indexOf(".") + 1) === san.slice(2));
}

// The Secrets' certificates, one per role: signed by the CA, for server and
// client, naming every address of the role; and none but the chief's naming
// a chief address (a ps task takes a caller whose certificate names the
// chief's host as the chief).
function checkCertificates(objects, addresses) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "pstrain-tls-"));
  const write = (secret, k, file) => {
    const data = objects.get(`Secret/${secret}`)?.data?.[k];
    if (check(data, `tls/secret.yaml: no ${k} in Secret ${secret}`)) {
      fs.writeFileSync(path.join(dir, file), Buffer.from(data, "base64"));
    }
    return data !== undefined;
  };
  const openssl = (...args) => execFileSync("openssl", args, { cwd: dir, encoding: "utf8" });
  if (!write("pstrain-tls", "ca.crt", "ca.crt") || !write("pstrain-tls", "token", "token")) return;
  const hosts = (role) => (addresses[role] ?? []).map((a) => a.replace(/:\d+$/, ""));
  for (const role of roles) {
    const [crt, key] = [`${role}.crt`, `${role}.key`];
    if (!write(`pstrain-tls-${role}`, "tls.crt", crt) || !write(`pstrain-tls-${role}`, "tls.key", key)) continue;
    for (const purpose of ["sslserver", "sslclient"]) {
      check(/OK/.test(openssl("verify", "-CAfile", "ca.crt", "-purpose", purpose, crt)),
            `${role}'s tls.crt is not a ${purpose} certificate of ca.crt`);
    }
    equal(openssl("x509", "-in", crt, "-noout", "-pubkey"), openssl("pkey", "-in", key, "-pubout"),
          `${role}'s tls.key is the key of its tls.crt`);
    const sans = [...openssl("x509", "-in", crt, "-noout", "-ext", "subjectAltName")
      .matchAll(/DNS:([^,\s]+)/g)].map((m) => m[1]);
    for (const host of hosts(role)) {
      check(sans.some((san) => nameCovers(san, host)), `${role}'s tls.crt names none of ${host} (${sans.join(", ")})`);
    }
    if (role === "chief") continue;
    for (const host of hosts("chief")) {
      check(!sans.some((san) => nameCovers(san, host)), `${role}'s tls.crt names the chief's ${host}`);
    }
  }
  fs.rmSync(dir, { recursive: true });
}

// --- Main ----------------------------------------------------------------------

async function main() {
  // A copy of deploy/k8s with its links followed (kustomize ignores links, and
  // a Bazel test sees its files through them), and with tls/secret.yaml as
  // make_secret.sh makes it.
  scratch = fs.mkdtempSync(path.join(os.tmpdir(), "pstrain-k8s-"));
  fs.cpSync(k8s, scratch, { recursive: true, dereference: true });
  const secretYaml = execFileSync(path.join(k8s, "tls/make_secret.sh"), ["--namespace", namespace],
    { encoding: "utf8" });
  fs.writeFileSync(path.join(scratch, "tls/secret.yaml"), secretYaml);
  const base = kustomize(path.join(scratch, "base"));
  crossCheckWithKubectl(path.join(scratch, "base"), base);
  const tls = kustomize(path.join(scratch, "tls"));
  crossCheckWithKubectl(path.join(scratch, "tls"), tls);
  const collective = kustomize(path.join(scratch, "collective"));
  crossCheckWithKubectl(path.join(scratch, "collective"), collective);
  const tfjob = readYaml(path.join(k8s, "tfjob.yaml"));
  const tfjobCollective = readYaml(path.join(k8s, "tfjob-collective.yaml"));

  for (const [variant, objects] of [["base", base], ["tls", tls], ["collective", collective]]) {
    for (const o of objects) await validateCore(o, `${variant}: ${key(o)}`);
  }
  for (const [file, objects] of [["tfjob.yaml", tfjob], ["tfjob-collective.yaml", tfjobCollective]]) {
    check(objects.length === 1, `${file}: ${objects.length} objects, not one TFJob`);
    for (const o of objects) {
      if (check(o.apiVersion === "kubeflow.org/v1" && o.kind === "TFJob", `${file}: not a kubeflow.org/v1 TFJob`)) {
        await validateTfJob(o, file);
      }
    }
  }

  const byKey = (objects) => new Map(objects.map((o) => [key(o), o]));
  const baseMap = byKey(base);
  const tlsMap = byKey(tls);
  checkJobs(baseMap, false);
  const jobAddresses = checkJobs(tlsMap, true);
  checkJobs(byKey(collective), false, "collective");
  const tfAddresses = tfjob.length ? checkTfJob(tfjob[0], baseMap) : {};
  if (tfjobCollective.length) {
    checkTfJob(tfjobCollective[0], baseMap, "tfjob-collective.yaml", true);
  }
  checkCertificates(tlsMap, Object.fromEntries(roles.map((role) =>
    [role, [...(jobAddresses[role] ?? []), ...(tfAddresses[role] ?? [])]])));
  fs.rmSync(scratch, { recursive: true });

  for (const f of failures) console.log(`FAIL ${f}`);
  const objects = base.length + tls.length + collective.length + tfjob.length + tfjobCollective.length;
  console.log(`k8s manifests: ${objects} objects, ${passed} checks passed, ${failures.length} failed`);
  process.exit(failures.length ? 1 : 0);
}

await main();
