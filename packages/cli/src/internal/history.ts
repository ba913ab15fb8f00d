/**
 * Reading recorded sessions: `muse sessions`, `muse log`, `muse replay` (and the shipped example).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { Approvals, Event, type EventLog } from "@musekit/core"
import { EventLogFile, SessionRuntime } from "@musekit/node"
import { Effect } from "effect"
import { escapeUnsafe, jsonSafe, pad, padStart, type Style, truncate, width, wrap } from "./ansi.js"
import { CliError, ExitCode } from "./exit.js"
import type * as LogStore from "./logStore.js"
import * as Plugins from "./plugins.js"
import * as Render from "./render.js"
import * as Session from "./session.js"
import * as Tools from "./tools.js"

export interface Out {
  readonly write: (s: string) => void
  readonly style: Style
  readonly columns: number
}

// ---------------------------------------------------------------------------------------------
// sessions

const two = (n: number) => String(n).padStart(2, "0")
export const fmtTime = (ms: number | null): string => {
  if (ms === null) return "-"
  const d = new Date(ms)
  return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ${two(d.getHours())}:${two(d.getMinutes())}`
}

export const fmtSize = (bytes: number): string =>
  bytes < 1024
    ? `${bytes} B`
    : bytes < 1024 * 1024
      ? `${(bytes / 1024).toFixed(1)} KiB`
      : `${(bytes / 1048576).toFixed(1)} MiB`

/**
 * The first user input of a session, read from the head of its log (where it is: the task is
 * recorded with the session's start); `null` when the log holds none.
 */
const firstInput = (dir: string, id: string): string | null => {
  try {
    const fd = fs.openSync(path.join(dir, "sessions", `${id}.jsonl`), "r")
    try {
      let head = ""
      const buf = Buffer.alloc(65536)
      for (let at = 0; at < 4 * 1048576; ) {
        const n = fs.readSync(fd, buf, 0, buf.length, at)
        if (n === 0) break
        at += n
        head += buf.subarray(0, n).toString("latin1")
        const lines = head.split("\n")
        head = lines.pop() ?? ""
        for (const line of lines) {
          if (!line.includes('"type":"user.input"')) continue
          try {
            const e = Event.fromJson(JSON.parse(Buffer.from(line, "latin1").toString("utf8")))
            const d = e?.data as { text?: unknown; preview?: unknown } | undefined
            if (typeof d?.text === "string") return d.text
            if (typeof d?.preview === "string") return `${d.preview}…`
          } catch {}
        }
      }
    } finally {
      fs.closeSync(fd)
    }
  } catch {}
  return null
}

/** What a session is about: its title, else its first input; never a task the log does not hold. */
const titleOf = (
  location: LogStore.Location,
  s: {
    readonly id: string
    readonly title: string | null
    readonly events: number
    readonly firstInput?: string | null | undefined
  }
) => {
  if (s.events === 0) return "(empty: stopped before its task was recorded)"
  const input =
    s.firstInput !== undefined ? s.firstInput : location.kind === "dir" ? firstInput(location.dir, s.id) : null
  if (input === null) return "(no task recorded)"
  return s.title && s.title.trim() !== "" ? s.title : input
}

export interface SessionRow {
  readonly id: string
  readonly title: string
  readonly started: number | null
  readonly lastEventAt: number | null
  readonly events: number
  readonly bytes: number
}

export const listSessions = (
  store: EventLog.StoreService,
  location: LogStore.Location
): Effect.Effect<ReadonlyArray<SessionRow>, CliError> =>
  Effect.map(
    store.sessions.pipe(Effect.mapError((e) => new CliError({ code: ExitCode.Failed, message: e.message }))),
    (list) =>
      list.map((s) => ({
        id: s.id,
        title: titleOf(location, s),
        started: s.started,
        lastEventAt: s.lastEventAt,
        events: s.events,
        bytes: s.bytes
      }))
  )

export const printSessions = (rows: ReadonlyArray<SessionRow>, out: Out, dir: string): void => {
  const s = out.style
  if (rows.length === 0) {
    out.write(`No sessions in ${dir} yet. Start one with: muse\n`)
    return
  }
  const header = ["ID", "STARTED", "LAST EVENT", "EVENTS", "SIZE", "TITLE"]
  const cells = rows.map((r) => [
    r.id,
    fmtTime(r.started),
    fmtTime(r.lastEventAt),
    Render.fmtInt(r.events),
    fmtSize(r.bytes),
    escapeUnsafe(r.title.replace(/[ \t\n]+/g, " "), s)
  ])
  const widths = header.map((h, i) => (i === 5 ? 0 : Math.max(h.length, ...cells.map((c) => width(c[i]!)))))
  const fixed = widths.slice(0, 5).reduce((a, b) => a + b + 2, 0)
  const titleWidth = Math.max(10, out.columns - 1 - fixed)
  const row = (c: ReadonlyArray<string>, style: (x: string) => string = (x) => x) =>
    [
      pad(c[0]!, widths[0]!),
      pad(c[1]!, widths[1]!),
      pad(c[2]!, widths[2]!),
      padStart(c[3]!, widths[3]!),
      padStart(c[4]!, widths[4]!),
      truncate(c[5]!, titleWidth)
    ]
      .map(style)
      .join("  ")
      .trimEnd()
  out.write(`${row(header, s.bold)}\n`)
  for (const c of cells) out.write(`${row(c)}\n`)
}

