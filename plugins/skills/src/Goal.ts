/**
 * Goals: an objective the agent works on until it holds.
 *
 * `/goal <objective> [--check "<command>"] [--judge "<criterion>"] [--max-attempts N]
 * [--max-turns N] [--max-tokens N] [--max-time 30m]`
 *
 * With `--check`, the goal holds when the command exits 0 in the workspace root; it runs once
 * before the first attempt and after every attempt. Without it, a judge agent (its own agent,
 * `goal-judge`, with read-only tools) decides after every attempt whether the criterion (the
 * objective, or `--judge`) is met, and its verdict and reasoning are recorded. The goal stops when
 * it holds, when the budget (attempts, model calls, tokens, time) runs out, or when the agent
 * fails.
 *
 * Events of the agent that ran the skill:
 *
 * | event                    | data                                                                 |
 * |--------------------------|----------------------------------------------------------------------|
 * | `goal.started`           | `{ goal, objective, check, budget }`                                 |
 * | `goal.attempt.started`   | `{ goal, attempt }`                                                  |
 * | `goal.attempt.completed` | `{ goal, attempt, status, turns, tokens, text }`                     |
 * | `goal.check.started`     | `{ goal, attempt, kind: "command", command }` or `{ …, kind: "judged", criterion }` |
 * | `goal.check.completed`   | `{ goal, attempt, kind, passed, exitCode, output, timedOut, durationMs }` or `{ …, verdict, reasoning }` |
 * | `goal.completed`         | `{ goal, status: "achieved" \| "budget" \| "failed", attempts, reason, turns, tokens, elapsedMs }` |
 *
 * A command check is a recorded step (intent before the command runs, outcome after), so a
 * resumed session never runs a finished check again and replay never runs it at all.
 *
 * @example
 * ```ts
 * import { Goal } from "@musekit/plugin-skills"
 *
 * Goal.parseArgs('make the tests pass --check "npm test" --max-turns 40 --max-time 20m')
 * // Either.right({ objective: "make the tests pass", check: "npm test", maxTurns: 40, maxTimeMs: 1200000, … })
 * ```
 */
import { spawn } from "node:child_process"
import type { Event } from "@musekit/core"
import { Effect, Either, Option, ParseResult, Schema } from "effect"

export interface Args {
  readonly objective: string
  /** A command that must exit 0 for the goal to hold. */
  readonly check: string | undefined
  /** What the judge decides on when there is no check (default: the objective). */
  readonly criterion: string | undefined
  readonly maxAttempts: number | undefined
  readonly maxTurns: number | undefined
  readonly maxTokens: number | undefined
  readonly maxTimeMs: number | undefined
}

export const usage =
  '/goal <objective> [--check "<command>"] [--judge "<criterion>"] [--max-attempts N] [--max-turns N] [--max-tokens N] [--max-time 30m]'

interface Token {
  readonly value: string
  readonly raw: string
}

