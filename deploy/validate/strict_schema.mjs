// Unknown-field checks for Kubernetes objects, from the TypeScript
// declarations that kubernetes-models ships beside its validators.
//
// kubernetes-models validates types, enums and required fields, but its
// schemas allow any extra property, so a misspelt field ("readinesProbe")
// would pass and be dropped by the API server. Each model's .d.ts declares
// its interface property by property:
//
//   import { IIoK8sApiCoreV1GRPCAction } from "./GRPCAction";
//   export interface IProbe {
//       "grpc"?: IIoK8sApiCoreV1GRPCAction;
//       "periodSeconds"?: number;
//       ...
//
// UnknownFields(object, declarationFile) walks an object along those
// declarations and returns the paths of the properties none declares.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const cache = new Map();

// The .d.ts file of an import specifier, relative to `fromFile`.
function resolveDeclaration(specifier, fromFile) {
  if (specifier.startsWith(".")) {
    return path.resolve(path.dirname(fromFile), specifier + ".d.ts");
  }
  return require.resolve(specifier).replace(/\.js$/, ".d.ts");
}

// { properties: Map(name -> {file, array} | null) } for the first interface
// of `file`, or null when the file declares no interface (a leaf type such
// as Quantity or IntOrString).
function parseDeclaration(file) {
  if (cache.has(file)) return cache.get(file);
  const text = fs.readFileSync(file, "utf8");
  const imports = new Map();
  for (const m of text.matchAll(/import \{ ([^}]+) \} from "([^"]+)";/g)) {
    for (const name of m[1].split(",").map((s) => s.trim())) {
      imports.set(name, resolveDeclaration(m[2], file));
    }
  }
  const body = text.match(/export interface \w+(?: extends [\w, ]+)? \{\n([\s\S]*?)\n\}/);
  let result = null;
  if (body) {
    const properties = new Map();
    for (const line of body[1].split("\n")) {
      // Properties sit at four spaces; deeper lines belong to inline types.
      const m = line.match(/^ {4}"([^"]+)"\??: (.*)$/);
      if (!m) continue;
      const type = m[2].replace(/;$/, "");
      const ref = type.match(/^(Array<)?(I\w+)>?$/);
      properties.set(
        m[1],
        ref && imports.has(ref[2])
          ? { file: imports.get(ref[2]), array: Boolean(ref[1]) }
          : null,
      );
    }
    result = { properties };
  }
  cache.set(file, result);
  return result;
}

// The paths ("spec.template.spec.containers[0].readinesProbe") of the
// properties of `value` that the interface of `file` does not declare.
export function UnknownFields(value, file, at = "") {
  const declaration = parseDeclaration(file);
  if (!declaration || value === null || typeof value !== "object") return [];
  const unknown = [];
  for (const [key, child] of Object.entries(value)) {
    const where = at ? `${at}.${key}` : key;
    if (!declaration.properties.has(key)) {
      unknown.push(where);
      continue;
    }
    const type = declaration.properties.get(key);
    if (!type) continue;
    if (type.array) {
      if (!Array.isArray(child)) continue;  // the schema reports it
      child.forEach((item, i) =>
        unknown.push(...UnknownFields(item, type.file, `${where}[${i}]`)));
    } else {
      unknown.push(...UnknownFields(child, type.file, where));
    }
  }
  return unknown;
}

// The .d.ts file of a kubernetes-models model ("batch/v1", "Job").
export function ModelDeclaration(apiVersion, kind) {
  return require
    .resolve(`kubernetes-models/${apiVersion}/${kind}`)
    .replace(/\.js$/, ".d.ts");
}
