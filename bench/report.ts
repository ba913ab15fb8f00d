/**
 * Helpers shared by the benchmarks: machine description, percentiles, a plain-text table and a
 * JSON figures file under `bench/out/` (git-ignored).
 *
 * @example
 * ```ts
 * import { printTable, writeFigures } from "./report.js"
 *
 * printTable("Event log", ["case", "events/s"], [["raw", "400,000"], ["log", "90,000"]])
 * writeFigures("eventlog", { appendsPerSecond: 90000 })
 * ```
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

/** Where `writeFigures` puts its files. */
export const outDir = fileURLToPath(new URL("./out/", import.meta.url))

export interface Machine {
  readonly cpus: number
  readonly cpuModel: string
  readonly memoryGiB: number
  readonly node: string
  readonly platform: string
  readonly tmpdir: string
  /** 1-minute load average when the figures were taken: other processes compete for the cores and the disk. */
  readonly load1: number
}

export const machine = (): Machine => ({
  cpus: os.cpus().length,
  cpuModel: os.cpus()[0]?.model.trim() ?? "unknown",
  memoryGiB: Math.round(os.totalmem() / 2 ** 30),
  node: process.version,
  platform: `${os.platform()} ${os.release()} ${os.arch()}`,
  tmpdir: os.tmpdir(),
  load1: Math.round(os.loadavg()[0]! * 100) / 100
})

export const describeMachine = (m: Machine = machine()): string =>
  `${m.cpus} cores (${m.cpuModel}), ${m.memoryGiB} GiB RAM, Node ${m.node}, ${m.platform}, temp dir ${m.tmpdir}, ` +
  `load average ${m.load1}`

/** The q-quantile (0..1) of some samples, nearest-rank. */
export const percentile = (samples: ReadonlyArray<number>, q: number): number => {
  if (samples.length === 0) return Number.NaN
  const sorted = Float64Array.from(samples).sort()
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))
  return sorted[rank]!
}

export const median = (samples: ReadonlyArray<number>): number => percentile(samples, 0.5)

/** Thousands separators, no decimals: 123456.7 → "123,457". */
export const fmtInt = (n: number): string => Math.round(n).toLocaleString("en-US")

/** Milliseconds with a precision that suits their size. */
export const fmtMs = (ms: number): string =>
  ms >= 100 ? `${ms.toFixed(0)} ms` : ms >= 10 ? `${ms.toFixed(1)} ms` : `${ms.toFixed(3)} ms`

/** A ratio as a percentage, e.g. 0.534 → "53%". */
export const fmtPct = (r: number): string => `${(r * 100).toFixed(r < 0.1 ? 1 : 0)}%`

export type Cell = string | number

/** Print an aligned table; numbers are right-aligned, text left-aligned. */
export const printTable = (
  title: string,
  header: ReadonlyArray<string>,
  rows: ReadonlyArray<ReadonlyArray<Cell>>
): void => {
  const text = (c: Cell | undefined) => (c === undefined ? "" : typeof c === "number" ? fmtInt(c) : c)
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => text(r[i]).length)))
  const numeric = header.map((_, i) => rows.every((r) => r[i] === undefined || /^[-\d]/.test(text(r[i]))))
  const line = (cells: ReadonlyArray<Cell | undefined>) =>
    cells
      .map((c, i) => (numeric[i] && i > 0 ? text(c).padStart(widths[i]!) : text(c).padEnd(widths[i]!)))
      .join("  ")
      .trimEnd()
  const out = [`\n${title}`, line(header), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)]
  process.stdout.write(`${out.join("\n")}\n`)
}

/** Write `bench/out/<name>.json` with the figures, the machine and the time; returns the path. */
export const writeFigures = (name: string, figures: Record<string, unknown>): string => {
  fs.mkdirSync(outDir, { recursive: true })
  const file = path.join(outDir, `${name}.json`)
  const body = { bench: name, at: new Date().toISOString(), machine: machine(), figures }
  fs.writeFileSync(file, `${JSON.stringify(body, null, 2)}\n`)
  return file
}

/**
 * Bundle a benchmark module into one ES module under `bench/out/bundles/` (esbuild comes with tsx), so its
 * child processes start without a TypeScript loader in their time and memory.
 */
export const bundle = async (entry: string, name: string): Promise<string> => {
  const { createRequire } = await import("node:module")
  const fromTsx = createRequire(createRequire(import.meta.url).resolve("tsx/package.json"))
  const esbuild = fromTsx("esbuild") as { build: (o: Record<string, unknown>) => Promise<unknown> }
  const outfile = path.join(outDir, "bundles", `${name}.mjs`)
  await esbuild.build({
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    tsconfig: fileURLToPath(new URL("../tsconfig.json", import.meta.url)),
    banner: { js: 'import { createRequire as __cr } from "node:module"; const require = __cr(import.meta.url);' },
    logLevel: "error"
  })
  return outfile
}
