/**
 * What an app installs: core, node, models, compaction and skills packed with `pnpm pack` and
 * installed with npm into a fresh project, measured on disk (bytes, packages, packages with
 * install scripts) and in time. The baseline, in the same run, is the same tarballs with the
 * dependency lists those packages had at `BENCH_INSTALL_BASE` (default 2c014f5: effect and the
 * @effect packages as exact dependencies, every provider client, unused dependencies).
 *
 * ```sh
 * pnpm build && pnpm bench install
 * ```
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { printTable, writeFigures } from "./report.js"

export const description = "install size of core+node+models+compaction+skills in a fresh npm project, before/after"

const repo = fileURLToPath(new URL("..", import.meta.url))
const set = ["packages/core", "packages/node", "packages/models", "plugins/compaction", "plugins/skills"]
const peers = ["effect@3.22.4", "@effect/ai@0.37.0", "@effect/platform@0.97.2"]

const sh = (cmd: string, args: ReadonlyArray<string>, cwd: string) =>
  execFileSync(cmd, args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], maxBuffer: 64 << 20 })

const duBytes = (dir: string): number => {
  let total = 0
  const walk = (d: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name)
      if (e.isDirectory()) walk(p)
      else if (e.isFile()) total += fs.statSync(p).size
    }
  }
  walk(dir)
  return total
}

interface Measured {
  readonly bytes: number
  readonly packages: number
  readonly scripts: Array<string>
  readonly seconds: number
  readonly effects: number
}

const install = (work: string, name: string, specs: ReadonlyArray<string>): Measured => {
  const app = path.join(work, name)
  fs.mkdirSync(app)
  fs.writeFileSync(
    path.join(app, "package.json"),
    JSON.stringify({ name: `bench-${name}`, private: true, type: "module" })
  )
  const started = performance.now()
  sh("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", "--ignore-scripts", ...specs], app)
  const seconds = (performance.now() - started) / 1000
  const lock = JSON.parse(fs.readFileSync(path.join(app, "package-lock.json"), "utf8")) as {
    packages: Record<string, { hasInstallScript?: boolean }>
  }
  const entries = Object.entries(lock.packages).filter(([k]) => k !== "")
  return {
    bytes: duBytes(path.join(app, "node_modules")),
    packages: entries.length,
    scripts: entries.filter(([, v]) => v.hasInstallScript).map(([k]) => k.replace(/^.*node_modules\//, "")),
    seconds,
    effects: entries.filter(([k]) => k.endsWith("node_modules/effect")).length
  }
}

/** A copy of `tarball` whose package.json has the dependency lists of `manifest` (workspace deps → `local`). */
const withManifest = (work: string, tarball: string, manifest: any, local: Map<string, string>): string => {
  const dir = fs.mkdtempSync(path.join(work, "repack-"))
  sh("tar", ["-xzf", tarball, "-C", dir], work)
  const file = path.join(dir, "package", "package.json")
  const pkg = JSON.parse(fs.readFileSync(file, "utf8"))
  const fix = (deps: Record<string, string> | undefined) =>
    deps &&
    Object.fromEntries(
      Object.entries(deps).map(([k, v]) => [k, v.startsWith("workspace:") ? `file:${local.get(k)}` : v])
    )
  pkg.dependencies = fix(manifest.dependencies)
  delete pkg.peerDependencies
  delete pkg.peerDependenciesMeta
  fs.writeFileSync(file, JSON.stringify(pkg, null, 2))
  const out = path.join(work, `before-${path.basename(tarball)}`)
  sh("tar", ["-czf", out, "-C", dir, "package"], work)
  return out
}

export const run = async (): Promise<void> => {
  const base = process.env.BENCH_INSTALL_BASE ?? "2c014f5"
  const work = fs.mkdtempSync(path.join(os.tmpdir(), "muse-bench-install-"))
  try {
    const after = new Map<string, string>()
    for (const dir of set) {
      const name = JSON.parse(fs.readFileSync(path.join(repo, dir, "package.json"), "utf8")).name as string
      const out = sh("pnpm", ["pack", "--pack-destination", work], path.join(repo, dir)).trim().split("\n").at(-1)!
      after.set(name, path.resolve(work, out.trim()))
    }
    const before = new Map<string, string>()
    for (const dir of set) {
      const manifest = JSON.parse(sh("git", ["show", `${base}:${dir}/package.json`], repo))
      before.set(manifest.name, path.join(work, `before-${path.basename(after.get(manifest.name)!)}`))
    }
    for (const dir of set) {
      const manifest = JSON.parse(sh("git", ["show", `${base}:${dir}/package.json`], repo))
      withManifest(work, after.get(manifest.name)!, manifest, before)
    }
    const rows: Array<[string, Measured]> = [
      [`before (${base})`, install(work, "before", [...before.values()])],
      ["after", install(work, "after", [...after.values(), ...peers])]
    ]
    const mb = (b: number) => `${(b / 1e6).toFixed(1)} MB`
    const baseline = rows[0]![1].bytes
    printTable(
      "Install size: core+node+models+compaction+skills in a fresh npm project",
      ["set", "node_modules", "vs before", "packages", "copies of effect", "with install scripts", "npm install"],
      rows.map(([name, m]) => [
        name,
        mb(m.bytes),
        `${((m.bytes / baseline) * 100).toFixed(0)}%`,
        m.packages,
        m.effects,
        m.scripts.length === 0 ? "none" : m.scripts.join(", "),
        `${m.seconds.toFixed(1)} s`
      ])
    )
    writeFigures("install", Object.fromEntries(rows))
  } finally {
    fs.rmSync(work, { recursive: true, force: true })
  }
}