/** Split like a shell: whitespace separates, "…" and '…' quote, backslash escapes in "…". */
export const tokenize = (text: string): Either.Either<ReadonlyArray<Token>, string> => {
  const out: Array<Token> = []
  let i = 0
  while (i < text.length) {
    while (i < text.length && /\s/.test(text[i]!)) i++
    if (i >= text.length) break
    const start = i
    let value = ""
    while (i < text.length && !/\s/.test(text[i]!)) {
      const c = text[i]!
      if (c === '"' || c === "'") {
        const close = c
        i++
        let closed = false
        while (i < text.length) {
          const d = text[i]!
          if (d === close) {
            closed = true
            i++
            break
          }
          if (close === '"' && d === "\\" && i + 1 < text.length && /["\\$`]/.test(text[i + 1]!)) {
            value += text[i + 1]
            i += 2
            continue
          }
          value += d
          i++
        }
        if (!closed) return Either.left(`unterminated ${close} quote starting at ${text.slice(start, start + 20)}…`)
      } else {
        value += c
        i++
      }
    }
    out.push({ value, raw: text.slice(start, i) })
  }
  return Either.right(out)
}

/** `90s`, `30m`, `2h`, `1h30m`, `500ms`, or a number of seconds. */
export const parseDuration = (text: string): number | undefined => {
  const t = text.trim().toLowerCase()
  if (/^\d+(\.\d+)?$/.test(t)) return Math.round(Number(t) * 1000)
  const re = /(\d+(?:\.\d+)?)\s*(ms|h|m|s)/g
  let total = 0
  let consumed = ""
  for (let m = re.exec(t); m; m = re.exec(t)) {
    const n = Number(m[1])
    total += m[2] === "h" ? n * 3_600_000 : m[2] === "m" ? n * 60_000 : m[2] === "s" ? n * 1000 : n
    consumed += m[0]
  }
  return consumed.replace(/\s/g, "") === t.replace(/\s/g, "") && consumed.length > 0 ? Math.round(total) : undefined
}

/** `50000`, `50k`, `1.5M`. */
export const parseCount = (text: string): number | undefined => {
  const m = /^(\d+(?:\.\d+)?)([kKmM]?)$/.exec(text.trim())
  if (!m) return undefined
  const n = Number(m[1]) * (m[2]?.toLowerCase() === "k" ? 1000 : m[2]?.toLowerCase() === "m" ? 1_000_000 : 1)
  return Number.isFinite(n) && n >= 1 ? Math.round(n) : undefined
}

const flags = ["--check", "--judge", "--max-attempts", "--max-turns", "--max-tokens", "--max-time"] as const

/** Parse the text after `/goal`; `Left` is a message for the user. */
export const parseArgs = (text: string): Either.Either<Args, string> =>
  Either.flatMap(tokenize(text), (tokens) => {
    const objective: Array<string> = []
    const values: Partial<Record<(typeof flags)[number], string>> = {}
    for (let i = 0; i < tokens.length; i++) {
      const t = tokens[i]!
      if (!t.raw.startsWith("--")) {
        objective.push(t.raw)
        continue
      }
      const eq = t.value.indexOf("=")
      const name = eq >= 0 ? t.value.slice(0, eq) : t.value
      if (!(flags as ReadonlyArray<string>).includes(name)) {
        return Either.left(`unknown option ${name}; options: ${flags.join(", ")}. Usage: ${usage}`)
      }
      let value: string | undefined
      if (eq >= 0) value = t.value.slice(eq + 1)
      else {
        value = tokens[i + 1]?.value
        i++
      }
      if (value === undefined || value.trim() === "") return Either.left(`${name} needs a value. Usage: ${usage}`)
      values[name as (typeof flags)[number]] = value
    }
    const goal = objective.join(" ").trim()
    if (goal === "") return Either.left(`give an objective. Usage: ${usage}`)
    const count = (flag: "--max-attempts" | "--max-turns" | "--max-tokens") => {
      const v = values[flag]
      if (v === undefined) return Either.right(undefined)
      const n = parseCount(v)
      return n === undefined ? Either.left(`${flag} needs a positive number, got "${v}"`) : Either.right(n)
    }
    const attempts = count("--max-attempts")
    const turns = count("--max-turns")
    const tokenBudget = count("--max-tokens")
    const time = values["--max-time"]
    const ms = time === undefined ? undefined : parseDuration(time)
    if (Either.isLeft(attempts)) return Either.left(attempts.left)
    if (Either.isLeft(turns)) return Either.left(turns.left)
    if (Either.isLeft(tokenBudget)) return Either.left(tokenBudget.left)
    if (time !== undefined && (ms === undefined || ms <= 0)) {
      return Either.left(`--max-time needs a duration like 90s, 30m, 2h or 1h30m, got "${time}"`)
    }
    if (values["--check"] !== undefined && values["--judge"] !== undefined) {
      return Either.left("give either --check (a command) or --judge (a criterion), not both")
    }
    return Either.right({
      objective: goal,
      check: values["--check"],
      criterion: values["--judge"],
      maxAttempts: attempts.right,
      maxTurns: turns.right,
      maxTokens: tokenBudget.right,
      maxTimeMs: ms
    })
  })

const ArgsValue = Schema.declare((u: unknown): u is Args => typeof u === "object" && u !== null && "objective" in u)

/** The argument schema of `/goal`: decodes the text after `/goal`, with `parseArgs`'s messages. */
export const ArgsFromString: Schema.Schema<Args, string> = Schema.transformOrFail(Schema.String, ArgsValue, {
  strict: true,
  decode: (text, _, ast) =>
    Either.match(parseArgs(text), {
      onLeft: (message) => ParseResult.fail(new ParseResult.Type(ast, text, message)),
      onRight: ParseResult.succeed
    }),
  encode: (a) =>
    ParseResult.succeed(
      [
        a.objective,
        a.check === undefined ? "" : `--check ${JSON.stringify(a.check)}`,
        a.criterion === undefined ? "" : `--judge ${JSON.stringify(a.criterion)}`,
        a.maxAttempts === undefined ? "" : `--max-attempts ${a.maxAttempts}`,
        a.maxTurns === undefined ? "" : `--max-turns ${a.maxTurns}`,
        a.maxTokens === undefined ? "" : `--max-tokens ${a.maxTokens}`,
        a.maxTimeMs === undefined ? "" : `--max-time ${a.maxTimeMs / 1000}s`
      ]
        .filter((s) => s.length > 0)
        .join(" ")
    )
})

// ---------------------------------------------------------------------------------------------
// Running a check command
// ---------------------------------------------------------------------------------------------

export interface CommandResult {
  /** The exit code; `null` when the command was killed (timeout). */
  readonly exitCode: number | null
  /** The end of stdout and stderr, interleaved as they arrived. */
  readonly output: string
  readonly timedOut: boolean
  readonly durationMs: number
}

/**
 * Run `command` with `sh -c` in `cwd`, stdin closed, stdout and stderr merged. On timeout (or when
 * the effect is interrupted) the command and everything it started are killed.
 */
export const runCommand = (options: {
  readonly command: string
  readonly cwd: string
  readonly timeoutMs: number
  /** Output kept, from the end (default 64 KiB). */
  readonly maxOutputBytes?: number | undefined
}): Effect.Effect<CommandResult> =>
  Effect.async<CommandResult>((resume) => {
    const started = Date.now()
    const max = options.maxOutputBytes ?? 64 * 1024
    let chunks: Array<Buffer> = []
    let size = 0
    let dropped = 0
    let timedOut = false
    let done = false
    const child = spawn("sh", ["-c", options.command], {
      cwd: options.cwd,
      stdio: ["ignore", "pipe", "pipe"],
      detached: true
    })
    const killGroup = () => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL")
      } catch {}
    }
    const onData = (b: Buffer) => {
      chunks.push(b)
      size += b.length
      if (size > max * 2) {
        const all = Buffer.concat(chunks)
        dropped += all.length - max
        chunks = [all.subarray(all.length - max)]
        size = max
      }
    }
    child.stdout.on("data", onData)
    child.stderr.on("data", onData)
    const timer = setTimeout(() => {
      timedOut = true
      killGroup()
    }, options.timeoutMs)
    const finish = (exitCode: number | null, extra = "") => {
      if (done) return
      done = true
      clearTimeout(timer)
      killGroup()
      let all = Buffer.concat(chunks)
      if (all.length > max) {
        dropped += all.length - max
        all = all.subarray(all.length - max)
      }
      const text = all.toString("utf8")
      resume(
        Effect.succeed({
          exitCode,
          output: `${dropped > 0 ? `[… ${dropped} bytes cut]\n` : ""}${text}${extra}`,
          timedOut,
          durationMs: Date.now() - started
        })
      )
    }
    child.on("error", (e) => finish(127, `could not run the command: ${e.message}\n`))
    child.on("exit", (code) => {
      // wait briefly for the pipes to drain; background children holding them are killed with the group
      let open = 2
      const closed = () => {
        if (--open === 0) finish(code)
      }
      child.stdout.once("close", closed)
      child.stderr.once("close", closed)
      setTimeout(() => finish(code), 500).unref()
    })
    return Effect.sync(() => {
      done = true
      clearTimeout(timer)
      killGroup()
    })
  })

