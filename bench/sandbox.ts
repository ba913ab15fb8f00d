/**
 * The cost of the OS sandbox per command: `run_shell` of `true` and of `git status` in a git
 * repository of 10,000 committed files, unsandboxed and in the `workspace-write` sandbox of this
 * machine (bubblewrap on Linux, sandbox-exec on macOS), interleaved in the same run; on Linux both
 * ways of starting it: the long-lived sandbox of the workspace (the default; each command in a
 * PID namespace of its own, its launch kept ready ahead of it), the same without that spare launch
 * (`spare: false`, the launch started when the command comes) and a new sandbox per command
 * (`reuse: false`). Medians and 90th percentiles of N runs each, the time added and the ratio. A machine without a sandbox prints why and measures nothing.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Tools } from "@musekit/core"
import { CodingTools, Sandbox, WorkspaceNode } from "@musekit/node"
import { Effect } from "effect"
import { fmtMs, median, percentile, printTable, writeFigures } from "./report.js"

export const description = "the OS sandbox: time added per run_shell command (true, git status on 10k files)"

const N = 40
/** Milliseconds between two timed commands (`BENCH_SANDBOX_PAUSE_MS`). */
const PAUSE_MS = Number(process.env.BENCH_SANDBOX_PAUSE_MS ?? 100)
const FILES = 10_000

const makeRepo = (root: string) => {
  for (let d = 0; d < 100; d++) {
    const dir = path.join(root, `dir${d}`)
    fs.mkdirSync(dir)
    for (let f = 0; f < FILES / 100; f++) fs.writeFileSync(path.join(dir, `file${f}.txt`), `file ${d}/${f}\n`)
  }
  const git = (...args: Array<string>) =>
    execFileSync("git", ["-c", "user.email=b@example.invalid", "-c", "user.name=bench", ...args], {
      cwd: root,
      stdio: "ignore"
    })
  git("init", "-q", "-b", "main")
  git("add", ".")
  git("commit", "-q", "-m", "files")
  git("status", "--porcelain")
}

export const run = async () => {
  const availability = Sandbox.detect()
  if (!availability.available) {
    process.stdout.write(`no sandbox on this machine: ${availability.reason}; nothing to measure\n`)
    return
  }
  const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "muse-bench-sandbox-")))
  try {
    makeRepo(root)
    const samples = await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const sandbox = yield* Sandbox.make({ mode: "workspace-write", reuse: true })
          const linux = availability.backend === "bubblewrap"
          const perCommand = linux ? yield* Sandbox.make({ mode: "workspace-write", reuse: false }) : undefined
          // the long-lived sandbox without a launch kept ready ahead of each command
          const noSpare = linux
            ? yield* Sandbox.make({ mode: "workspace-write", reuse: true }, { spare: false })
            : undefined
          const workspace = yield* Effect.orDie(WorkspaceNode.make(root))
          const ctx: Tools.CallContext = { agent: "main", callId: "b", workspace, progress: () => Effect.void }
          const plain = CodingTools.runShell({ sandbox: undefined })
          const boxed = CodingTools.runShell({ sandbox })
          const cold = perCommand ? CodingTools.runShell({ sandbox: perCommand }) : undefined
          const unready = noSpare ? CodingTools.runShell({ sandbox: noSpare }) : undefined
          const time = (def: Tools.Definition, command: string) =>
            Effect.gen(function* () {
              const params = yield* Effect.orDie(Tools.decodeParams(def, { command }))
              const t = performance.now()
              const r = (yield* Effect.orDie(def.handler(params, ctx))) as CodingTools.ShellResult
              const ms = performance.now() - t
              if (r.exit_code !== 0) throw new Error(`${command} failed: ${r.output}`)
              // a pause like the model's turn between two commands (the long-lived sandbox readies
              // its next launch meanwhile), so that work does not land on the next row's timing
              yield* Effect.sleep(PAUSE_MS)
              return ms
            })
          const out: Record<
            string,
            { plain: Array<number>; boxed: Array<number>; cold: Array<number>; unready: Array<number> }
          > = {}
          for (const command of ["true", "git status"]) {
            const s = {
              plain: [] as Array<number>,
              boxed: [] as Array<number>,
              cold: [] as Array<number>,
              unready: [] as Array<number>
            }
            // warm every path (the long-lived sandbox starts here), then interleave so load on the
            // machine falls on all alike
            yield* time(plain, command)
            yield* time(boxed, command)
            if (cold) yield* time(cold, command)
            if (unready) yield* time(unready, command)
            for (let i = 0; i < N; i++) {
              s.plain.push(yield* time(plain, command))
              s.boxed.push(yield* time(boxed, command))
              if (cold) s.cold.push(yield* time(cold, command))
              if (unready) s.unready.push(yield* time(unready, command))
            }
            out[command] = s
          }
          return out
        })
      )
    )
    const name = (command: string) =>
      command === "git status" ? `git status (${FILES.toLocaleString("en-US")} files)` : command
    const rows = Object.entries(samples).flatMap(([command, s]) => {
      const p = median(s.plain)
      const row = (how: string, xs: Array<number>) => {
        const b = median(xs)
        return [
          name(command),
          how,
          fmtMs(p),
          fmtMs(b),
          `${fmtMs(percentile(s.plain, 0.9))} / ${fmtMs(percentile(xs, 0.9))}`,
          fmtMs(b - p),
          `${(b / p).toFixed(2)}×`
        ]
      }
      return [
        row(s.cold.length > 0 ? "long-lived" : "per command", s.boxed),
        ...(s.unready.length > 0 ? [row("long-lived, no spare", s.unready)] : []),
        ...(s.cold.length > 0 ? [row("per command", s.cold)] : [])
      ]
    })
    const limit = availability.processLimit._tag
    printTable(
      `run_shell per command, median of ${N} (${availability.backend}, workspace-write, process limit: ${limit})`,
      ["command", "sandbox", "unsandboxed", "sandboxed", "p90 un/sandboxed", "added", "ratio"],
      rows
    )
    writeFigures(
      "sandbox",
      Object.fromEntries(
        Object.entries(samples).map(([command, s]) => [
          command,
          {
            plainMedianMs: median(s.plain),
            sandboxedMedianMs: median(s.boxed),
            plainP90Ms: percentile(s.plain, 0.9),
            sandboxedP90Ms: percentile(s.boxed, 0.9),
            addedMs: median(s.boxed) - median(s.plain),
            ...(s.cold.length > 0
              ? {
                  perCommandMedianMs: median(s.cold),
                  perCommandP90Ms: percentile(s.cold, 0.9),
                  perCommandAddedMs: median(s.cold) - median(s.plain)
                }
              : {}),
            ...(s.unready.length > 0
              ? {
                  noSpareMedianMs: median(s.unready),
                  noSpareP90Ms: percentile(s.unready, 0.9),
                  noSpareAddedMs: median(s.unready) - median(s.plain)
                }
              : {})
          }
        ])
      )
    )
  } finally {
    fs.rmSync(root, { recursive: true, force: true })
  }
}
