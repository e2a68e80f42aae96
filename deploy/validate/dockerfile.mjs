// Checks of deploy/docker/Dockerfile that make it buildable by construction,
// where no Docker engine runs (deploy/validate/dockerfile_test.sh runs it):
//
//   node deploy/validate/dockerfile.mjs SRC SOURCES NEEDED
//
// SRC: the checkout (the build context). SOURCES: the labels of every source
// and BUILD file the three binaries are built from (genquery
// //deploy:image_sources). NEEDED: lines "<binary> <soname> <package>", the
// shared libraries each built binary names and the Debian package that holds
// each ("-" for one under /usr/local/cuda).
//
// Checked: every file the Dockerfile copies exists and is not excluded by
// Dockerfile.dockerignore, and together they hold every source of the
// binaries; the build stages run the README's install script; stages and
// images are named and pinned; apt-get follows hadolint's rules (DL3009,
// DL3015, DL3027); ADD only fetches URLs (DL3020); the runtime stages
// install the package of every library the binaries load, the data and jq,
// and run as a numeric non-root user; the launcher lands where the manifests
// call it.
import fs from "node:fs";
import path from "node:path";
import dockerfileAst from "dockerfile-ast";

const { DockerfileParser } = dockerfileAst;
const [src, sourcesFile, neededFile] = process.argv.slice(2).map((p) => path.resolve(p));
const dockerfilePath = path.join(src, "deploy/docker/Dockerfile");
const ignorePath = dockerfilePath + ".dockerignore";

let passed = 0;
const failures = [];
function check(ok, what) {
  if (ok) passed++;
  else failures.push(what);
  return ok;
}

const dockerfile = DockerfileParser.parse(fs.readFileSync(dockerfilePath, "utf8"));
const instructions = dockerfile.getInstructions();
const known = ["FROM", "RUN", "COPY", "ADD", "ENV", "ARG", "WORKDIR", "USER", "EXPOSE",
  "CMD", "ENTRYPOINT", "SHELL", "LABEL", "HEALTHCHECK", "VOLUME", "STOPSIGNAL"];

// Stages, in order: { name, from, instructions }.
const stages = [];
for (const i of instructions) {
  const keyword = i.getKeyword();
  const line = i.getRange().start.line + 1;
  check(known.includes(keyword), `Dockerfile:${line}: unknown instruction ${keyword}`);
  if (keyword === "FROM") {
    stages.push({ name: i.getBuildStage(), from: i.getImage(), line, instructions: [] });
  } else {
    check(stages.length > 0, `Dockerfile:${line}: ${keyword} before FROM`);
    stages.at(-1)?.instructions.push(i);
  }
}
const stageNames = stages.map((s) => s.name);
const byName = new Map(stages.map((s) => [s.name, s]));

// The instructions of a stage and of the stages it is built FROM.
function lineage(stage) {
  const chain = [];
  for (let s = stage; s; s = byName.get(s.from)) chain.unshift(s);
  return chain;
}
const runText = (i) => i.getArgumentsContent() ?? "";
const argsOf = (i) => i.getArguments().map((a) => a.getValue());
const flagsOf = (i) => new Map((i.getFlags?.() ?? []).map((f) => [f.getName(), f.getValue()]));

// --- Stages and images ----------------------------------------------------------
stages.forEach((s, n) => {
  check(s.name, `Dockerfile:${s.line}: stage without a name (FROM ... AS name)`);
  check(stageNames.indexOf(s.name) === n, `Dockerfile:${s.line}: stage name ${s.name} used twice`);
  if (stageNames.slice(0, n).includes(s.from)) return;
  // An image from a registry: a tag other than latest (DL3006, DL3007).
  const m = s.from?.match(/^[^:@]+(?::([\w.-]+))?(?:@sha256:[0-9a-f]{64})?$/);
  check(m && ((m[1] && m[1] !== "latest") || s.from.includes("@sha256:")),
        `Dockerfile:${s.line}: image ${s.from} is not pinned to a tag or digest`);
});
check(stageNames.at(-1) === "cpu", "the last stage (docker build's default target) is not cpu");
check(stageNames.includes("cuda"), "no cuda target");