// ---------------------------------------------------------------------------------------------
// Folding the log
// ---------------------------------------------------------------------------------------------

export interface Snapshot {
  readonly agent: string
  readonly goal: string
  readonly objective: string
  readonly status: "working" | "achieved" | "budget" | "failed"
  readonly attempts: number
  /** The last check's result: passed, and its exit code or verdict. */
  readonly lastCheck: { readonly passed: boolean; readonly detail: string } | undefined
  readonly reason: string | undefined
}

/** The latest goal in a log (of `agent`, or of any agent). */
export const fromEvents = (events: ReadonlyArray<Event.Envelope>, agent?: string): Option.Option<Snapshot> => {
  let snap: { -readonly [K in keyof Snapshot]: Snapshot[K] } | undefined
  for (const e of events) {
    if (agent !== undefined && e.agent !== agent) continue
    if (!e.type.startsWith("goal.")) continue
    const d = e.data as any
    if (e.type === "goal.started") {
      snap = {
        agent: e.agent,
        goal: String(d.goal),
        objective: String(d.objective),
        status: "working",
        attempts: 0,
        lastCheck: undefined,
        reason: undefined
      }
      continue
    }
    if (!snap || d?.goal !== snap.goal || e.agent !== snap.agent) continue
    if (e.type === "goal.attempt.started") snap.attempts = Number(d.attempt)
    else if (e.type === "goal.check.completed") {
      snap.lastCheck = {
        passed: d.passed === true,
        detail: d.kind === "judged" ? `verdict ${d.verdict}` : `exit ${d.exitCode === null ? "none" : d.exitCode}`
      }
    } else if (e.type === "goal.completed") {
      snap.status = d.status
      snap.reason = d.reason ?? undefined
    }
  }
  return Option.fromNullable(snap)
}
