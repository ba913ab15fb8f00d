import { execFileSync, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { beforeAll, describe, expect, it } from "vitest"
import { applyHeapPolicy, heapFlagsGiven } from "../src/internal/heapPolicy.js"
import { ensureBuilt, packageDir } from "./support/cli.js"

/**
 * A process shaped like a session: state kept for good grows each turn, and each turn's objects
 * live a few turns, then are dropped. It reports the largest young generation (both semi-spaces)
 * and old generation (objects, large ones included) it saw, with the policy applied or not.
 */
const probe = `
import * as v8 from "node:v8"
const [chunk, mode] = process.argv.slice(2)
const { applyHeapPolicy, youngCommitted } = await import(chunk)
const applied = mode === "on" ? applyHeapPolicy({}, []) : false
// (as a session: the policy applied, then the commands load and run)
await new Promise((r) => setTimeout(r, 100))
const oldUsed = () => v8.getHeapSpaceStatistics()
  .filter((s) => s.space_name === "old_space" || s.space_name === "large_object_space")
  .reduce((a, s) => a + s.space_used_size, 0)
const kept = []
let recent = []
let young = 0
let old = 0
for (let turn = 0; turn < 300; turn++) {
  for (let i = 0; i < 1000; i++) kept.push({ turn, i, s: "kept " + i })
  recent.push(Array.from({ length: 10000 }, (_, i) => ({ turn, i, s: "part " + i })))
  if (recent.length > 10) recent = recent.slice(1)
  await new Promise((r) => setTimeout(r, 1))
  young = Math.max(young, youngCommitted())
  old = Math.max(old, oldUsed())
}
process.stdout.write(JSON.stringify({ applied, young: young / 2 ** 20, old: old / 2 ** 20, kept: kept.length }))
`

describe("heap policy", () => {
  let chunk = ""
  beforeAll(() => {
    ensureBuilt()
    const dist = path.join(packageDir, "dist")
    const name = fs.readdirSync(dist).find((n) => /^heapPolicy-[\w-]+\.js$/.test(n))
    if (name === undefined) throw new Error("no heapPolicy chunk in dist/")
    chunk = path.join(dist, name)
  }, 240_000)

  const run = (mode: "on" | "off") => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "muse-heap-policy-"))
    const file = path.join(dir, "probe.mjs")
    fs.writeFileSync(file, probe)
    const env = { ...process.env }
    delete env.NODE_OPTIONS
    delete env.MUSE_HEAP_POLICY
    const out = execFileSync(process.execPath, [file, chunk, mode], { encoding: "utf8", env, timeout: 60_000 })
    return JSON.parse(out) as { applied: boolean; young: number; old: number; kept: number }
  }

  it("keeps the semi-spaces at 8 MiB each and collects the old generation sooner than V8 alone", () => {
    const off = run("off")
    const on = run("on")
    expect(off.applied).toBe(false)
    expect(on.applied).toBe(true)
    expect(on.kept).toBe(off.kept)
    // V8 alone grows the semi-spaces to 16 MiB each here
    expect(off.young).toBe(32)
    expect(on.young).toBeLessThanOrEqual(16)
    expect(on.old).toBeLessThan(off.old)
  }, 120_000)

  it("leaves Node's code cache of the built-in modules a session loads usable", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "muse-heap-policy-"))
    const file = path.join(dir, "builtins.mjs")
    fs.writeFileSync(
      file,
      `const { applyHeapPolicy } = await import(process.argv[2])
if (!applyHeapPolicy({}, [])) throw new Error("not applied")
await import("node:http"); await import("node:https"); await import("node:child_process"); await import("node:readline")
`
    )
    const env: NodeJS.ProcessEnv = { ...process.env, NODE_DEBUG_NATIVE: "CODE_CACHE" }
    delete env.NODE_OPTIONS
    delete env.MUSE_HEAP_POLICY
    const r = spawnSync(process.execPath, [file, chunk], { encoding: "utf8", env, timeout: 60_000 })
    expect(r.status, r.stderr.slice(-2000)).toBe(0)
    const said = `${r.stdout}${r.stderr}`
    expect(said).toMatch(/Code cache of http \(\w+\) is accepted/)
    expect(said.match(/Code cache of \S+ \(\w+\) is rejected/g) ?? []).toEqual([])
  }, 120_000)

  it("is off with MUSE_HEAP_POLICY=0, or when Node is given heap flags (command line or NODE_OPTIONS)", () => {
    expect(applyHeapPolicy({ MUSE_HEAP_POLICY: "0" }, [])).toBe(false)
    expect(applyHeapPolicy({}, ["--max-semi-space-size=32"])).toBe(false)
    expect(applyHeapPolicy({}, ["--heap-growing-percent=20"])).toBe(false)
    expect(applyHeapPolicy({ NODE_OPTIONS: "--max-semi-space-size=4 --max-old-space-size=512" }, [])).toBe(false)
    expect(applyHeapPolicy({ NODE_OPTIONS: "--optimize_for_size" }, [])).toBe(false)
    // a limit on the old generation, or a path that spells a flag's name, is not a heap flag
    expect(heapFlagsGiven({ NODE_OPTIONS: "--max-old-space-size=8192" }, [])).toBe(false)
    expect(heapFlagsGiven({ NODE_OPTIONS: "--import /opt/new-space/x.mjs" }, [])).toBe(false)
    expect(heapFlagsGiven({}, ["--max-heap-size=512"])).toBe(true)
  })
})