// --- Copies ------------------------------------------------------------------------
// Dockerfile.dockerignore: patterns as Docker reads them (no ! exceptions here).
const ignored = fs.existsSync(ignorePath)
  ? fs.readFileSync(ignorePath, "utf8").split("\n").map((l) => l.trim())
      .filter((l) => l && !l.startsWith("#"))
  : [];
check(ignored.every((p) => !p.startsWith("!")), "Dockerfile.dockerignore: exceptions (!) are not handled by this test");
const globToRegExp = (p) => new RegExp("^" + p.replace(/\/$/, "").split("/").map((part) =>
  part === "**" ? ".*" : part.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, "[^/]*").replace(/\?/g, "[^/]"),
).join("/") + "(/.*)?$");
const ignoreRes = ignored.map(globToRegExp);

const copied = [];  // paths of the context that reach an image
for (const s of stages) {
  for (const i of s.instructions) {
    const keyword = i.getKeyword();
    if (keyword !== "COPY" && keyword !== "ADD") continue;
    const line = i.getRange().start.line + 1;
    const flags = flagsOf(i);
    const args = argsOf(i);
    const sources = args.slice(0, -1);
    check(args.length >= 2, `Dockerfile:${line}: ${keyword} needs a source and a destination`);
    if (flags.has("from")) {
      check(stageNames.indexOf(flags.get("from")) >= 0 && stageNames.indexOf(flags.get("from")) < stages.indexOf(s),
            `Dockerfile:${line}: --from=${flags.get("from")} is not an earlier stage`);
      continue;
    }
    for (const source of sources) {
      if (/^https:\/\//.test(source)) {
        check(keyword === "ADD", `Dockerfile:${line}: COPY of a URL`);
        continue;
      }
      check(keyword === "COPY", `Dockerfile:${line}: ADD of a local file (use COPY; DL3020)`);
      const rel = source === "." || source === "./" ? "" : path.normalize(source).replace(/\/$/, "");
      check(fs.existsSync(path.join(src, rel)), `Dockerfile:${line}: copies ${source}, which does not exist`);
      check(!ignoreRes.some((re) => re.test(rel)), `Dockerfile:${line}: copies ${source}, which Dockerfile.dockerignore excludes`);
      copied.push(rel);
    }
  }
}
// Every source and BUILD file of //chief, //ps and //worker is copied.
const covered = (file) => copied.some((c) => c === "" || file === c || file.startsWith(c + "/"));
let sources = 0;
for (const label of fs.readFileSync(sourcesFile, "utf8").split("\n")) {
  const m = label.match(/^\/\/([^:]*):(.+)$/);
  if (!m) continue;  // external repositories: Bazel's own, generated ones
  const file = path.join(m[1], m[2]);
  sources++;
  check(covered(file), `the build needs ${file}, which the Dockerfile does not copy`);
}
check(sources > 50, `only ${sources} sources listed by //deploy:image_sources`);
for (const f of ["WORKSPACE", ".bazelrc", "third_party/install_deps.sh"]) {
  check(covered(f), `the build needs ${f}, which the Dockerfile does not copy`);
}

// --- Build stages: the README's install script, then Bazel --------------------------
const readme = fs.readFileSync(path.join(src, "README.md"), "utf8");
const install = readme.match(/^\s+(third_party\/install_deps\.sh)\b/m)?.[1];
check(install, "README.md: no third_party/install_deps.sh command");
for (const s of stages) {
  const builds = s.instructions.some((i) => i.getKeyword() === "RUN" && /\bbazel build\b/.test(runText(i)));
  if (!builds) continue;
  const runs = lineage(s).flatMap((x) => x.instructions).filter((i) => i.getKeyword() === "RUN");
  check(runs.some((i) => runText(i).split(/\s*&&\s*/).includes(install)),
        `stage ${s.name} builds without running ${install} as the README does`);
  check(runs.some((i) => /\/\/chief \/\/ps \/\/worker/.test(runText(i))),
        `stage ${s.name} does not build //chief //ps //worker`);
}

