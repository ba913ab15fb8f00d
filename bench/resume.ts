/**
 * How fast a long session comes back: time from process start until a resumed session is ready to
 * continue (restored from its latest checkpoint and replayed to the end of its log, waiting for the
 * next input), for sessions of 10k and 100k events; and replay-verify throughput. Beside, measured
 * in the same run: a process that only reads and parses the same log file, and a resume that
 * ignores the checkpoint and replays the whole log. Verify runs the bundled library in a fresh
 * process, as shipped (the log is read before the clock starts).
 *
 * ```sh
 * pnpm bench resume
 * ```
 * Generated sessions are kept in `bench/out/resume/` and reused by later runs.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { LanguageModel, type Prompt, type Response } from "@effect/ai"
import { Effect, Layer, Option, Schema, Stream } from "effect"
import { Tools } from "../packages/core/src/index.js"
import { EventLogFile, SessionRuntime } from "../packages/node/src/index.js"
import { CompactionPlugin } from "../plugins/compaction/src/index.js"
import { bundle, fmtInt, fmtMs, median, outDir, printTable, writeFigures } from "./report.js"

export const description = "resume time for 10k / 100k-event sessions, and replay-verify throughput"

const SIZES = (process.env.MUSE_BENCH_SIZES ?? "10000,100000").split(",").map(Number)
// generated sessions are tied to the recording format; a new version regenerates them
const store = path.join(outDir, "resume", "v3")

const noteTool = Tools.make({
  name: "read_note",
  description: "Read a note",
  parameters: { name: Schema.String },
  effect: "read",
  handler: ({ name }) => Effect.succeed({ name, text: `contents of ${name}: ${"lorem ipsum ".repeat(8)}` })
})

const systemOf = (prompt: Prompt.Prompt): string => {
  const m = prompt.content[0]
  return m?.role === "system" ? m.content : ""
}

/** Each task: two model turns of two tool calls, then a short answer (21 events). */
const model = () => {
  let n = 0
  const reply = (system: string): Array<Response.PartEncoded> => {
    if (!system.startsWith("bench")) {
      // a summary request from the compactor
      return [
        { type: "text", text: "## Goal\nwork through the tasks\n## Progress\nmany tasks done" },
        { type: "finish", reason: "stop", usage: { inputTokens: 500, outputTokens: 40, totalTokens: 540 } }
      ]
    }
    const step = n++ % 3
    const usage = { inputTokens: 120, outputTokens: 12, totalTokens: 132 }
    if (step === 2)
      return [
        { type: "text", text: `done ${n}` },
        { type: "finish", reason: "stop", usage }
      ]
    return [
      { type: "tool-call", id: `c${n}a`, name: "read_note", params: { name: `a${n % 40}` }, providerExecuted: false },
      { type: "tool-call", id: `c${n}b`, name: "read_note", params: { name: `b${n % 40}` }, providerExecuted: false },
      { type: "finish", reason: "tool-calls", usage }
    ]
  }
  return Layer.effect(
    LanguageModel.LanguageModel,
    LanguageModel.make({
      generateText: (o) => Effect.sync(() => reply(systemOf(o.prompt))),
      streamText: (o) =>
        Stream.suspend(() =>
          Stream.fromIterable(
            reply(systemOf(o.prompt)).flatMap(
              (p): Array<Response.StreamPartEncoded> =>
                p.type === "text"
                  ? [
                      { type: "text-start", id: "t" },
                      { type: "text-delta", id: "t", delta: p.text },
                      { type: "text-end", id: "t" }
                    ]
                  : [p as Response.StreamPartEncoded]
            )
          )
        )
    })
  )
}

/** A long session keeps its context bounded with compaction, as a day-long session would. */
const plugins = () => [CompactionPlugin.make({ contextWindow: 16_000 })]
const services = (): SessionRuntime.Services => ({ languageModel: model(), tools: [noteTool], plugins: plugins() })
const never: SessionRuntime.Io["prompter"] = { ask: () => Effect.dieMessage("no questions in this bench") }

/** Record a session of at least `events` events (each input is a short task for the main agent). */
const generate = async (events: number, dir: string, session: string) => {
  let written = 0
  let tasks = 0
  const io: SessionRuntime.Io = {
    input: Effect.sync(() => (written >= events ? Option.none() : Option.some(`task ${++tasks}`))),
    prompter: never,
    onEvent: () => Effect.sync(() => void written++)
  }
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "muse-bench-root-"))
  const config = SessionRuntime.config({
    root,
    model: "scripted/bench",
    approvalMode: "auto",
    crew: false,
    instructions: "bench"
  })
  await Effect.runPromise(SessionRuntime.start({ config, session, dir, io, services: services() }))
  return written
}

/** In a fresh process: resume the session and report when it is ready for the next input. */
const resumeChild = async (dir: string, session: string, useCheckpoint: boolean) => {
  const io: SessionRuntime.Io = {
    input: Effect.sync(() => {
      process.stdout.write(`${JSON.stringify({ readyMs: performance.now() })}\n`)
      process.exit(0)
    }),
    prompter: never
  }
  await Effect.runPromise(
    // checkpointEvery 0: the measured runs leave the session as they found it
    SessionRuntime.resume({
      session,
      dir,
      io,
      services: services(),
      useCheckpoint,
      checkpointEvery: 0
    }) as Effect.Effect<unknown, unknown>
  )
}