// ---------------------------------------------------------------------------------------------
// log

const typeMatches = (filter: string, type: string) =>
  filter.includes("*") ? Approvals.globMatch(filter, type) : type === filter || type.startsWith(`${filter}.`)

/** One line about an event, escaped. */
const summaryOf = (e: Event.Envelope, style: Style): string => {
  const d = (e.data ?? {}) as any
  if (e.type === "tool.started") return Render.toolTitle(String(d.tool ?? ""), d.summary, style)
  return escapeUnsafe(rawSummaryOf(e, d).replace(/ +/g, " "), style)
}

const rawSummaryOf = (e: Event.Envelope, d: any): string => {
  switch (e.type) {
    case "user.input":
    case "user.message":
      return String(d.text ?? "")
    case "model.requested":
      return `${d.model ?? ""} · ${d.messages ?? "?"} messages (+${Array.isArray(d.appended) ? d.appended.length : 0})`
    case "model.responded": {
      const calls = Array.isArray(d.toolCalls) ? d.toolCalls.map((c: any) => c.name).join(", ") : ""
      const u = d.usage ?? {}
      return `${d.finishReason ?? ""} · ${(u.inputTokens ?? 0) + (u.outputTokens ?? 0)} tokens${calls ? ` · calls ${calls}` : ""}${d.text ? ` · ${JSON.stringify(String(d.text).slice(0, 80))}` : ""}`
    }
    case "model.failed":
      return String(d.error ?? "")
    case "tool.completed":
      return `${d.tool ?? ""} ${d.isFailure ? "failed" : "ok"}${d.result?.exit_code !== undefined ? ` · exit ${d.result.exit_code}` : ""}`
    case "approval.decided":
      return `${d.tool ?? ""} ${d.allow ? "allowed" : "denied"} by ${d.by ?? "?"}${d.rule ? ` (${d.rule})` : ""}`
    case "turn.completed":
      return `${d.status ?? ""}${d.reason ? `: ${d.reason}` : ""}`
    case "file.changed":
      return String(d.path ?? "")
    default: {
      const j = JSON.stringify(e.data)
      return j === undefined ? "" : j
    }
  }
}

export interface LogOptions {
  readonly agent?: string | undefined
  readonly type?: string | undefined
  readonly json: boolean
}

export const printLog = (events: ReadonlyArray<Event.Envelope>, options: LogOptions, out: Out): number => {
  const s = out.style
  const shown = events.filter(
    (e) => (!options.agent || e.agent === options.agent) && (!options.type || typeMatches(options.type, e.type))
  )
  for (const e of shown) {
    if (options.json) {
      out.write(`${jsonSafe(Event.encodeLine(e))}\n`)
      continue
    }
    const d = new Date(e.at)
    const time = `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}.${String(d.getMilliseconds()).padStart(3, "0")}`
    const head = `${padStart(String(e.seq), 5)} ${s.dim(time)} ${pad(s.magenta(escapeUnsafe(e.agent, s)), 10)} ${pad(s.cyan(escapeUnsafe(e.type, s)), 20)} `
    const room = Math.max(10, out.columns - 1 - width(head))
    // one line per event: line breaks show as \n, like every other control character
    out.write(`${head}${truncate(summaryOf(e, s), room)}\n`)
  }
  return shown.length
}

// ---------------------------------------------------------------------------------------------
// replay

/** The folder of the CLI package (examples live there). */
export const packageDir = (): string => {
  let dir = path.dirname(fileURLToPath(import.meta.url))
  for (let i = 0; i < 6; i++) {
    const pkg = path.join(dir, "package.json")
    if (fs.existsSync(pkg)) {
      try {
        if (JSON.parse(fs.readFileSync(pkg, "utf8")).name === "@musekit/cli") return dir
      } catch {}
    }
    dir = path.dirname(dir)
  }
  return path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
}

export const EXAMPLE = "fix-failing-test"
export const examplesDir = (): string => path.join(packageDir(), "examples")