// --- RUN hygiene (hadolint DL3009, DL3015, DL3027, DL4006) -------------------------
for (const s of stages) {
  const shells = lineage(s).flatMap((x) => x.instructions).filter((i) => i.getKeyword() === "SHELL");
  for (const i of s.instructions.filter((x) => x.getKeyword() === "RUN")) {
    const line = i.getRange().start.line + 1;
    const text = runText(i);
    check(!/(^|\s)apt(\s|$)/.test(text), `Dockerfile:${line}: apt instead of apt-get (DL3027)`);
    if (/apt-get install/.test(text)) {
      check(/apt-get update/.test(text), `Dockerfile:${line}: apt-get install without apt-get update in the same RUN`);
      check(/--no-install-recommends/.test(text), `Dockerfile:${line}: apt-get install without --no-install-recommends (DL3015)`);
      check(/-y\b/.test(text), `Dockerfile:${line}: apt-get install without -y`);
      check(/rm -rf \/var\/lib\/apt\/lists\/\*/.test(text), `Dockerfile:${line}: apt lists not removed (DL3009)`);
    }
    if (/[^|]\|[^|]/.test(text)) {
      check(shells.some((x) => /pipefail/.test(runText(x))), `Dockerfile:${line}: a pipe without SHELL ... pipefail (DL4006)`);
    }
  }
}

// --- Runtime stages ------------------------------------------------------------------
function installedIn(stage) {
  const packages = new Set();
  for (const i of lineage(stage).flatMap((x) => x.instructions)) {
    if (i.getKeyword() !== "RUN") continue;
    for (const m of runText(i).matchAll(/apt-get install((?:\s+\\?\s*[^&;\s]+)+)/g)) {
      for (const word of m[1].split(/[\s\\]+/)) if (word && !word.startsWith("-")) packages.add(word);
    }
  }
  return packages;
}
const cudaPackages = {
  "libcudart.so": "cuda-cudart-13-0", "libcublas.so": "libcublas-13-0",
  "libcublasLt.so": "libcublas-13-0", "libcudnn.so": "libcudnn9-cuda-13", "libnccl.so": "libnccl2",
};
const needed = fs.readFileSync(neededFile, "utf8").split("\n").filter(Boolean).map((l) => l.split(" "));
check(needed.length > 10, `only ${needed.length} libraries in ${neededFile}`);
for (const target of ["cpu", "cuda"]) {
  const stage = byName.get(target);
  if (!stage) continue;
  const packages = installedIn(stage);
  for (const [binary, soname, pkg] of needed) {
    if (pkg === "-") {
      // A CUDA library: only the cuda image has it.
      if (target !== "cuda") continue;
      const want = cudaPackages[soname.replace(/\.so.*$/, ".so")];
      check(want && packages.has(want), `${target}: ${binary} needs ${soname}; no package of the image holds it`);
    } else if (pkg !== "libc6") {  // libc6 is in every Debian image
      check(packages.has(pkg), `${target}: ${binary} needs ${soname} from ${pkg}, which the image does not install`);
    }
  }
  for (const pkg of ["jq", "dataset-fashion-mnist"]) {
    check(packages.has(pkg), `${target}: does not install ${pkg}`);
  }
  const all = lineage(stage).flatMap((x) => x.instructions);
  const user = all.filter((i) => i.getKeyword() === "USER").at(-1);
  check(user && /^[1-9]\d*(:\d+)?$/.test(argsOf(user)[0]), `${target}: does not end as a numeric non-root USER (DL3002)`);
  check(all.some((i) => i.getKeyword() === "COPY" && argsOf(i).at(-1) === "/usr/local/bin/pstrain-launch" &&
                        argsOf(i)[0] === "deploy/k8s/pstrain_launch.sh"),
        `${target}: pstrain-launch is not /usr/local/bin/pstrain-launch (the manifests' command)`);
  check(all.some((i) => i.getKeyword() === "COPY" && flagsOf(i).has("from") && argsOf(i).at(-1) === "/usr/local/bin/"),
        `${target}: the binaries are not copied to /usr/local/bin/`);
}

for (const f of failures) console.log(`FAIL ${f}`);
console.log(`Dockerfile: ${stages.length} stages, ${copied.length} copies, ${passed} checks passed, ${failures.length} failed`);
process.exit(failures.length ? 1 : 0);
