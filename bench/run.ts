/**
 * Benchmark runner. Every `bench/<name>.ts` that exports `run()` is a benchmark named `<name>`;
 * adding one needs no change here.
 *
 * ```sh
 * pnpm bench              # every benchmark, in name order
 * pnpm bench eventlog     # only the named ones
 * pnpm bench --list       # names only
 * ```
 *
 * A benchmark module:
 * ```ts
 * export const description = "what it measures"
 * export const run = async (): Promise<void> => { ... } // prints its own table (see report.ts)
 * ```
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { describeMachine } from "./report.js"

export interface BenchModule {
  readonly run: () => Promise<void> | void
  readonly description?: string
}

const here = path.dirname(fileURLToPath(import.meta.url))
const notBenches = new Set(["run", "report"])

const discover = (): Array<string> =>
  fs
    .readdirSync(here)
    .filter((f) => f.endsWith(".ts") && !f.endsWith(".d.ts") && !f.startsWith("_"))
    .map((f) => f.slice(0, -".ts".length))
    .filter((name) => !notBenches.has(name))
    .sort()

const load = async (name: string): Promise<BenchModule | undefined> => {
  const mod = (await import(pathToFileURL(path.join(here, `${name}.ts`)).href)) as Partial<BenchModule>
  return typeof mod.run === "function" ? (mod as BenchModule) : undefined
}

const main = async () => {
  const args = process.argv.slice(2).filter((a) => a !== "--")
  const all = discover()
  if (args.includes("--list")) {
    for (const name of all) {
      const mod = await load(name)
      if (mod) process.stdout.write(`${name}${mod.description ? `  ${mod.description}` : ""}\n`)
    }
    return
  }
  const unknown = args.filter((a) => !all.includes(a))
  if (unknown.length > 0) {
    process.stderr.write(`unknown benchmark ${unknown.join(", ")}; available: ${all.join(", ")}\n`)
    process.exitCode = 2
    return
  }
  const selected = args.length > 0 ? args : all
  process.stdout.write(`machine: ${describeMachine()}\n`)
  for (const name of selected) {
    const mod = await load(name)
    if (!mod) {
      if (args.includes(name)) {
        process.stderr.write(`bench/${name}.ts does not export run()\n`)
        process.exitCode = 2
      }
      continue
    }
    process.stdout.write(`\n== ${name}${mod.description ? ` — ${mod.description}` : ""}\n`)
    const t0 = performance.now()
    await mod.run()
    process.stdout.write(`\n(${name} took ${((performance.now() - t0) / 1000).toFixed(1)} s)\n`)
  }
}

await main()