/** Events of a standalone `.jsonl` log (checksums verified). */
export const readLogFile = (file: string): Effect.Effect<ReadonlyArray<Event.Envelope>, CliError> =>
  Effect.try({
    try: () => {
      const buf = fs.readFileSync(file)
      const out: Array<Event.Envelope> = []
      let line = 0
      for (const raw of buf.toString("utf8").split("\n")) {
        line++
        if (raw === "") continue
        const check = EventLogFile.verifyLine(Buffer.from(raw, "utf8"))
        if ("bad" in check) throw new Error(`${file}:${line}: ${check.bad}`)
        const e = Event.fromJson(JSON.parse(raw))
        if (e) out.push(e)
      }
      return out
    },
    catch: (e) => new CliError({ code: ExitCode.Failed, message: (e as Error).message })
  })

export const printTranscript = (events: ReadonlyArray<Event.Envelope>, out: Out): void => {
  const totals = new Render.Totals()
  let lastAt = events[0]?.at ?? 0
  for (const e of events) {
    totals.add(e)
    lastAt = e.at
    const lines = Render.eventLines(e, {
      style: out.style,
      columns: out.columns,
      mainText: true,
      transcript: true,
      maxDiffLines: 80
    })
    const text = e.type === "model.responded" && e.agent === "main"
    for (const l of text ? lines.flatMap((x) => wrap(x, out.columns - 1)) : Render.wrapAll(lines, out.columns)) {
      out.write(`${l}\n`)
    }
  }
  const first = events[0]?.at ?? 0
  out.write(
    `${out.style.dim(`\n${Render.fmtInt(events.length)} events · ${totals.describe()} · ${Render.fmtDuration(lastAt - first)}`)}\n`
  )
}

export interface ReplayOptions {
  readonly session?: string | undefined
  readonly example: boolean
  readonly verify: boolean
  readonly flags: Pick<Session.Flags, "cwd" | "log">
  readonly env: Session.Env
}

/** `muse replay`: the transcript, and with `verify` a re-run of the program that must match the log. */
export const replay = (options: ReplayOptions, out: Out, err: Out): Effect.Effect<number, CliError> =>
  Effect.gen(function* () {
    let session: string
    let store: EventLog.StoreService
    let events: ReadonlyArray<Event.Envelope>
    if (options.example) {
      const dir = examplesDir()
      store = EventLogFile.makeStore({ dir })
      session = options.session ?? EXAMPLE
      const file = path.join(dir, `${session}.jsonl`)
      if (!fs.existsSync(file)) {
        const names = fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => f.endsWith(".jsonl")) : []
        return yield* new CliError({
          code: ExitCode.Usage,
          message: `no example ${session}; examples: ${names.map((n) => n.slice(0, -6)).join(", ") || "none"}`
        })
      }
      events = yield* readLogFile(file)
    } else {
      store = (yield* Session.storeFor(options.flags, options.env)).store
      session = options.session ?? (yield* Session.latestSession(store))
      events = (yield* Session.readRecorded(session, store)).events
    }
    if (!events.some((e) => e.type === "session.started")) {
      err.write(`session ${session} is empty: it stopped before its task was recorded, so there is nothing to replay\n`)
      return ExitCode.Success
    }
    printTranscript(events, out)
    if (!options.verify) return ExitCode.Success
    const config = yield* SessionRuntime.configOf(events).pipe(
      Effect.mapError((e) => new CliError({ code: ExitCode.Failed, message: e.message }))
    )
    const plugins = yield* Plugins.make({
      root: config.root,
      // a replay serves the model and the tools from the log: the skills only have to be there
      projectSkills: true,
      worktrees: Plugins.recordedWorktrees(config, session, true),
      contextWindow: config.contextWindow,
      // the tools the session's MCP servers offered, from its record: a replay starts no server
      mcp: yield* Session.recordedMcp(config, undefined, options.env.env)
    })
    const started = performance.now()
    const report = yield* (
      Tools.replay({
        session,
        store,
        verify: true,
        events,
        plugins: plugins.plugins
      }) as Effect.Effect<{ matched: number; total: number; endedEarly: boolean }, unknown>
    ).pipe(
      Effect.catchAll((e: any) =>
        Effect.fail(
          new CliError({
            code: ExitCode.Failed,
            message:
              e?._tag === "Divergence" || e?._tag === "Unreplayed"
                ? `replay of ${session} diverged at seq ${e.seq}:\n  expected ${e.expected}\n  got      ${e._tag === "Unreplayed" ? "nothing more (the program ended)" : e.got}`
                : `replay of ${session} failed: ${e?.message ?? String(e)}`
          })
        )
      ),
      Effect.catchAllDefect((d) =>
        Effect.fail(
          new CliError({
            code: ExitCode.Failed,
            message: `replay of ${session} failed: ${d instanceof Error ? d.message : String(d)}`
          })
        )
      )
    )
    err.write(
      `${err.style.green("✓")} verified: ${report.matched} of ${report.total} events replayed exactly${
        report.endedEarly ? " (the session was cut short there)" : ""
      } in ${Render.fmtDuration(performance.now() - started)}\n`
    )
    return ExitCode.Success
  }).pipe(Effect.scoped)
