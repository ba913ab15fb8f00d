/**
 * Every subpath a package exports resolves to its source in the workspace, the same way for the
 * type check (tsconfig.json's `paths`, through TypeScript's own resolver) and for the tests
 * (vitest.config.ts's aliases), so `pnpm typecheck` and `pnpm test` work before any build.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import ts from "typescript"
import { describe, expect, it } from "vitest"
import config from "../../vitest.config.js"

const repo = fileURLToPath(new URL("../..", import.meta.url))
const folders = ["packages", "plugins"].flatMap((d) =>
  fs
    .readdirSync(path.join(repo, d))
    .map((p) => path.join(repo, d, p))
    .filter((p) => fs.existsSync(path.join(p, "package.json")))
)

/** Each package's exported subpaths, with the source file each one is built from. */
const exported = folders.flatMap((dir) => {
  const pkg = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8")) as {
    name: string
    exports: Record<string, null | string | { import?: string }>
  }
  return Object.entries(pkg.exports).flatMap(([key, target]) => {
    const file = typeof target === "string" ? target : target?.import
    if (!file?.startsWith("./dist/") || !file.endsWith(".js")) return []
    const source = (name: string) => path.join(dir, "src", `${name}.ts`)
    if (!key.includes("*")) {
      return [{ specifier: key === "." ? pkg.name : `${pkg.name}/${key.slice(2)}`, source: source(file.slice(7, -3)) }]
    }
    // `./*` exports every top-level module of src/
    return fs
      .readdirSync(path.join(dir, "src"))
      .filter((f) => /^[A-Z]\w*\.ts$/.test(f))
      .map((f) => ({ specifier: `${pkg.name}/${f.slice(0, -3)}`, source: source(f.slice(0, -3)) }))
  })
})

const tsconfig = (() => {
  const file = path.join(repo, "tsconfig.json")
  const read = ts.readConfigFile(file, ts.sys.readFile)
  return ts.parseJsonConfigFileContent(read.config, ts.sys, repo, undefined, file).options
})()

const aliases = (config as { resolve: { alias: Array<{ find: RegExp; replacement: string }> } }).resolve.alias
const viaAlias = (specifier: string) => {
  const rule = aliases.find((a) => a.find.test(specifier))
  return rule ? specifier.replace(rule.find, rule.replacement) : undefined
}

describe("workspace resolution of the packages' exports", () => {
  it("finds the exports", () => {
    expect(exported.length).toBeGreaterThan(50)
    expect(exported.map((e) => e.specifier)).toContain("@musekit/pg/SessionCluster")
  })

  it("the type check resolves every export to its source", () => {
    const from = path.join(repo, "test/workspace/exports.test.ts")
    const wrong = exported.flatMap(({ specifier, source }) => {
      const got = ts.resolveModuleName(specifier, from, tsconfig, ts.sys).resolvedModule?.resolvedFileName
      return got && path.resolve(got) === source ? [] : [`${specifier} → ${got ?? "unresolved"} (want ${source})`]
    })
    expect(wrong).toEqual([])
  })

  it("the tests resolve every export to its source", () => {
    const wrong = exported.flatMap(({ specifier, source }) => {
      const got = viaAlias(specifier)
      return got && path.resolve(got) === source && fs.existsSync(got) ? [] : [`${specifier} → ${got ?? "no alias"}`]
    })
    expect(wrong).toEqual([])
  })
})