/** In a fresh process: replay the whole session with verify (the log read beforehand, not timed). */
const verifyChild = async (dir: string, session: string) => {
  const events = await Effect.runPromise(EventLogFile.readSession(session, { dir }))
  const t0 = performance.now()
  const report = await Effect.runPromise(
    SessionRuntime.replay({ session, dir, verify: true, events, tools: [noteTool], plugins: plugins() })
  )
  const verifyMs = performance.now() - t0
  process.stdout.write(`${JSON.stringify({ readyMs: performance.now(), verifyMs, matched: report.matched })}\n`)
}

/** In a fresh process: read and parse the log, nothing else (the floor). */
const readChild = (dir: string, session: string) => {
  const text = fs.readFileSync(path.join(dir, "sessions", `${session}.jsonl`), "utf8")
  let n = 0
  for (const line of text.split("\n")) if (line) n += JSON.parse(line).seq >= 0 ? 1 : 0
  process.stdout.write(`${JSON.stringify({ readyMs: performance.now(), n })}\n`)
}

const child = (file: string, args: Array<string>) => {
  const out = spawnSync(process.execPath, [file, ...args], { encoding: "utf8", maxBuffer: 1 << 24 })
  if (out.status !== 0) throw new Error(`${args[0]} failed:\n${out.stderr}`)
  return JSON.parse(out.stdout.trim().split("\n").pop()!) as { readyMs: number; verifyMs?: number; matched?: number }
}

const startup = (args: Array<string>) => {
  const out = spawnSync(process.execPath, args, { encoding: "utf8" })
  if (out.status !== 0) throw new Error(out.stderr)
}

export const run = async () => {
  const file = await bundle(fileURLToPath(import.meta.url), "resume")
  const rows: Array<Array<string>> = []
  const figures: Record<string, unknown> = {}
  // the cost of starting node at all, for scale
  const nodeStart: Array<number> = []
  for (let i = 0; i < 5; i++) {
    const t0 = performance.now()
    startup(["-e", "0"])
    nodeStart.push(performance.now() - t0)
  }
  for (const size of SIZES) {
    const dir = path.join(store, String(size))
    const session = "bench"
    let count: number
    if (!fs.existsSync(path.join(dir, "sessions", `${session}.jsonl`))) {
      fs.mkdirSync(dir, { recursive: true })
      const t0 = performance.now()
      count = await generate(size, dir, session)
      process.stdout.write(`generated ${fmtInt(count)} events in ${fmtMs(performance.now() - t0)}\n`)
    }
    const events = await Effect.runPromise(EventLogFile.readSession(session, { dir }))
    count = events.length
    const bytes = fs.statSync(path.join(dir, "sessions", `${session}.jsonl`)).size
    const checkpoint = EventLogFile.readCheckpoint(dir, session)
    const checkpointSeq = checkpoint._tag === "Right" ? checkpoint.right.seq : -1
    const resume: Array<number> = []
    const full: Array<number> = []
    const read: Array<number> = []
    for (let i = 0; i < 3; i++) {
      read.push(child(file, ["--read", dir, session]).readyMs)
      resume.push(child(file, ["--resume", dir, session]).readyMs)
      full.push(child(file, ["--resume-full", dir, session]).readyMs)
    }
    // verify as shipped: the bundled library in a fresh process (median of 3), the log read beforehand
    const verifies = [0, 1, 2].map(() => child(file, ["--verify", dir, session]))
    const verifyMs = median(verifies.map((v) => v.verifyMs!))
    const matched = verifies[0]!.matched!
    if (matched !== count) throw new Error(`verify matched ${matched} of ${count} events`)
    const perSecond = (matched / verifyMs) * 1000
    rows.push([
      fmtInt(count),
      `${(bytes / 2 ** 20).toFixed(1)} MiB`,
      fmtInt(count - 1 - checkpointSeq),
      fmtMs(median(read)),
      fmtMs(median(resume)),
      `${(median(resume) / median(read)).toFixed(2)}x`,
      fmtMs(median(full)),
      fmtInt(perSecond)
    ])
    figures[String(size)] = {
      events: count,
      bytes,
      eventsAfterCheckpoint: count - 1 - checkpointSeq,
      readMs: median(read),
      resumeMs: median(resume),
      resumeWithoutCheckpointMs: median(full),
      verifyMs,
      verifyEventsPerSecond: perSecond
    }
  }
  printTable(
    `Resume (process start → ready to continue; median of 3) beside reading the log alone; node -e 0 = ${fmtMs(median(nodeStart))}`,
    ["events", "log", "after checkpoint", "read+parse only", "resume", "ratio", "resume, whole log", "verify events/s"],
    rows
  )
  process.stdout.write("\naims: 100k events resume in <= 1 s; verify >= 50k events/s\n")
  writeFigures("resume", { nodeStartMs: median(nodeStart), ...figures })
}

if (process.argv.includes("--resume")) {
  const i = process.argv.indexOf("--resume")
  await resumeChild(process.argv[i + 1]!, process.argv[i + 2]!, true)
} else if (process.argv.includes("--resume-full")) {
  const i = process.argv.indexOf("--resume-full")
  await resumeChild(process.argv[i + 1]!, process.argv[i + 2]!, false)
} else if (process.argv.includes("--verify")) {
  const i = process.argv.indexOf("--verify")
  await verifyChild(process.argv[i + 1]!, process.argv[i + 2]!)
} else if (process.argv.includes("--read")) {
  const i = process.argv.indexOf("--read")
  readChild(process.argv[i + 1]!, process.argv[i + 2]!)
} else if (import.meta.url === `file://${process.argv[1]}` && !process.argv[1]!.endsWith(".mjs")) {
  await run()
}
