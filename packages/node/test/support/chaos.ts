/**
 * Kill-loop machinery for crash tests: bundle a session script, run it as a real process that
 * prints `ready`, `ack <seq> <type>` for every durable event and `resumed <checkpoint> <replayed>`,
 * SIGKILL it once it made a random amount of progress, and start it again (it resumes) until it
 * finishes. Every acknowledged event must still be in the log after each kill.
 *
 * Used by `SessionRuntime.chaos.test.ts` and the worktree plugin's crew chaos test.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import type { Event } from "@musekit/core"
import { Effect } from "effect"
import { EventLogFile } from "../../src/index.js"

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../..")

/** Bundle a TypeScript session script into one ESM file (starts in a fraction of tsx's time). */
export const bundle = async (entry: string, outfile: string): Promise<string> => {
  const fromTsx = createRequire(createRequire(import.meta.url).resolve("tsx/package.json"))
  const esbuild = fromTsx("esbuild") as { build: (o: Record<string, unknown>) => Promise<unknown> }
  await esbuild.build({
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    tsconfig: path.join(repoRoot, "tsconfig.json"),
    banner: { js: 'import { createRequire as __cr } from "node:module"; const require = __cr(import.meta.url);' },
    logLevel: "error"
  })
  return outfile
}

export interface Run {
  readonly child: ChildProcess
  readonly acks: Array<{ seq: number; type: string }>
  /** `resumed <checkpoint seq or -1> <replayed events>` lines. */
  readonly resumed: Array<{ checkpoint: number; replaying: number }>
  /** Every other line the script printed. */
  readonly lines: Array<string>
  readonly ready: Promise<void>
  readonly exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  readonly stderr: () => string
  /** SIGKILL the process (with `group`, its whole process group: the git children too). */
  readonly kill: () => void
}

export interface LaunchOptions {
  readonly env?: NodeJS.ProcessEnv | undefined
  /** Run in a process group of its own, so `kill` takes its child processes with it. */
  readonly group?: boolean | undefined
}

/** Start `node <bundle> ...args` and follow what it prints. */
export const launch = (script: string, args: ReadonlyArray<string>, options: LaunchOptions = {}): Run => {
  const child = spawn(process.execPath, [script, ...args], {
    cwd: repoRoot,
    stdio: ["ignore", "pipe", "pipe"],
    detached: options.group ?? false,
    env: options.env ?? process.env
  })
  const acks: Array<{ seq: number; type: string }> = []
  const resumed: Array<{ checkpoint: number; replaying: number }> = []
  const lines: Array<string> = []
  let err = ""
  let buf = ""
  let onReady = () => {}
  const ready = new Promise<void>((r) => (onReady = r))
  child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
    buf += chunk
    let nl = buf.indexOf("\n")
    while (nl !== -1) {
      const line = buf.slice(0, nl)
      const [word, seq, type] = line.split(" ")
      buf = buf.slice(nl + 1)
      nl = buf.indexOf("\n")
      if (word === "ready") onReady()
      else if (word === "ack") acks.push({ seq: Number(seq), type: type! })
      else if (word === "resumed") resumed.push({ checkpoint: Number(seq), replaying: Number(type) })
      else lines.push(line)
    }
  })
  child.stderr!.setEncoding("utf8").on("data", (c: string) => (err += c))
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
    child.on("close", (code, signal) => r({ code, signal }))
  )
  const kill = () => {
    try {
      if (options.group) process.kill(-child.pid!, "SIGKILL")
      else child.kill("SIGKILL")
    } catch {
      // already gone
    }
  }
  return { child, acks, resumed, lines, ready, exit, stderr: () => err, kill }
}

/** The events of a session, or none when its log does not exist yet. */
export const readEvents = (state: string, session: string): Promise<ReadonlyArray<Event.Envelope>> =>
  Effect.runPromise(
    EventLogFile.readSession(session, { dir: state }).pipe(Effect.catchTag("SessionNotFound", () => Effect.succeed([])))
  )

export interface KillLoopOptions {
  /** Start the script (again); it starts or resumes the session. */
  readonly start: () => Run
  readonly state: string
  readonly session: string
  /** Kills to make before letting a run finish. */
  readonly kills: number
  /**
   * New events a run makes before it is killed: at least 1, at most this many (at random); a
   * function gets the number of events already in the log.
   */
  readonly progress: number | ((before: number) => number)
  /** Most milliseconds between seeing that progress and the kill (at random; default 3). */
  readonly delayMs?: number | undefined
  /** Give up after this many runs (default 200). */
  readonly maxRuns?: number | undefined
}

export interface KillLoopResult {
  readonly kills: number
  readonly runs: number
  /** Type of the log's last event at each kill, and how often. */
  readonly phases: Map<string, number>
  /** Checkpoints the resumed runs started from. */
  readonly restored: ReadonlyArray<{ checkpoint: number; replaying: number }>
  /** The last run, which finished. */
  readonly last: Run
}

/** A failure of the loop itself (a run that failed, a lost acknowledged event), with what the run printed. */
export class KillLoopError extends Error {}

/**
 * Run the session until it finishes, killing it `kills` times after random progress. Fails when
 * a run exits other than by the kill, or an acknowledged event is missing after a kill.
 */
export const killLoop = async (options: KillLoopOptions): Promise<KillLoopResult> => {
  const phases = new Map<string, number>()
  const restored: Array<{ checkpoint: number; replaying: number }> = []
  let kills = 0
  let runs = 0
  const maxRuns = options.maxRuns ?? 200
  while (runs < maxRuns) {
    runs++
    const before = (await readEvents(options.state, options.session)).length
    const run = options.start()
    const most = typeof options.progress === "number" ? options.progress : options.progress(before)
    const target = before + 1 + Math.floor(Math.random() * Math.max(1, most))
    let timer: NodeJS.Timeout | undefined
    if (kills < options.kills) {
      const watch = setInterval(() => {
        if (run.acks.some((a) => a.seq >= target)) {
          clearInterval(watch)
          timer = setTimeout(run.kill, Math.floor(Math.random() * ((options.delayMs ?? 3) + 1)))
        }
      }, 1)
      run.exit.then(() => clearInterval(watch))
    }
    const exit = await run.exit
    if (timer) clearTimeout(timer)
    const events = await readEvents(options.state, options.session)
    for (const ack of run.acks) {
      if (events[ack.seq]?.type !== ack.type)
        throw new KillLoopError(`acknowledged seq ${ack.seq} (${ack.type}) missing after kill ${kills}`)
    }
    restored.push(...run.resumed)
    if (exit.signal === "SIGKILL") {
      kills++
      const lastEvent = events[events.length - 1]
      if (lastEvent) phases.set(lastEvent.type, (phases.get(lastEvent.type) ?? 0) + 1)
    } else if (exit.code !== 0) {
      throw new KillLoopError(`run ${runs} exited with ${exit.code ?? exit.signal}:\n${run.stderr()}`)
    } else {
      return { kills, runs, phases, restored, last: run }
    }
  }
  throw new KillLoopError(`the session did not finish in ${maxRuns} runs`)
}

/** A fresh directory under `parent`. */
export const freshDir = (parent: string, prefix: string) => fs.mkdtempSync(path.join(parent, prefix))
