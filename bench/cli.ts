/**
 * Start-up of the `muse` executable (packages/cli/dist/bin.js, built on demand):
 *
 * - `muse --version` against `node -e 0`, run alternately, median of N each, and their ratio;
 * - time from process start to the first model request of `muse run` with the scripted test model
 *   (spawn → the `model.requested` line of `--output-format stream-json`; the event is durable
 *   just before the request is made), against `node -e 0` of the same run.
 *
 * Run with `pnpm bench cli` (`BENCH_CLI_RUNS` sets N, default 15). `BENCH_CLI_BASELINE=<another
 * build's dist/bin.js>` (e.g. main's, in a worktree of its own) measures that build too, interleaved
 * with this one in the same run. Figures also go to `bench/out/cli.json`.
 */
import { execFileSync, spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { fmtMs, median, percentile, printTable, writeFigures } from "./report.js"

export const description = "muse --version vs node -e 0, and process start to the first model request of muse run"

const RUNS = Number(process.env.BENCH_CLI_RUNS ?? 15)
const cliDir = fileURLToPath(new URL("../packages/cli/", import.meta.url))
const bin = path.join(cliDir, "dist", "bin.js")

const ensureBuilt = () => {
  if (!fs.existsSync(bin)) execFileSync("npx", ["tsup", "--no-dts"], { cwd: cliDir, stdio: "inherit" })
}

const timeSync = (args: ReadonlyArray<string>, env: NodeJS.ProcessEnv): number => {
  const t0 = performance.now()
  const r = spawnSync(process.execPath, [...args], { env, stdio: "ignore" })
  const ms = performance.now() - t0
  if (r.status !== 0) throw new Error(`node ${args.join(" ")} exited with ${r.status}`)
  return ms
}

const baseline = process.env.BENCH_CLI_BASELINE ? path.resolve(process.env.BENCH_CLI_BASELINE) : undefined

/** Spawn `muse run` and time until its stream shows the first model request. */
const timeFirstRequest = (dir: string, script: string, env: NodeJS.ProcessEnv, of: string = bin): Promise<number> =>
  new Promise((resolve, reject) => {
    const t0 = performance.now()
    const child = spawn(
      process.execPath,
      [of, "run", "say hello", "--script", script, "--no-crew", "--output-format", "stream-json"],
      { cwd: dir, env, stdio: ["ignore", "pipe", "pipe"] }
    )
    let buf = ""
    let done = false
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      buf += d
      if (!done && buf.includes('"type":"model.requested"')) {
        done = true
        resolve(performance.now() - t0)
      }
    })
    child.on("exit", (code) => {
      if (!done) reject(new Error(`muse run exited with ${code} before a model request:\n${buf.slice(-2000)}`))
    })
  })

export const run = async (): Promise<void> => {
  ensureBuilt()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "muse-bench-cli-"))
  const script = path.join(dir, "hello.json")
  fs.writeFileSync(script, JSON.stringify({ steps: [{ text: "Hello." }] }))
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    MUSE_HOME: path.join(dir, "state"),
    HOME: dir,
    XDG_CONFIG_HOME: path.join(dir, "config"),
    NO_COLOR: "1"
  }
  // warm the file cache
  timeSync(["-e", "0"], env)
  timeSync([bin, "--version"], env)
  await timeFirstRequest(dir, script, env)

  const nodeE: Array<number> = []
  const version: Array<number> = []
  const first: Array<number> = []
  const baseVersion: Array<number> = []
  const baseFirst: Array<number> = []
  if (baseline) {
    timeSync([baseline, "--version"], env)
    await timeFirstRequest(dir, script, env, baseline)
  }
  for (let i = 0; i < RUNS; i++) {
    nodeE.push(timeSync(["-e", "0"], env))
    version.push(timeSync([bin, "--version"], env))
    first.push(await timeFirstRequest(dir, script, env))
    if (baseline) {
      baseVersion.push(timeSync([baseline, "--version"], env))
      baseFirst.push(await timeFirstRequest(dir, script, env, baseline))
    }
  }
  fs.rmSync(dir, { recursive: true, force: true })

  const nodeMed = median(nodeE)
  const versionMed = median(version)
  const firstMed = median(first)
  printTable(
    `muse start-up (${RUNS} runs each, alternating; ${os.loadavg()[0]!.toFixed(1)} load average)`,
    ["what", "median", "p90", "vs node -e 0"],
    [
      ["node -e 0", fmtMs(nodeMed), fmtMs(percentile(nodeE, 0.9)), "1.00x"],
      ["muse --version", fmtMs(versionMed), fmtMs(percentile(version, 0.9)), `${(versionMed / nodeMed).toFixed(2)}x`],
      [
        "muse run → first model request",
        fmtMs(firstMed),
        fmtMs(percentile(first, 0.9)),
        `${(firstMed / nodeMed).toFixed(2)}x`
      ],
      ...(baseline
        ? [
            [
              "baseline: muse --version",
              fmtMs(median(baseVersion)),
              fmtMs(percentile(baseVersion, 0.9)),
              `${(median(baseVersion) / nodeMed).toFixed(2)}x`
            ],
            [
              "baseline: muse run → first model request",
              fmtMs(median(baseFirst)),
              fmtMs(percentile(baseFirst, 0.9)),
              `${(median(baseFirst) / nodeMed).toFixed(2)}x`
            ]
          ]
        : [])
    ]
  )
  const file = writeFigures("cli", {
    runs: RUNS,
    loadAverage: os.loadavg()[0],
    nodeEmptyMs: nodeMed,
    versionMs: versionMed,
    versionRatio: versionMed / nodeMed,
    firstModelRequestMs: firstMed,
    firstModelRequestP90Ms: percentile(first, 0.9),
    firstRequestMinusNodeMs: firstMed - nodeMed,
    ...(baseline
      ? { baseline, baselineVersionMs: median(baseVersion), baselineFirstModelRequestMs: median(baseFirst) }
      : {})
  })
  process.stdout.write(`\nfigures: ${path.relative(process.cwd(), file)}\n`)
}
